"""Placement quality, kube-scheduler alone vs kube-scheduler + the toposched extender, on kwok nodes.

NUMA scenarios (kubernetes#84869): two-NUMA nodes under single-numa-node or restricted, a stream
(or bursts) of Guaranteed pods with integral CPUs and devices sized so node totals fit where
single zones often do not. kwok has no kubelet, so ``bench.kubelet`` decides, in binding order,
what each node's Topology Manager would do; an "exporter" task republishes the NRTs of changed
nodes every ``refresh`` seconds. A rejected pod (TopologyAffinityError) is deleted, as its
failure would free the node. Metrics: TopologyAffinityErrors, pods placed, pods left pending,
seconds from the first create to the last bind.

Network scenario: 3 regions x 3 zones x 10 nodes with a NetworkTopology, Online Boutique and a
Redis cluster as AppGroups with several replicas per workload, created workload by workload in
topology order. Metric: network cost between the placed pods over every dependency edge.
"""

import asyncio
import random
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench import optimum, scheduler_plugins
from bench.harness import Harness, NodeSpec, SetupError
from bench.realnodes import real_numa_scenarios
from bench.stats import spread
from testkit.builders import appgroup_body, member_labels, networktopology_body, pod_body
from testkit.paths import EXAMPLES
from testkit.simulated_kubelet import GPU, Node, two_numa
from toposched.apis.appgroup import AppGroup
from toposched.apis.constants import REGION_LABEL, ZONE_LABEL
from toposched.apis.quantity import parse_quantity
from toposched.operators.appgroup.toposort import sort_spec
from toposched.schedhook.placement.parse import pod_from_spec

BENCH_LABEL = "toposched-bench"


# NUMA --------------------------------------------------------------------------------------


def numa_pods(count: int, scheduler: str, tag: str, seed: int) -> list[dict[str, Any]]:
    """Guaranteed pods, 2-12 integral CPUs (4 GiB each), a third with one device."""
    rng = random.Random(seed)
    pods = []
    for i in range(count):
        cpu = rng.choice([2, 4, 6, 8, 10, 12])
        devices = {GPU: "1"} if rng.random() < 0.33 else {}
        pods.append(
            pod_body(
                f"p{i:04d}",
                cpu=cpu,
                memory=f"{cpu * 4}Gi",
                devices=devices,
                scheduler=scheduler,
                node_selector={BENCH_LABEL: tag},
                image="example.invalid/app:1",
            )
        )
    return pods


@dataclass
class NumaRun:
    placed: int = 0
    errors: int = 0
    pending: int = 0
    seconds: float = 0.0
    binds: list[float] = field(default_factory=list)
    unschedulable_messages: dict[str, str] = field(default_factory=dict)


