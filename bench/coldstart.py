"""The extender's cold start, step by step: process start -> Ready against N kwok nodes with NRTs
and N x k bound pods.

The cluster is filled once (nodes ``cs-00000`` on, each with its NRT, and ``k`` pods bound to it
directly, in namespace ``coldstart``); a later run with more nodes only adds the missing ones, so
one cluster serves 10,000 and then 20,000 nodes. Each start runs ``toposched schedhook`` alone
(no kube-scheduler: nothing calls it), waits for /readyz, reads its start-up breakdown from
/metrics (``toposched_extender_start_*``: per kind the list's wall time, bytes, objects, parse and
store time; the table fill; Ready) and stops it. Figures are medians of the starts.

    python -m bench.coldstart --nodes 10000 --starts 3     # needs `make cluster`
"""

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from kubernetes_asyncio import client

from bench.harness import Harness, NodeSpec
from testkit.builders import pod_body
from testkit.coldstart import NotReadyError, cold_start
from testkit.nrt import nrt
from testkit.paths import REPO

NAMESPACE = "coldstart"
TAG = "coldstart"
PREFIX = "cs-"
START = "toposched_extender_start_"


def node_name(i: int) -> str:
    return f"{PREFIX}{i:05d}"


async def _existing(h: Harness) -> set[str]:
    """The names of the bench's nodes already there (a page at a time)."""
    names: set[str] = set()
    token = None
    while True:  # raw JSON: the client's models of 20,000 nodes take minutes to build here
        answer = await h.core.list_node(
            label_selector=f"toposched-bench={TAG}", limit=2000, _continue=token, _preload_content=False
        )
        page = orjson.loads(await answer.read())
        names.update(n["metadata"]["name"] for n in page["items"])
        token = page["metadata"].get("continue")
        if not token:
            return names


async def populate(h: Harness, nodes: int, pods_per_node: int) -> dict[str, Any]:
    """Nodes ``cs-00000``..``cs-<nodes-1>`` with NRTs and ``pods_per_node`` pods bound to each,
    created where missing (nodes beyond ``nodes`` are left as they are)."""
    started = time.monotonic()
    have = await _existing(h)
    rng = random.Random(7)
    wanted = [node_name(i) for i in range(nodes)]
    shapes = {name: nrt("", rng) for name in wanted}  # drawn for every node: the same NRTs at any size
    missing = [n for n in wanted if n not in have]
    specs = [NodeSpec(n, {"cpu": "128", "memory": "512Gi", "pods": "250"}, nrt=shapes[n]) for n in missing]
    await h.create_nodes(specs, TAG)
    try:
        await h.namespace(NAMESPACE)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    bodies = [
        pod_body(f"{n}-{j}", cpu=1, memory="1Gi", node_name=n, container="c", image="example.invalid/c:1")
        for n in missing
        for j in range(pods_per_node)
    ]
    await h.create_pods(NAMESPACE, bodies)
    return {"created_nodes": len(missing), "created_pods": len(bodies), "seconds": round(time.monotonic() - started)}


def medians(starts: list[dict[str, float]]) -> dict[str, float]:
    """Per figure, the median over the starts that report it."""
    keys = sorted({k for s in starts for k in s})
    return {k: round(statistics.median(s[k] for s in starts if k in s), 3) for k in keys}


def run(
    kubeconfig: Path,
    work: Path,
    nodes: int,
    pods_per_node: int = 1,
    starts: int = 3,
    before: Path | None = None,
    within: float | None = None,
    measured_so_far: Callable[[dict[str, Any]], None] = lambda figures: None,
) -> dict[str, Any]:
    """Fill the cluster to ``nodes`` nodes, then ``starts`` cold starts; every start and the medians
    (also given to ``measured_so_far`` after each start). With ``before`` (a checkout of other
    code), as many starts of it, taking turns with this code's, so that a busy spell of the machine
    falls on both."""
    sources = {"after": REPO} if before is None else {"before": before, "after": REPO}

    async def main() -> dict[str, Any]:
        async with Harness(kubeconfig, work) as h:
            filled = await populate(h, nodes, pods_per_node)
            present = len(await _existing(h))
            runs: dict[str, list[dict[str, float]]] = {label: [] for label in sources}
            allowed = within if within is not None else 120 + nodes * 0.02
            out: dict[str, Any] = {"nodes": present, "pods_per_node": pods_per_node, "filled": filled}

            def figures() -> dict[str, Any]:
                return out | {label: {"starts": done, "median": medians(done)} for label, done in runs.items()}

            for i in range(starts):
                for label, source in sources.items():
                    log = h.work / f"coldstart-{nodes}-{label}-{i}.log"
                    try:
                        runs[label].append(await cold_start(h.pki, h.env, log, allowed, source))
                    except NotReadyError:  # counted as not Ready within the time allowed
                        runs[label].append({"spawn_to_ready": allowed, "not_ready": 1.0})
                    measured_so_far(figures())
                    await asyncio.sleep(5)  # the apiserver lets go of the last start's watches
            return figures()

    return asyncio.run(main())


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.coldstart", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods-per-node", type=int, default=1)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the figures here as JSON too")
    parser.add_argument("--before", type=Path, help="a checkout of other code, started in turns with this one")
    parser.add_argument("--within", type=float, help="seconds a start may take to Ready (default 120 + nodes / 50)")
    args = parser.parse_args()
    from bench.__main__ import cluster_kubeconfig, install_crds
    from bench.harness import bin_dir

    kubeconfig = cluster_kubeconfig()
    install_crds(kubeconfig, Path(bin_dir()))
    measured = run(
        kubeconfig,
        Path(tempfile.mkdtemp(prefix="toposched-coldstart-")),
        args.nodes,
        args.pods_per_node,
        args.starts,
        args.before,
        args.within,
        lambda so_far: args.out.write_text(json.dumps(so_far, indent=2)) if args.out else None,
    )
    text = json.dumps(measured, indent=2)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
