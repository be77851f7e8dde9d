"""``python -m testkit.chaos``: a fault run (root: it starts real kubelet nodes); prints each fault
and its recovery, then one line; ``--json`` writes the figures. Exit status 1 when a goal is missed
(a TopologyAffinityError, a blind pass, a recovery above 5 s, the extender's RSS up by more than
10 % once every kind of fault has happened, a traceback)."""

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

# The fake kubelets' gRPC runs in this process, which starts exporters from threads: without this
# gRPC says at every start that it skips its fork handlers (no child here uses gRPC).
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from testkit.chaos.plane import PlaneError
from testkit.chaos.run import Options, run


def _gap(text: str) -> tuple[float, float]:
    low, _, high = text.partition(",")
    return float(low), float(high or low)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testkit.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="how long the pod stream and the faults go on")
    parser.add_argument("--seed", type=int, default=1, help="the faults, their targets and the pods follow from it")
    parser.add_argument("--real-nodes", type=int, default=3)
    parser.add_argument("--kwok-nodes", type=int, default=4)
    parser.add_argument("--exporter-period", type=float, default=10.0, help="every exporter's --period (seconds)")
    parser.add_argument("--gap", type=_gap, default=(20.0, 40.0), metavar="LOW,HIGH", help="seconds between faults")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    options = Options(
        seconds=args.minutes * 60,
        seed=args.seed,
        real=args.real_nodes,
        kwok=args.kwok_nodes,
        exporter_period=args.exporter_period,
        gap=args.gap,
    )
    try:
        outcome = asyncio.run(run(options, lambda text: print(text, flush=True)))
    except PlaneError as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        return 2
    if args.json is not None:
        args.json.write_text(json.dumps(outcome.figures(), indent=2) + "\n")
    print(outcome.line())
    return 0 if outcome.goals_met() else 1


if __name__ == "__main__":
    sys.exit(main())
