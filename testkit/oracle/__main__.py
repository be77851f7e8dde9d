"""``python -m testkit.oracle --cases N --seed S``: toposched's admission predictor against real kubelets.

Needs the local cluster (``make cluster``) and root (the real nodes). Runs the cases on ``--nodes``
real nodes side by side (``oracle-0`` ..., see ``--prefix``; removed at the end unless ``--keep``), prints a line per
case with a disagreement (every case with ``-v``), writes every step to ``--out`` (JSON) when
asked, and ends with exactly one summary line:

    oracle: N cases, D undocumented disagreements

Exit status: 0 when D is 0, 1 otherwise, 2 when the run itself failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

from testkit.oracle.cases import Case, generate
from testkit.oracle.compare import KNOWN, Disagreement, compare
from testkit.oracle.observe import CaseRun, Observer, prepare
from testkit.realnode import RealNodeError, remove_node
from testkit.realnode.cluster import LocalCluster


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m testkit.oracle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200, help="how many cases (default 200)")
    parser.add_argument("--seed", type=int, default=1, help="the generator's seed (default 1)")
    parser.add_argument("--first", type=int, default=0, help="number of the first case (to replay a few)")
    parser.add_argument("--nodes", type=int, default=3, help="real nodes running cases side by side (default 3)")
    parser.add_argument("--out", type=Path, help="write every case, step and disagreement here (JSON)")
    parser.add_argument("--keep", action="store_true", help="leave the oracle's nodes running at the end")
    parser.add_argument(
        "--prefix", default="oracle", help="name the real nodes <prefix>-0, <prefix>-1, ... (default oracle)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="a line for every case, not only failing ones")
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
                report(run, found, args.verbose)

        await asyncio.gather(*(worker(f"{args.prefix}-{i}") for i in range(max(1, min(args.nodes, len(cases))))))
    runs.sort(key=lambda r: r.case.number)
    return runs, disagreements


def report(run: CaseRun, found: list[Disagreement], verbose: bool) -> None:
    steps = [s for s in run.steps if s.observation is not None]
    admitted = sum(1 for s in steps if s.observation is not None and s.observation.admit)
    if run.error:
        print(f"{run.case.label} on {run.node}: ERROR {run.error}\n    {run.case.describe()}", flush=True)
        return
    if not found and not verbose:
        return
    print(
        f"{run.case.label} on {run.node}: {len(steps)} pods ({admitted} admitted), "
        f"{len(found)} disagreements, {run.seconds:.1f}s\n    {run.case.describe()}",
        flush=True,
    )
    for d in found:
        tag = f"documented: {d.documented}" if d.documented else "UNDOCUMENTED"
        spec = json.dumps(run.steps[_step_position(run, d.pod)].spec, separators=(",", ":"))
        print(f"    pod {d.pod} [{d.kind}, {tag}] {d.detail}\n      {spec}", flush=True)


def _step_position(run: CaseRun, pod: int) -> int:
    return next(i for i, s in enumerate(run.steps) if s.index == pod)


def to_json(runs: list[CaseRun], disagreements: list[Disagreement]) -> dict[str, Any]:
    def case_dict(run: CaseRun) -> dict[str, Any]:
        return {
            "case": run.case.number,
            "seed": run.case.seed,
            "node": run.node,
            "describe": run.case.describe(),
            "topology": run.case.topology.to_dict(),
            "settings": run.case.settings.to_dict(),
            "devices": run.case.devices.specs(),
            "seconds": round(run.seconds, 2),
            "error": run.error,
            "steps": [dataclasses.asdict(s) for s in run.steps],
        }

    return {
        "cases": [case_dict(r) for r in runs],
        "disagreements": [dataclasses.asdict(d) for d in disagreements],
        "known": [{"id": k.id, "title": k.title} for k in KNOWN],
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    try:
        runs, disagreements = asyncio.run(run_all(args))
    except RealNodeError as exc:
        print(f"oracle: {exc}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            for i in range(args.nodes):
                with contextlib.suppress(RealNodeError):  # never created
                    remove_node(f"{args.prefix}-{i}")
    errors = [r for r in runs if r.error]
    undocumented = [d for d in disagreements if not d.documented]
    pods = sum(1 for r in runs for s in r.steps if s.observation is not None)
    by_kind = Counter(f"{d.kind}/{d.documented or 'undocumented'}" for d in disagreements)
    print(
        f"{pods} pods judged by kubelets in {time.monotonic() - started:.0f}s; "
        f"disagreements by kind: {dict(sorted(by_kind.items())) or 'none'}; cases that could not run: {len(errors)}"
    )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(to_json(runs, disagreements), indent=1, default=str) + "\n")
    print(f"oracle: {len(runs)} cases, {len(undocumented)} undocumented disagreements")
    if errors:
        return 2
    return 1 if undocumented else 0


if __name__ == "__main__":
    raise SystemExit(main())