async def numa_run(
    h: Harness,
    scheduler: str,
    nodes: dict[str, Node],
    pods: list[dict[str, Any]],
    namespace: str,
    refresh: float,
    burst: int,
    interval: float,
) -> NumaRun:
    """One scheduler places ``pods`` (``burst`` every ``interval`` s) on fresh ``nodes``."""
    await asyncio.gather(*(h.publish_nrt(name, node.nrt()) for name, node in nodes.items()))
    await asyncio.sleep(0.5)  # let the extender's cache see the reset before the first pod
    await h.namespace(namespace)
    run = NumaRun()
    by_name = {p["metadata"]["name"]: p for p in pods}
    bound: set[str] = set()
    unschedulable: set[str] = set()
    dirty: set[str] = set()
    rejected: list[str] = []
    last_change = time.monotonic()
    stop = asyncio.Event()

    def on_pod(pod: dict[str, Any]) -> None:
        nonlocal last_change
        name, node = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
        if node and name not in bound:
            bound.add(name)
            unschedulable.discard(name)
            last_change = time.monotonic()
            run.binds.append(last_change)
            admitted, _ = nodes[node].admit(pod_from_spec(by_name[name]["spec"]), (namespace, name))
            if admitted:
                run.placed += 1
                dirty.add(node)
            else:
                run.errors += 1
                rejected.append(name)
        elif not node:
            conditions = (pod.get("status") or {}).get("conditions") or []
            for c in conditions:
                if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
                    if name not in unschedulable:
                        last_change = time.monotonic()
                        run.unschedulable_messages[name] = c.get("message", "")
                    unschedulable.add(name)

    async def exporter() -> None:
        while not stop.is_set():
            await asyncio.sleep(refresh)
            changed = list(dirty)
            dirty.clear()
            await asyncio.gather(*(h.publish_nrt(n, nodes[n].nrt()) for n in changed))
            gone = list(rejected)
            rejected.clear()
            for name in gone:  # a TopologyAffinityError: the pod fails and holds nothing
                await h.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

    follower = asyncio.create_task(h.follow_pods(namespace, on_pod, stop))
    publisher = asyncio.create_task(exporter())
    started = time.monotonic()
    for start in range(0, len(pods), burst):
        await h.create_pods(namespace, pods[start : start + burst])
        if start + burst < len(pods):
            await asyncio.sleep(interval)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        settled = len(bound) + len(unschedulable) >= len(pods)
        if len(bound) == len(pods) or (settled and time.monotonic() - last_change > 2):
            break
        await asyncio.sleep(0.2)
    stop.set()
    for task in (follower, publisher):
        task.cancel()
    await asyncio.gather(follower, publisher, return_exceptions=True)
    run.pending = len(pods) - len(bound)
    run.seconds = (max(run.binds) - started) if run.binds else 0.0
    await h.delete_namespace(namespace)
    return run


async def numa_scenario(
    h: Harness,
    *,
    policy: str,
    nodes: int,
    pods: int,
    repeats: int,
    refresh: float,
    burst: int,
    interval: float,
    schedulers: Sequence[str] = ("plain", "toposched"),
) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    names = [f"numa-{tag}-{i:03d}" for i in range(nodes)]
    template = {n: two_numa(n, policy) for n in names}
    specs = [NodeSpec(n, template[n].totals(), nrt=template[n].nrt()) for n in names]
    await h.create_nodes(specs, tag)
    runs: dict[str, list[NumaRun]] = {s: [] for s in schedulers}
    try:
        for repeat in range(repeats):
            for scheduler in runs:
                fresh = {n: two_numa(n, policy) for n in names}
                stream = numa_pods(pods, scheduler, tag, seed=repeat)
                namespace = f"numa-{scheduler}-{tag}-{repeat}"
                # The fresh NRTs first: SP's cache reads them once, when it starts.
                await asyncio.gather(*(h.publish_nrt(name, node.nrt()) for name, node in fresh.items()))
                async with scheduler_plugins.numa_running(h, [scheduler]):
                    run = await numa_run(h, scheduler, fresh, stream, namespace, refresh, burst, interval)
                runs[scheduler].append(run)
    finally:
        await h.delete_nodes(names)
    out: dict[str, Any] = {
        "judged_by": "simulator",
        "policy": policy,
        "schedulers": list(schedulers),
        "nodes": nodes,
        "pods": pods,
        "repeats": repeats,
        "nrt_refresh_seconds": refresh,
        "burst": burst,
        "burst_interval_seconds": interval,
    }
    zones = [template[n].zones for n in names]
    yardsticks = [packed(zones, numa_pods(pods, "any", tag, seed=repeat)) for repeat in range(repeats)]
    out["bound"] = spread([float(b) for b, _ in yardsticks])
    out["offline_packing"] = spread([float(p) for _, p in yardsticks])
    for scheduler, results in runs.items():
        out[scheduler] = {
            "topology_affinity_errors": spread([r.errors for r in results]),
            "placed": spread([r.placed for r in results]),
            "pending": spread([r.pending for r in results]),
            "seconds": spread([round(r.seconds, 2) for r in results]),
            "errors_per_run": [r.errors for r in results],
            "unschedulable_example": next((m for r in results for m in r.unschedulable_messages.values()), ""),
        }
    return out


