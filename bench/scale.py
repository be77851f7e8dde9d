"""Scale and footprint on kwok nodes with two-NUMA NRTs.

Scale: kube-scheduler alone vs with the toposched extender, the same binary and client limits.
Throughput from a backlog (pods exist before the scheduler starts; (pods - 1) / (last bind -
first bind)) and creation -> bound latency of a paced stream (the scheduler already running).

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

from bench.appgroup_sort import random_dag_spec
from bench.harness import Bound, Harness, NodeSpec
from bench.stats import percentile
from bench.throughput import backlog, pod_body
from testkit.cluster import OperatorProcess
from testkit.nrt import nrt
from toposched.apis.appgroup import AppGroup


async def stream(h: Harness, scheduler: str, pods: int, rate: float, tag: str) -> dict[str, Any]:
    """Pods created at ``rate`` per second with the scheduler running: creation -> bound latencies."""
    namespace = f"lat-{scheduler}-{tag}"
    await h.namespace(namespace)
    try:
        if scheduler == "plain":
            h.start_plain()
        else:
            await h.start_toposched()
        await asyncio.sleep(3)
        bodies = [pod_body(i, scheduler, tag) for i in range(pods)]
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
        body = {"apiVersion": f"{AppGroup.GROUP}/{AppGroup.VERSION}", "kind": "AppGroup"}
        specs = [
            random_dag_spec(8, max_deps=2, seed=i).model_dump(mode="json", by_alias=True) for i in range(appgroups)
        ]
        calls = [
            h.custom.create_namespaced_custom_object(
                AppGroup.GROUP,
                AppGroup.VERSION,
                namespace,
                AppGroup.PLURAL,
                {**body, "metadata": {"name": f"ag-{i}"}, "spec": s},
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


async def scale(h: Harness, nodes: int, pods: int, stream_pods: int, rate: float, appgroups: int) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    rng = random.Random(11)
    specs = [
        NodeSpec(f"sc-{tag}-{i:05d}", {"cpu": "64", "memory": "256Gi", "pods": "250"}, nrt=nrt("", rng))
        for i in range(nodes)
    ]
    started = time.monotonic()
    await h.create_nodes(specs, tag)
    created_in = time.monotonic() - started
    try:
        alone = await backlog(h, "plain", pods, tag)
        with_extender = await backlog(h, "toposched", pods, tag)
        latency_alone = await stream(h, "plain", stream_pods, rate, tag)
        latency_extender = await stream(h, "toposched", stream_pods, rate, tag)
        footprint = {
            "operator": await operator_footprint(h, appgroups, h.work / "operator.log"),
            "extender": await extender_footprint(h),
        }
    finally:
        await h.delete_nodes(s.name for s in specs)
    return {
        "nodes": nodes,
        "nodes_created_seconds": round(created_in, 1),
        "backlog_pods": pods,
        "pods_per_second_alone": alone["pods_per_second"],
        "pods_per_second_with_extender": with_extender["pods_per_second"],
        "throughput_ratio": round(with_extender["pods_per_second"] / alone["pods_per_second"], 2),
        "extender_requests": with_extender.get("extender", {}),
        "stream_pods": stream_pods,
        "latency_alone": latency_alone,
        "latency_with_extender": latency_extender,
        "footprint": footprint,
    }


def run(kubeconfig: Path, work: Path, full: bool = False) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with Harness(kubeconfig, work) as h:
            if full:
                sizes = [(1000, 10_000, 1000, 1000), (5000, 10_000, 1000, 1000)]
                return {str(n): await scale(h, n, p, s, 40.0, a) for n, p, s, a in sizes}
            return {"1000": await scale(h, 1000, 1000, 200, 20.0, 200)}

    return asyncio.run(main())
