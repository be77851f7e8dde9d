"""``python -m testkit.oracle_dra --cases N --seed S``: toposched's prediction of the DRA pick
against the real kube-scheduler.

Needs the local control plane (``make cluster``; kwok nodes only) and the allocator helper
(``make binaries``). Runs the cases on ``--workers`` sets of kwok nodes side by side (removed at
the end unless ``--keep``), prints a line per case with a disagreement, an error or no judgement
(every case with ``-v``), writes every case to ``--out`` (JSON) when asked, and ends with exactly
one summary line:

    oracle-dra: N cases, D undocumented disagreements

The line before it counts what the scheduler did with the case pods, the disagreements by kind,
the cases that could not run and those not judged. Exit status: 0 when D is 0, 1 otherwise, 2
when the run itself failed or a case could not run; a case not judged changes neither.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import time
from pathlib import Path

from testkit.oracle.runs import EXIT_FAILED, case_arguments, exit_status, finish, summary
from testkit.oracle_dra.cases import Case, generate
from testkit.oracle_dra.compare import Disagreement, compare
from testkit.oracle_dra.nodes import ensure_nodes, remove_nodes, worker_nodes
from testkit.oracle_dra.observe import FAILURES, CaseRun, Worker
from testkit.oracle_dra.predict import Predictor
from testkit.oracle_dra.report import case_lines, tally_line, to_json
from testkit.realnode import RealNodeError
from testkit.realnode.cluster import LocalCluster
from toposched.kube import rest
from toposched.kube.credentials import from_kubeconfig

ORACLE = "oracle-dra"
"""The last line's name: ``oracle-dra: N cases, D undocumented disagreements``."""
HELPER = "toposched-dra-allocate"
NODES_PER_WORKER = 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m testkit.oracle_dra", description=__doc__.split("\n\n")[0])
    case_arguments(parser, 100, "every case, prediction and observation")
    parser.add_argument("--workers", type=int, default=2, help="cases run side by side, each on its own nodes")
    parser.add_argument("--keep", action="store_true", help="leave the oracle's nodes at the end")
    parser.add_argument("--prefix", default="odra", help="name the nodes <prefix>-<worker>-<n> (default odra)")
    parser.add_argument("--helper", type=Path, help=f"the {HELPER} binary (default: the pinned bin dir's)")
    return parser.parse_args(argv)


async def run_all(args: argparse.Namespace, helper: Path) -> tuple[list[CaseRun], list[Disagreement]]:
    cases = generate(args.seed, args.cases, args.first)
    queue: asyncio.Queue[Case] = asyncio.Queue()
    for case in cases:
        queue.put_nowait(case)
    runs: list[CaseRun] = []
    disagreements: list[Disagreement] = []
    workers = [(f"{args.prefix}-{w}", worker_nodes(args.prefix, w, NODES_PER_WORKER)) for w in range(args.workers)]
    api = rest.Kube(from_kubeconfig(LocalCluster().kubeconfig).refreshed())
    predictor = Predictor(api, str(helper))
    try:
        await predictor.start()
        for name, nodes in workers:
            await ensure_nodes(api, name, nodes)

        async def work(name: str, nodes: list[str]) -> None:
            worker = Worker(name, nodes, api, predictor)
            while not queue.empty():
                run = await worker.run(queue.get_nowait())
                found = compare(run)
                runs.append(run)
                disagreements.extend(found)
                if lines := case_lines(run, found, args.verbose):
                    print("\n".join(lines), flush=True)

        await asyncio.gather(*(work(name, nodes) for name, nodes in workers))
    finally:
        if not args.keep:
            await remove_nodes(api, [n for _, nodes in workers for n in nodes])
        await predictor.close()
        await api.close()
    return sorted(runs, key=lambda r: r.case.number), disagreements


def find_helper() -> Path:
    """The pinned bin dir's helper (``make binaries``), else the one on PATH, as the extender finds it."""
    try:
        return LocalCluster().bin_dir() / HELPER
    except RealNodeError:  # the pinned binaries incomplete, or built from other sources
        found = shutil.which(HELPER)
        if found is None:
            raise RealNodeError(f"{HELPER} is neither built nor on PATH: build it with `make binaries`") from None
        return Path(found)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    try:
        runs, disagreements = asyncio.run(run_all(args, args.helper or find_helper()))
    except (RealNodeError, *FAILURES) as exc:
        print(f"{ORACLE}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    tally = tally_line(runs, disagreements, time.monotonic() - started)
    finish(tally, summary(ORACLE, len(runs), disagreements), args.out, lambda: to_json(runs, disagreements))
    return exit_status((r.outcome for r in runs), disagreements)


if __name__ == "__main__":
    raise SystemExit(main())