def packed(zones: Sequence[Sequence[Any]], pods: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(proven upper bound, offline best-fit-decreasing packing) of how many of ``pods`` the nodes run."""
    requests = [
        {r: float(parse_quantity(v)) for r, v in p["spec"]["containers"][0]["resources"]["limits"].items()}
        for p in pods
    ]
    capacity = [[{r: float(v) for r, v in z.items()} for z in node] for node in zones]
    return optimum.capacity_bound(capacity, requests), optimum.packed_estimate(capacity, requests)


# network -----------------------------------------------------------------------------------

REGIONS = ["bench-r1", "bench-r2", "bench-r3"]
REGION_COSTS = {("bench-r1", "bench-r2"): 60, ("bench-r1", "bench-r3"): 80, ("bench-r2", "bench-r3"): 100}
ZONE_COSTS = {(0, 1): 5, (0, 2): 10, (1, 2): 15}
NETWORK_NODE_CPUS = 4
"""CPUs per node of the network scenario; each pod asks for 1, so this many pods fit on a node."""


def _zone(region: str, k: int) -> str:
    return f"{region}-z{k}"


def network_topology(namespace: str) -> dict[str, Any]:
    def cost(a: str, b: str, table: dict[Any, int], key: Any) -> dict[str, Any]:
        return {"destination": b, "networkCost": table[key], "bandwidthCapacity": "10Gi"}

    regions = [
        {
            "origin": a,
            "costList": [cost(a, b, REGION_COSTS, tuple(sorted((a, b)))) for b in REGIONS if b != a],
        }
        for a in REGIONS
    ]
    zones = [
        {
            "origin": _zone(r, i),
            "costList": [cost(_zone(r, i), _zone(r, j), ZONE_COSTS, tuple(sorted((i, j)))) for j in range(3) if j != i],
        }
        for r in REGIONS
        for i in range(3)
    ]
    topology_list = [
        {"topologyKey": REGION_LABEL, "originList": regions},
        {"topologyKey": ZONE_LABEL, "originList": zones},
    ]
    return networktopology_body("bench", [{"name": "UserDefined", "topologyList": topology_list}], namespace=namespace)


def pair_cost(a: tuple[str, str, str], b: tuple[str, str, str]) -> int:
    """(node, region, zone) pairs: 0 same node, 1 same zone, else the zone or region pair's cost."""
    if a[0] == b[0]:
        return 0
    if a[2] == b[2]:
        return 1
    if a[1] == b[1]:
        i, j = int(a[2].rsplit("z", 1)[1]), int(b[2].rsplit("z", 1)[1])
        return ZONE_COSTS[(min(i, j), max(i, j))]
    return REGION_COSTS[(min(a[1], b[1]), max(a[1], b[1]))]


def redis_cluster() -> dict[str, Any]:
    return appgroup_body(
        "redis-cluster",
        {
            "redis-client": [("redis-leader", {"maxNetworkCost": 20})],
            "redis-follower": [("redis-leader", {"maxNetworkCost": 60})],
            "redis-leader": [],
        },
        kind="StatefulSet",
        api_version="apps/v1",
        algorithm="KahnSort",
    )


def appgroups() -> list[dict[str, Any]]:
    boutique = yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text())
    return [boutique, redis_cluster()]


def edges(ag: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (w["workload"]["selector"], d["workload"]["selector"])
        for w in ag["spec"]["workloads"]
        for d in w.get("dependencies") or []
    ]


