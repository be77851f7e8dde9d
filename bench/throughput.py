"""Scheduling throughput: kube-scheduler alone, kube-scheduler + the toposched extender, and
scheduler-plugins' NUMA profile (``sp-numa``).

The schedulers, each with its default client limits, run one after the other against the same
kwok nodes (with two-NUMA NRTs). Each run starts from a backlog: the pods exist before
the scheduler does, so pod creation and scheduler start-up are not measured. Throughput is
(pods - 1) / (last bind - first bind), binds seen through a watch.
"""

import asyncio
import random
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench import scheduler_plugins
from bench.harness import Bound, Harness, NodeSpec, scrape
from testkit.builders import pod_body
from testkit.nrt import nrt
from testkit.paths import REPO


def bench_pod(i: int, scheduler: str, tag: str) -> dict[str, Any]:
    """A Guaranteed pod of 1 CPU and 1 GiB for ``scheduler``, onto the nodes labelled ``tag``."""
    selector = {"toposched-bench": tag}
    return pod_body(
        f"p{i}",
        cpu=1,
        memory="1Gi",
        scheduler=scheduler,
        node_selector=selector,
        container="c",
        image="example.invalid/c:1",
    )


def rate(binds: dict[str, Bound]) -> float:
    times = sorted(b.at for b in binds.values())
    return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0


async def backlog(
    h: Harness, scheduler: str, pods: int, tag: str, within: float = 900, repeat: int = 0
) -> dict[str, Any]:
    """Pods/s of one scheduler draining ``pods`` pending pods onto the nodes labelled ``tag`` (and
    the extender's figures)."""
    namespace = f"tp-{scheduler}-{tag}-{repeat}"
    await h.namespace(namespace)
    try:
        await h.create_pods(namespace, [bench_pod(i, scheduler, tag) for i in range(pods)])
        binds: dict[str, Bound] = {}
        watcher = asyncio.create_task(h.watch_binds(namespace, pods, within, binds))
        metrics = await start(h, scheduler)
        await watcher
        out: dict[str, Any] = {"pods_per_second": round(rate(binds), 1)}
        if metrics is not None:
            out["extender"] = scrape(metrics)
        return out
    finally:
        h.stop_all()
        await h.delete_namespace(namespace)


async def start(h: Harness, scheduler: str) -> int | None:
    """Start ``scheduler`` (plain, toposched or sp-numa); the extender's metrics port, if any."""
    if scheduler == "plain":
        h.start_plain()
    elif scheduler == scheduler_plugins.NUMA:
        config = scheduler_plugins.numa_config(str(h.kubeconfig))  # as in the NUMA scenarios
        h.start_scheduler(await asyncio.to_thread(scheduler_plugins.binary), config, scheduler_plugins.NUMA)
    else:
        return await h.start_toposched()
    return None


async def _measure(kubeconfig: Path, nodes: int, pods: int) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    rng = random.Random(7)
    specs = [
        NodeSpec(f"tp-{tag}-{i:04d}", {"cpu": "64", "memory": "256Gi", "pods": "250"}, nrt=nrt("", rng))
        for i in range(nodes)
    ]
    async with Harness(kubeconfig, Path(tempfile.mkdtemp(prefix="toposched-throughput-"))) as h:
        await h.create_nodes(specs, tag)
        try:
            alone = await backlog(h, "plain", pods, tag)
            with_extender = await backlog(h, "toposched", pods, tag)
        finally:
            await h.delete_nodes(s.name for s in specs)
    return {
        "nodes": nodes,
        "pods": pods,
        "pods_per_second_alone": alone["pods_per_second"],
        "pods_per_second_with_extender": with_extender["pods_per_second"],
        "ratio": round(with_extender["pods_per_second"] / alone["pods_per_second"], 2),
        "extender": with_extender["extender"],
    }


def run(kubeconfig: Path, nodes: int = 200, pods: int = 200) -> dict[str, Any]:
    return asyncio.run(_measure(kubeconfig, nodes, pods))


if __name__ == "__main__":
    import json

    nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    pods = int(sys.argv[2]) if len(sys.argv) > 2 else nodes
    print(json.dumps(run(REPO / ".cluster" / "kubeconfig", nodes, pods), indent=2))
