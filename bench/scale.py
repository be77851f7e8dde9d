"""Scale and footprint on kwok nodes with two-NUMA NRTs.

Scale: kube-scheduler alone, with the toposched extender (the same binary and client limits), and
scheduler-plugins' NUMA profile. Throughput from a backlog (pods exist before the scheduler
starts; (pods - 1) / (last bind - first bind)) and creation -> bound latency of a paced stream
(the scheduler already running). The schedulers take turns, run after run, so a slow spell of
the machine falls on each of them; figures are medians with their ranges.

Footprint, on the same nodes: the operator's RSS once it has computed the status of many
AppGroups (and watches every node, as the NetworkTopology side does), the extender's RSS.
"""

import asyncio
import random
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

from bench import scheduler_plugins
from bench.appgroup_sort import random_dag_spec
from bench.harness import Bound, Harness, NodeSpec
from bench.stats import percentile, spread
from bench.throughput import backlog, bench_pod, start
from testkit.builders import appgroup_body
from testkit.cluster import OperatorProcess
from testkit.nrt import nrt
from toposched.apis.appgroup import AppGroup


async def stream(h: Harness, scheduler: str, pods: int, rate: float, tag: str, repeat: int = 0) -> dict[str, Any]:
    """Pods created at ``rate`` per second with the scheduler running (onto the nodes labelled
    ``tag``): creation -> bound latencies."""
    namespace = f"lat-{scheduler}-{tag}-{repeat}"
    await h.namespace(namespace)
    try:
        await start(h, scheduler)
        await asyncio.sleep(3)
        bodies = [bench_pod(i, scheduler, tag) for i in range(pods)]
        binds: dict[str, Bound] = {}
        watcher = asyncio.create_task(h.watch_binds(namespace, pods, 600, binds))
        created: dict[str, float] = {}
        started = time.monotonic()
        for i, body in enumerate(bodies):
            await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
            created.update(await h.create_pods(namespace, [body]))
        await watcher
        latencies = sorted((binds[n].at - created[n]) * 1000 for n in created)
        return {
            "rate_per_second": rate,
            "latency_ms": {
                "median": statistics.median(latencies),
                "p99": percentile(latencies, 99),
                "min": latencies[0],
                "max": latencies[-1],
            },
            "latencies_ms": latencies,
        }
    finally:
        h.stop_all()
        await h.delete_namespace(namespace)


def _rss_mib(pid: int) -> float:
    return round(float(psutil.Process(pid).memory_info().rss) / 2**20, 1)


async def operator_footprint(h: Harness, appgroups: int, log: Path) -> dict[str, Any]:
    """RSS of ``toposched operator`` after it has written the status of ``appgroups`` AppGroups."""
    namespace = f"fp-{uuid.uuid4().hex[:6]}"
    await h.namespace(namespace)
    operator = OperatorProcess(h.kubeconfig, namespace, log, identity="bench", lease="toposched-bench")
    operator.start()
    try:
        specs = [
            random_dag_spec(8, max_deps=2, seed=i).model_dump(mode="json", by_alias=True) for i in range(appgroups)
        ]
        calls = [
            h.custom.create_namespaced_custom_object(
                AppGroup.GROUP,
                AppGroup.VERSION,
                namespace,
                AppGroup.PLURAL,
                appgroup_body(f"ag-{i}", spec=s),
            )
            for i, s in enumerate(specs)
        ]
        for start in range(0, len(calls), 50):
            await asyncio.gather(*calls[start : start + 50])
        deadline = time.monotonic() + 300
        done = 0
        while time.monotonic() < deadline:
            listed = await h.custom.list_namespaced_custom_object(
                AppGroup.GROUP, AppGroup.VERSION, namespace, AppGroup.PLURAL
            )
            done = sum(1 for item in listed["items"] if (item.get("status") or {}).get("topologyOrder"))
            if done >= appgroups:
                break
            await asyncio.sleep(1)
        await asyncio.sleep(2)
        assert operator.proc is not None
        return {"appgroups": appgroups, "with_status": done, "rss_mib": _rss_mib(operator.proc.pid)}
    finally:
        operator.stop()
        await h.delete_namespace(namespace)


