"""Scheduling throughput: kube-scheduler alone, kube-scheduler + the toposched extender, and
scheduler-plugins' NUMA profile (``sp-numa``).

The schedulers run one after the other against the same kwok nodes (with two-NUMA NRTs), every
one with the same client limits: raised first (as scheduler_perf runs, the figures the goals are
judged on), then kube-scheduler's defaults. Each run starts from a backlog: the pods exist before
the scheduler does, so pod creation and scheduler start-up are not measured. Throughput is
(pods - 1) / (last bind - first bind), binds seen through a watch; CPU per pod of each process on
the path (``bench.cpu``) is measured over the same binds.
"""

import asyncio
import random
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench import scheduler_plugins
from bench.cpu import CONTROL_PLANE, Meter, Sample, lowest, settle, window
from bench.harness import DEFAULT_LIMITS, LIMITS, Bound, ClientLimits, Harness, NodeSpec, scrape
from testkit.builders import pod_body
from testkit.nrt import nrt
from testkit.paths import REPO

SCHEDULERS = ("plain", "toposched")
"""What ``python -m bench.throughput`` compares (the curve, ``bench.scale``, adds scheduler-plugins)."""
IDLE_SECONDS, SETTLE_SECONDS = 3.0, 2.0
"""How long each process's idle CPU rate is measured, and how long the schedulers settle first."""


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
    h: Harness,
    scheduler: str,
    pods: int,
    tag: str,
    within: float = 900,
    repeat: int = 0,
    limits: ClientLimits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """Pods/s of one scheduler draining ``pods`` pending pods onto the nodes labelled ``tag``, the
    CPU per pod of the processes on the path (and the extender's figures)."""
    namespace = f"tp-{scheduler}-{tag}-{limits.name[0]}{repeat}"
    await h.namespace(namespace)
    try:
        await h.create_pods(namespace, [bench_pod(i, scheduler, tag) for i in range(pods)])
        meter = Meter(h.kubeconfig)
        idle = await meter.idle(IDLE_SECONDS, CONTROL_PLANE)
        binds: dict[str, Bound] = {}
        first: list[Sample] = []
        watcher = h.watch_binds(namespace, pods, within, binds, first=lambda n: first.append(meter.sample(n)))
        watching = asyncio.create_task(watcher)
        metrics = await start(h, scheduler, limits)
        meter.add_schedulers(p.pid for p in h.processes)
        await watching
        last = meter.sample(len(binds))
        await asyncio.sleep(SETTLE_SECONDS)  # the last pods' status updates (kwok) reach the schedulers
        idle = lowest(idle, await meter.idle(IDLE_SECONDS))
        # CPU per pod: bench.cpu.settle, once every run on these nodes is done.
        out: dict[str, Any] = {"pods_per_second": round(rate(binds), 1), "cpu": window(first[0], last, idle)}
        if metrics is not None:
            out["extender"] = scrape(metrics)
        return out
    finally:
        h.stop_all()
        await h.delete_namespace(namespace, gone_within=120)


async def start(h: Harness, scheduler: str, limits: ClientLimits = DEFAULT_LIMITS) -> int | None:
    """Start ``scheduler`` (plain, toposched or sp-numa) with ``limits``; the extender's metrics port, if any."""
    h.limits = limits
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
    compared: dict[str, dict[str, Any]] = {}
    async with Harness(kubeconfig, Path(tempfile.mkdtemp(prefix="toposched-throughput-"))) as h:
        await h.create_nodes(specs, tag)
        try:
            runs = [(limits, await backlog(h, s, pods, tag, limits=limits)) for limits in LIMITS for s in SCHEDULERS]
        finally:
            await h.delete_nodes(s.name for s in specs)
    settle(r for _, r in runs)
    for limits in LIMITS:
        alone, with_extender = (r for lim, r in runs if lim == limits)
        compared[limits.name] = _compare(limits, alone, with_extender)
    # The raised run's figures at the top, as before there were two; the defaults' beside them.
    return {"nodes": nodes, "pods": pods, **compared.pop(LIMITS[0].name), **compared}


def _compare(limits: ClientLimits, alone: dict[str, Any], with_extender: dict[str, Any]) -> dict[str, Any]:
    cpu_alone, cpu_with = alone["cpu_ms_per_pod"], with_extender["cpu_ms_per_pod"]
    return {
        "client_limits": {"name": limits.name, "qps": limits.qps, "burst": limits.burst},
        "pods_per_second_alone": alone["pods_per_second"],
        "pods_per_second_with_extender": with_extender["pods_per_second"],
        "ratio": round(with_extender["pods_per_second"] / alone["pods_per_second"], 2),
        "cpu_ms_per_pod_alone": cpu_alone,
        "cpu_ms_per_pod_with_extender": cpu_with,
        "extender_cpu_to_kube_scheduler_alone": (
            round(cpu_with["extender"] / cpu_alone["kube-scheduler"], 2)
            if cpu_alone.get("kube-scheduler") and "extender" in cpu_with
            else None
        ),
        "extender": with_extender["extender"],
    }


def run(kubeconfig: Path, nodes: int = 200, pods: int = 200) -> dict[str, Any]:
    return asyncio.run(_measure(kubeconfig, nodes, pods))


if __name__ == "__main__":
    import json

    nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    pods = int(sys.argv[2]) if len(sys.argv) > 2 else nodes
    print(json.dumps(run(REPO / ".cluster" / "kubeconfig", nodes, pods), indent=2))