async def network_run(
    h: Harness, scheduler: str, namespace: str, tag: str, replicas: int, where: dict[str, tuple[str, str, str]]
) -> dict[str, Any]:
    await h.namespace(namespace)
    await h.custom.create_namespaced_custom_object(
        "networktopology.diktyo.x-k8s.io", "v1alpha1", namespace, "networktopologies", network_topology(namespace)
    )
    placed: dict[tuple[str, str], list[str]] = {}
    pending = 0
    try:
        for ag in appgroups():
            ag = {**ag, "metadata": {**ag["metadata"], "namespace": namespace}}
            await h.custom.create_namespaced_custom_object(
                "appgroup.diktyo.x-k8s.io", "v1alpha1", namespace, "appgroups", ag
            )
        await asyncio.sleep(1.5)  # the extender's cache sees the AppGroups and the NetworkTopology
        if scheduler == scheduler_plugins.NETWORK:
            await _ordered(h, namespace, [ag["metadata"]["name"] for ag in appgroups()])
        for ag in appgroups():
            model = AppGroup.model_validate(ag)
            group = model.name
            for workload in sort_spec(model.spec).order:
                bodies = [_member(group, workload, i, scheduler, tag) for i in range(replicas)]
                nodes = await _bound_or_unschedulable(h, namespace, bodies)
                placed[(group, workload)] = [n for n in nodes if n]
                pending += nodes.count(None)
    finally:
        await h.delete_namespace(namespace)
    costs: list[int] = []
    per_edge: dict[str, float] = {}
    for ag in appgroups():
        group = ag["metadata"]["name"]
        for source, target in edges(ag):
            pairs = [pair_cost(where[a], where[b]) for a in placed[(group, source)] for b in placed[(group, target)]]
            costs += pairs
            if pairs:  # a dependency with a pending side has no cost; the pending count says so
                per_edge[f"{group}/{source}->{target}"] = statistics.mean(pairs)
    return {
        "total": sum(per_edge.values()),
        "max": max(costs, default=0),
        "pair_costs": costs,
        "per_edge": per_edge,
        "pending": pending,
    }


async def _bound_or_unschedulable(
    h: Harness, namespace: str, bodies: Sequence[dict[str, Any]], within: float = 60
) -> list[str | None]:
    """Create the pods; per pod its node, or None once its scheduler says Unschedulable (or at the deadline)."""
    await h.create_pods(namespace, bodies)
    names = [b["metadata"]["name"] for b in bodies]
    deadline = time.monotonic() + within
    while True:
        pods = {p.metadata.name: p for p in (await h.core.list_namespaced_pod(namespace)).items}
        nodes: list[str | None] = []
        settled = True
        for name in names:
            pod = pods.get(name)
            node = pod.spec.node_name if pod is not None else None
            nodes.append(node)
            if node is None:
                conditions = (pod.status.conditions if pod is not None and pod.status else None) or []
                settled &= any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conditions)
        if settled or time.monotonic() > deadline:
            return nodes
        await asyncio.sleep(0.2)


async def _ordered(h: Harness, namespace: str, names: Sequence[str], within: float = 30) -> None:
    """Wait until the operator has written each AppGroup's status.topologyOrder (SP's queue sort reads it)."""
    deadline = time.monotonic() + within
    for name in names:
        while True:
            ag = await h.custom.get_namespaced_custom_object(
                "appgroup.diktyo.x-k8s.io", "v1alpha1", namespace, "appgroups", name
            )
            if (ag.get("status") or {}).get("topologyOrder"):
                break
            if time.monotonic() > deadline:
                raise SetupError(f"AppGroup {namespace}/{name} got no status.topologyOrder within {within:.0f} s")
            await asyncio.sleep(0.2)


def _member(group: str, workload: str, i: int, scheduler: str, tag: str) -> dict[str, Any]:
    return pod_body(
        f"{workload}-{i}",
        labels=member_labels(group, workload),
        cpu=1,
        guaranteed=False,
        scheduler=scheduler,
        node_selector={BENCH_LABEL: tag},
        image="example.invalid/app:1",
    )