async def extender_footprint(h: Harness) -> dict[str, Any]:
    """RSS of the extender once its cache holds every node and NRT."""
    await h.start_toposched()
    await asyncio.sleep(2)
    try:
        pids = [p.pid for p in h.processes if "schedhook" in " ".join(psutil.Process(p.pid).cmdline())]
        return {"rss_mib": _rss_mib(pids[0])}
    finally:
        h.stop_all()


SCHEDULERS = ("plain", "toposched", scheduler_plugins.NUMA)


async def scale(
    h: Harness, nodes: int, pods: int, stream_pods: int, rate: float, appgroups: int, repeats: int
) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    rng = random.Random(11)
    specs = [
        NodeSpec(f"sc-{tag}-{i:05d}", {"cpu": "64", "memory": "256Gi", "pods": "250"}, nrt=nrt("", rng))
        for i in range(nodes)
    ]
    started = time.monotonic()
    await h.create_nodes(specs, tag)
    created_in = time.monotonic() - started
    backlogs: dict[str, list[dict[str, Any]]] = {s: [] for s in SCHEDULERS}
    streams: dict[str, list[dict[str, Any]]] = {s: [] for s in SCHEDULERS}
    try:
        for repeat in range(repeats):
            for scheduler in SCHEDULERS:
                backlogs[scheduler].append(await backlog(h, scheduler, pods, tag, repeat=repeat))
        for repeat in range(repeats):
            for scheduler in SCHEDULERS:
                streams[scheduler].append(await stream(h, scheduler, stream_pods, rate, tag, repeat))
        footprint = {
            "operator": await operator_footprint(h, appgroups, h.work / "operator.log"),
            "extender": await extender_footprint(h),
        }
    finally:
        await h.delete_nodes(s.name for s in specs)
    out: dict[str, Any] = {
        "nodes": nodes,
        "nodes_created_seconds": round(created_in, 1),
        "backlog_pods": pods,
        "stream_pods": stream_pods,
        "stream_rate_per_second": rate,
        "repeats": repeats,
        "schedulers": list(SCHEDULERS),
        "footprint": footprint,
    }
    for scheduler in SCHEDULERS:
        rates = [b["pods_per_second"] for b in backlogs[scheduler]]
        p99s = [r["latency_ms"]["p99"] for r in streams[scheduler]]
        medians = [r["latency_ms"]["median"] for r in streams[scheduler]]
        middle = sorted(streams[scheduler], key=lambda r: r["latency_ms"]["p99"])[len(p99s) // 2]
        out[scheduler] = {
            "pods_per_second": spread(rates),
            "stream_p99_ms": spread(p99s),
            "stream_median_ms": spread(medians),
            "latencies_ms": middle["latencies_ms"],  # the run with the median p99, for the CDF
        }
    # Each run's ratio against kube-scheduler alone's run just before it (the same machine state).
    alone = [b["pods_per_second"] for b in backlogs["plain"]]
    for scheduler in SCHEDULERS[1:]:
        ratios = [b["pods_per_second"] / a for b, a in zip(backlogs[scheduler], alone, strict=True) if a]
        out[scheduler]["throughput_ratio"] = spread([round(r, 2) for r in ratios])
    out["extender_requests"] = backlogs["toposched"][-1].get("extender", {})
    return out


def run(kubeconfig: Path, work: Path, full: bool = False) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with Harness(kubeconfig, work) as h:
            if full:
                sizes = [(1000, 10_000, 1000, 1000), (5000, 10_000, 1000, 1000)]
                return {str(n): await scale(h, n, p, s, 40.0, a, repeats=3) for n, p, s, a in sizes}
            return {"1000": await scale(h, 1000, 1000, 200, 20.0, 200, repeats=3)}

    return asyncio.run(main())
