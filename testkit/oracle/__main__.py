"""``python -m testkit.oracle --cases N --seed S``: toposched's admission predictor against real kubelets.

Needs the local cluster (``make cluster``) and root (the real nodes). Runs the cases on ``--nodes``
real nodes side by side (``oracle-0`` ..., see ``--prefix``; removed at the end unless ``--keep``), prints a line per
case with a disagreement, an error or no judgement (every case with ``-v``), writes every step to ``--out`` (JSON)
when asked, and ends with exactly one summary line:

    oracle: N cases, D undocumented disagreements

The line before it counts the pods judged, the disagreements by kind, the cases that could not
run and the cases not judged (the kubelet, alive, did not decide on a pod in time: its hint merge
on a machine of many zones; see ``deadline``). Exit status: 0 when D is 0, 1 otherwise, 2 when
the run itself failed or a case could not run; a case not judged changes neither.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time

from kubernetes_asyncio import client, config

from testkit.oracle.cases import Case, generate
from testkit.oracle.compare import Disagreement, compare
from testkit.oracle.observe import CaseRun, Observer, prepare
from testkit.oracle.report import EXIT_FAILED, case_lines, exit_status, last_line, tally_line, to_json
from testkit.oracle.runs import case_arguments, finish
from testkit.realnode import RealNodeError, remove_node
from testkit.realnode.cluster import LocalCluster


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m testkit.oracle", description=__doc__.split("\n\n")[0])
    case_arguments(parser, 200, "every case, step and disagreement")
    parser.add_argument("--nodes", type=int, default=3, help="real nodes running cases side by side (default 3)")
    parser.add_argument("--keep", action="store_true", help="leave the oracle's nodes running at the end")
    parser.add_argument(
        "--prefix", default="oracle", help="name the real nodes <prefix>-0, <prefix>-1, ... (default oracle)"
    )
    return parser.parse_args(argv)


async def run_all(args: argparse.Namespace) -> tuple[list[CaseRun], list[Disagreement]]:
    cases = generate(args.seed, args.cases, args.first)
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(LocalCluster().kubeconfig), client_configuration=configuration)
    runs: list[CaseRun] = []
    disagreements: list[Disagreement] = []
    queue: asyncio.Queue[Case] = asyncio.Queue()
    for case in cases:
        queue.put_nowait(case)
    async with client.ApiClient(configuration) as api:
        await prepare(api)

        async def worker(node: str) -> None:
            observer = Observer(node, api)
            while not queue.empty():
                case = queue.get_nowait()
                run = await observer.run(case)
                found = compare(run)
                runs.append(run)
                disagreements.extend(found)
                lines = case_lines(run, found, args.verbose)
                if lines:
                    print("\n".join(lines), flush=True)

        await asyncio.gather(*(worker(f"{args.prefix}-{i}") for i in range(max(1, min(args.nodes, len(cases))))))
    runs.sort(key=lambda r: r.case.number)
    return runs, disagreements


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    try:
        runs, disagreements = asyncio.run(run_all(args))
    except RealNodeError as exc:
        print(f"oracle: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if not args.keep:
            for i in range(args.nodes):
                with contextlib.suppress(RealNodeError):  # never created
                    remove_node(f"{args.prefix}-{i}")
    tally = tally_line(runs, disagreements, time.monotonic() - started)
    finish(tally, last_line(runs, disagreements), args.out, lambda: to_json(runs, disagreements))
    return exit_status(runs, disagreements)


if __name__ == "__main__":
    raise SystemExit(main())