async def network_scenario(h: Harness, *, nodes_per_zone: int, replicas: int, repeats: int) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    specs, where = [], {}
    for region in REGIONS:
        for k in range(3):
            for i in range(nodes_per_zone):
                name = f"net-{tag}-{region[-2:]}-z{k}-{i:02d}"
                labels = {REGION_LABEL: region, ZONE_LABEL: _zone(region, k)}
                allocatable = {"cpu": str(NETWORK_NODE_CPUS), "memory": "16Gi", "pods": "110"}
                specs.append(NodeSpec(name, allocatable, labels=labels))
                where[name] = (name, region, _zone(region, k))
    await h.create_nodes(specs, tag)
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in NETWORK_SCHEDULERS}
    sp_namespaces = [f"net-{scheduler_plugins.NETWORK}-{tag}-{repeat}" for repeat in range(repeats)]
    try:
        async with scheduler_plugins.network_running(h, sp_namespaces, network_topology("")["metadata"]["name"]):
            for repeat in range(repeats):
                for scheduler in runs:
                    namespace = f"net-{scheduler}-{tag}-{repeat}"
                    runs[scheduler].append(await network_run(h, scheduler, namespace, tag, replicas, where))
    finally:
        await h.delete_nodes(s.name for s in specs)
    out: dict[str, Any] = {
        "regions": len(REGIONS),
        "zones_per_region": 3,
        "nodes": len(specs),
        "replicas_per_workload": replicas,
        "repeats": repeats,
        "edges": sum(len(edges(ag)) for ag in appgroups()),
    }
    out["optimum"] = optimum.network_optimum(
        [
            (ag["metadata"]["name"], [w["workload"]["selector"] for w in ag["spec"]["workloads"]], edges(ag))
            for ag in appgroups()
        ],
        replicas=replicas,
        capacity=NETWORK_NODE_CPUS,
        nodes_per_zone=nodes_per_zone,
    )
    problems = optimum.self_check()
    out["optimum"]["exhaustive_check"] = problems or "agrees with exhaustive search on 4 tiny instances"
    for scheduler, results in runs.items():
        out[scheduler] = {
            "total_cost": spread([r["total"] for r in results]),
            "max_pair_cost": spread([r["max"] for r in results]),
            "pending": spread([r["pending"] for r in results]),
            "pair_costs": [c for r in results for c in r["pair_costs"]],
            "per_edge_last_run": results[-1]["per_edge"],
        }
    return out


NUMA_SCHEDULERS = ("plain", "toposched", "toposched-spread", scheduler_plugins.NUMA)
"""kube-scheduler alone; with the extender as shipped (MostAllocated); with ``--strategy
LeastAllocated``; scheduler-plugins' NodeResourceTopologyMatch."""
NETWORK_SCHEDULERS = ("plain", "toposched", scheduler_plugins.NETWORK)


async def numa_scenarios(h: Harness, full: bool) -> dict[str, Any]:
    # About 4.5 pods per node: CPU requests reach the cluster's capacity, so zones fragment.
    # Quick: three runs each, for medians; the real kubelet nodes (bench/realnodes.py) carry the headline.
    nodes, pods, repeats = (300, 1350, 5) if full else (40, 180, 3)
    common: dict[str, Any] = {"nodes": nodes, "pods": pods, "repeats": repeats, "schedulers": NUMA_SCHEDULERS}
    stream: dict[str, Any] = {"refresh": 1.0, "burst": 10, "interval": 0.25}
    return {
        "fragmentation_single_numa_node": await numa_scenario(h, policy="single-numa-node", **common, **stream),
        "fragmentation_restricted": await numa_scenario(h, policy="restricted", **common, **stream),
        "stale_burst": await numa_scenario(
            h, policy="single-numa-node", **common, refresh=10.0 if full else 5.0, burst=pods // 3, interval=2.0
        ),
    }


async def start_schedulers(h: Harness) -> None:
    await h.start_toposched()
    await h.start_toposched(["--strategy", "LeastAllocated"], profile="toposched-spread")
    h.start_plain()
    await asyncio.sleep(3)


def run(
    kubeconfig: Path, work: Path, full: bool = False, numa: bool = True, network: bool = True, real_nodes: int = 8
) -> dict[str, Any]:
    """The NUMA scenarios on ``real_nodes`` real kubelet nodes (0: none) and, as a cross-check, on
    kwok nodes with simulated kubelets; the network scenario on kwok nodes."""

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Harness(kubeconfig, work) as h:
            await start_schedulers(h)
            if numa and real_nodes:
                out["real_nodes"] = await real_numa_scenarios(h, real_nodes, full, NUMA_SCHEDULERS)
            if numa:
                out.update(await numa_scenarios(h, full))
            if network:
                out["network"] = await network_scenario(h, nodes_per_zone=10, replicas=3, repeats=5 if full else 3)
        return out

    return asyncio.run(main())


if __name__ == "__main__":
    import json
    import sys
    import tempfile

    from testkit.paths import REPO

    print(json.dumps(run(REPO / ".cluster" / "kubeconfig", Path(tempfile.mkdtemp()), "--full" in sys.argv)))
