"""``python -m bench.demo``: the placement part of ``make run``.

Online Boutique (examples/appgroup-online-boutique.yaml) and a small GPU workload (a training
job and an inference service, each with a GPU and its CPUs) on real kubelet nodes with fake
two-NUMA topologies, placed once by kube-scheduler alone and once by kube-scheduler with the
toposched extender, on the same nodes with the same pods. The real kubelets judge every pod
(TopologyAffinityErrors are theirs), two of the nodes have GPUs on both zones from a real device
plugin, the real exporter publishes every node's NRT, and the network cost of each dependency
comes from the NetworkTopology the operator computed. The GPU pods go first: the GPUs are the
scarce resource, and each pod's GPU (id and zone) is what its kubelet reports through PodResources.
Then two DRA GPU pods, one GPU each through a ResourceClaim, on a fifth node whose real DRA
driver lists gpu-0 on NUMA 0 first: the first pod's 4 CPUs fit NUMA 1 only, so kube-scheduler's
first fit puts its GPU off its CPUs, which the kubelet never sees. Their CPU zones come from the
kubelet's CPU Manager checkpoint, their GPUs from PodResources and the GPU's zone from its slice.

The real nodes join the kwok workers' regions and zones (examples/nodes.yaml), one per zone;
their latencies are the sample's, by zone. toposched's pods are left running for a person to
look at; kube-scheduler alone's are removed to make room for them.

``--delete-nrt NODE,...`` (or ``TOPOSCHED_DEMO_DELETE_NRT``; ``all``: every real node) deletes
those nodes' NRTs between the two placements, just before toposched places its pods, as happens
when a Node or its NRT is recreated: their exporters publish them again within their period, and
until then toposched's pods must wait with the reason, never land on a node it cannot see into.
"""

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client

from bench import dra
from bench.harness import NRT_GROUP, NRT_PLURAL, NRT_VERSION, Harness, SetupError
from bench.realnodes import REJECTIONS, kubelet_verdict, kubelet_zones, require_real_nodes
from testkit.freshness import freshness, timestamp
from testkit.paths import EXAMPLES, REPO
from testkit.realnode import (
    KubeletSettings,
    NodeDevices,
    NodeDRA,
    RealNode,
    RealNodeError,
    Topology,
    add_node,
    ensure_device_class,
    list_nodes,
    reset_node,
    workload_pod,
)
from testkit.realnode.exporter import NodeExporter, start_exporter, wait_agreement
from testkit.simulated_kubelet import GPU
from toposched.apis.appgroup import AppGroup
from toposched.apis.constants import (
    APPGROUP_LABEL,
    NUMA_ZONES_ANNOTATION,
    REGION_LABEL,
    WEIGHT_NETPERF,
    WORKLOAD_LABEL,
    ZONE_LABEL,
)
from toposched.apis.netperf import latency_key
from toposched.apis.networktopology import NetworkTopology
from toposched.exporter.podresources.client import PodResourcesClient
from toposched.operators.appgroup.toposort import sort_spec
from toposched.schedhook.placement.network import Edge, Location, NetworkSettings, evaluate
from toposched.schedhook.placement.parse import links_of

NODES = {
    "numa-1": ("us-west-1", "z1"),
    "numa-2": ("us-west-1", "z2"),
    "numa-3": ("us-east-1", "z3"),
    "numa-4": ("us-east-1", "z4"),
}
"""Real node -> (region, zone): the zones of the kwok workers worker-1..4."""
TWIN = {"numa-1": "worker-1", "numa-2": "worker-2", "numa-3": "worker-3", "numa-4": "worker-4"}
"""The kwok worker in the same zone, whose sample latencies the real node takes over."""
TOPOLOGY = Topology.uniform(zones=2, cores_per_zone=4, memory_per_zone="4Gi")
SETTINGS = KubeletSettings(topology_manager_policy="single-numa-node")
GPUS = NodeDevices.parse([f"{GPU}=0,0,1,1"])
DEVICES = {"numa-1": GPUS, "numa-3": GPUS}
"""The nodes with GPUs (two per NUMA zone), one per region."""
SHAPE = (
    "2 NUMA zones x 4 CPUs (CPU 0 reserved), 4 GiB per zone, Topology Manager single-numa-node; "
    f"2 GPUs per zone on {' and '.join(DEVICES)}"
)
CPUS = {
    "frontend": 3,
    "cartservice": 2,
    "productcatalogservice": 3,
    "currencyservice": 2,
    "paymentservice": 1,
    "shippingservice": 2,
    "emailservice": 1,
    "checkoutservice": 3,
    "recommendationservice": 2,
    "adservice": 2,
    "redis-cart": 2,
}
"""Guaranteed pods, one per workload: 23 of the nodes' 28 allocatable CPUs."""
GPU_PODS = {"gpu-training": 2, "gpu-inference": 1}
"""The GPU workload: Guaranteed pods with one GPU each and these CPUs (26 of the 28 with Online Boutique)."""
DRA_NODE = "numa-5"
"""A node of the same shape whose two GPUs a real DRA driver publishes, gpu-0 on NUMA 0 listed first
(the allocator's first fit) and gpu-1 on NUMA 1; only the DRA pods go there."""
DRA_DEVICES = NodeDRA.parse([f"{dra.GPU}=0,1"])
DRA_GPUS = "2 DRA GPUs: gpu-0 on NUMA 0, listed first; gpu-1 on NUMA 1"
DRA_SHAPE = f"the same shape, {DRA_GPUS}"
DRA_PODS = {"dra-training": 4, "dra-inference": 1}
"""Guaranteed pods with one DRA GPU each and these CPUs, created in this order: 4 CPUs fit zone 1
only (zone 0 has 3), so first fit's gpu-0 lies off them."""
MEMORY = "256Mi"
SCHEDULERS = {"plain": "kube-scheduler alone", "toposched": "toposched"}
SETTLE_SECONDS = 120


@dataclass
class Placed:
    node: str | None = None
    verdict: str = "unbound"
    numa: tuple[str, ...] = ()
    message: str = ""
    predicted: str | None = None
    """The NUMA zones the extender annotated at bind (None: it predicted none)."""
    devices: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(device id, its NUMA zones) of every device the kubelet gave the pod (PodResources)."""


@dataclass
class Run:
    scheduler: str
    namespace: str
    pods: dict[str, Placed] = field(default_factory=dict)
    """workload -> where its pod went and what the kubelet said."""
    gpu_pods: dict[str, Placed] = field(default_factory=dict)
    """The GPU workload's pods, likewise."""
    dra_pods: dict[str, Placed] = field(default_factory=dict)
    """The DRA GPU pods, likewise (their devices from PodResources, zones from the slices)."""
    deleted_nrts: dict[str, float | None] = field(default_factory=dict)
    """Node whose NRT was deleted just before this run -> seconds until its exporter published it
    again (None: not by the run's end)."""
    waited: dict[str, str] = field(default_factory=dict)
    """Pod -> the scheduler's reason it waited for a deleted NRT (its FailedScheduling Event)."""

    def unpredicted(self) -> list[str]:
        """Bound pods the extender predicted no NUMA zones for: placed without an NRT to go by."""
        every = {**self.gpu_pods, **self.dra_pods, **self.pods}
        return [name for name, p in every.items() if p.node is not None and p.predicted is None]


def errors(pods: dict[str, Placed]) -> int:
    return sum(p.verdict in REJECTIONS for p in pods.values())


def admitted(pods: dict[str, Placed]) -> int:
    return sum(p.verdict in ("running", "admitted") for p in pods.values())


def misaligned(pods: dict[str, Placed]) -> int:
    """Admitted pods with a device whose zone is known and off every zone of their CPUs."""
    return sum(
        p.verdict in ("running", "admitted") and any(z and not set(z) & set(p.numa) for _, z in p.devices)
        for p in pods.values()
    )


# nodes ------------------------------------------------------------------------------------


def _ready_node(name: str, existing: dict[str, RealNode]) -> RealNode:
    """The real node ``name`` in the demo's shape, with its devices: kept when it already is (a
    warm run), else restarted or added."""
    devices = DEVICES.get(name, NodeDevices())
    gpus = DRA_DEVICES if name == DRA_NODE else NodeDRA()
    found = existing.get(name)
    if found is None:
        return add_node(name, TOPOLOGY, SETTINGS, devices=devices, dra=gpus)
    same = found.topology == TOPOLOGY and found.settings == SETTINGS and found.device_plugin.devices() == devices
    same = same and found.dra == gpus
    running = (found.device_plugin.running() or not devices.resources) and (found.dra_driver.running() or not gpus)
    if same and found.kubelet_running() and running:
        return found
    return reset_node(name, TOPOLOGY, SETTINGS, devices=devices, dra=gpus)


def real_nodes() -> list[RealNode]:
    existing = {n.name: n for n in list_nodes()}
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda name: _ready_node(name, existing), [*NODES, DRA_NODE]))


def latencies() -> dict[str, str]:
    """The sample latencies between the kwok workers, given to the real node in the same zone too."""
    sample = yaml.safe_load((EXAMPLES / "netperf-metrics.yaml").read_text())["data"]
    workers = {**{w: w for w in TWIN.values()}, **TWIN}
    out: dict[str, str] = {}
    for a, twin_a in workers.items():
        for b, twin_b in workers.items():
            if a == b or (a in TWIN.values() and b in TWIN.values()):
                continue
            for pct in ("p50", "p90", "p99"):
                same_zone = twin_a == twin_b
                value = "1" if same_zone else sample[latency_key(pct, twin_a, twin_b)]
                out[latency_key(pct, a, b)] = value
    return out


# runs -------------------------------------------------------------------------------------


def demo_pod(workload: str, scheduler: str) -> dict[str, Any]:
    body = workload_pod(
        workload,
        cpu=CPUS[workload],
        memory=MEMORY,
        labels={APPGROUP_LABEL: "online-boutique", WORKLOAD_LABEL: workload},
    )
    body["spec"]["schedulerName"] = scheduler
    body["spec"]["nodeSelector"] = {"toposched-demo": "numa"}
    return body


def gpu_pod(name: str, scheduler: str) -> dict[str, Any]:
    body = workload_pod(name, cpu=GPU_PODS[name], memory=MEMORY, devices={GPU: 1}, labels={"app": name})
    body["spec"]["schedulerName"] = scheduler
    body["spec"]["nodeSelector"] = {"toposched-demo": "numa"}
    return body


def dra_pod(name: str, scheduler: str) -> dict[str, Any]:
    body = workload_pod(name, cpu=DRA_PODS[name], memory=MEMORY, claims={"gpu": dra.TEMPLATE}, labels={"app": name})
    body["spec"]["schedulerName"] = scheduler
    body["spec"]["nodeSelector"] = {"toposched-demo": "dra"}
    return body


async def wait_judged(
    h: Harness,
    namespace: str,
    names: Sequence[str],
    until: Sequence[str] = ("unbound", "not yet judged", "admitted"),
    within: float = SETTLE_SECONDS,
) -> dict[str, dict[str, Any]]:
    """The namespace's pods once none of ``names`` has a verdict in ``until`` (by default: each is
    running, rejected by its kubelet, or unschedulable), or after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        listed = await h.core.list_namespaced_pod(namespace, _preload_content=False)
        pods = {p["metadata"]["name"]: p for p in json.loads(await listed.read())["items"]}
        verdicts = [kubelet_verdict(pods[n]) if n in pods else "unbound" for n in names]
        if all(v not in until for v in verdicts) or time.monotonic() > deadline:
            return pods
        await asyncio.sleep(0.2)


async def place(h: Harness, scheduler: str, namespace: str, nodes: dict[str, RealNode], patient: bool = False) -> Run:
    """The GPU pods together, then Online Boutique's pods in its topology order, each created once
    the one before is bound (toposched's order gates do this in a full install); then what the
    kubelets made of them, and which GPU each GPU pod got. ``patient``: a pod found unschedulable
    is waited for too (kube-scheduler retries it within its backoff), as when NRTs are missing."""
    appgroup = AppGroup.model_validate(yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text()))
    order = sort_spec(appgroup.spec).order
    unbound = ("unbound", "unschedulable") if patient else ("unbound",)
    await h.create_pods(namespace, [gpu_pod(name, scheduler) for name in GPU_PODS])
    await wait_judged(h, namespace, list(GPU_PODS), until=unbound, within=30)
    await place_dra(h, scheduler, namespace, unbound)
    for workload in order:
        await h.core.create_namespaced_pod(namespace, demo_pod(workload, scheduler))
        await wait_judged(h, namespace, [workload], until=unbound, within=30)
    pods = await wait_judged(h, namespace, [*GPU_PODS, *DRA_PODS, *order])
    run = Run(scheduler, namespace)
    run.pods = {workload: _placed(pods.get(workload), nodes) for workload in order}
    run.gpu_pods = {name: _placed(pods.get(name), nodes) for name in GPU_PODS}
    for name, placed in run.gpu_pods.items():
        if placed.node is not None and placed.verdict in ("running", "admitted"):
            placed.devices = await devices_of(nodes[placed.node], namespace, name)
    run.dra_pods = {name: _placed(pods.get(name), nodes) for name in DRA_PODS}
    for name, placed in run.dra_pods.items():
        if placed.node is not None and placed.verdict in ("running", "admitted"):
            where = await dra.gpu_place(nodes[placed.node], pods[name], dra.slice_zones(nodes[placed.node]))
            placed.devices = tuple((d, tuple(f"node-{z}" for z in zones)) for d, zones in where.devices)
    return run


async def place_dra(h: Harness, scheduler: str, namespace: str, unbound: Sequence[str]) -> None:
    """The DRA pods one after the other (the order decides first fit), each once the one before is
    bound or found unschedulable; then a while for a pod held back (toposched refuses a node whose
    first-fit GPU lies off the CPUs) to be placed once the next one took that GPU."""
    await dra.create_template(h, namespace)
    for name in DRA_PODS:
        await h.create_pods(namespace, [dra_pod(name, scheduler)])
        await wait_judged(h, namespace, [name], until=unbound, within=30)
    await wait_judged(h, namespace, list(DRA_PODS), until=("unbound", "unschedulable"), within=30)


async def delete_nrts(h: Harness, names: Sequence[str]) -> float:
    """Delete the NRTs of ``names`` (as a Node's recreation does, through the garbage collector);
    returns when (wall clock)."""
    for name in names:
        await h.custom.delete_cluster_custom_object(NRT_GROUP, NRT_VERSION, NRT_PLURAL, name)
    return time.time()


async def stored_nrt(h: Harness, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = await h.custom.get_cluster_custom_object(NRT_GROUP, NRT_VERSION, NRT_PLURAL, name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


async def show_freshness(h: Harness, exporters: Sequence[NodeExporter]) -> None:
    """Each real node's NRT as the scheduler is about to see it, and whether its exporter is ready
    (it confirmed the NRT current within its period)."""
    for exporter in exporters:
        name = exporter.node.name
        on_node = f"spec.nodeName={name}"
        listed = await h.core.list_pod_for_all_namespaces(field_selector=on_node, _preload_content=False)
        pods = json.loads(await listed.read())["items"]
        fresh = freshness(name, await stored_nrt(h, name), pods, time.time())
        ready = await asyncio.to_thread(exporter.ready)
        print(f"  {fresh.line()}; exporter {'ready' if ready else 'NOT ready'}")


async def after_deletion(h: Harness, run: Run, deleted_at: float) -> None:
    """When each deleted NRT was published again, and why toposched's pods waited meanwhile."""
    for name in run.deleted_nrts:
        nrt = await stored_nrt(h, name)
        created = (nrt or {}).get("metadata", {}).get("creationTimestamp")
        again = timestamp(created)
        if again is not None:  # whole seconds: up to a second early
            run.deleted_nrts[name] = max(0.0, again - deleted_at)
    events = await h.core.list_namespaced_event(run.namespace, field_selector="reason=FailedScheduling")
    for event in events.items:
        if "missing since" in (event.message or ""):
            run.waited.setdefault(event.involved_object.name, event.message)


def _placed(pod: dict[str, Any] | None, nodes: dict[str, RealNode]) -> Placed:
    if pod is None:
        return Placed()
    name = (pod.get("spec") or {}).get("nodeName")
    node = nodes.get(name or "")
    return Placed(
        node=name,
        verdict=kubelet_verdict(pod),
        numa=kubelet_zones(node, pod) if node else (),
        message=((pod.get("status") or {}).get("message") or "")[:120],
        predicted=((pod.get("metadata") or {}).get("annotations") or {}).get(NUMA_ZONES_ANNOTATION),
    )


async def devices_of(node: RealNode, namespace: str, name: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(device id, NUMA zones) of the devices ``node``'s kubelet gave the pod, from its PodResources List."""
    resources = PodResourcesClient(node.pod_resources_socket)
    try:
        listed = await resources.list_pods()
    finally:
        await resources.close()
    return tuple(
        (device_id, tuple(f"node-{z}" for z in device.numa))
        for pod in listed
        if (pod.namespace, pod.name) == (namespace, name)
        for container in pod.containers
        for device in container.devices
        for device_id in device.ids
    )


async def empty_namespace(h: Harness, namespace: str) -> None:
    try:
        await h.namespace(namespace)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    await h.delete_pods(namespace)


# costs ------------------------------------------------------------------------------------


def dependency_costs(run: Run, appgroup: AppGroup, nt: NetworkTopology) -> dict[tuple[str, str], int | None]:
    """(workload, dependency) -> the network cost between their pods' nodes as the extender counts
    it (0 same node, 1 same zone, else the zone or region pair's NetperfCosts); None if either is
    not placed."""
    links = links_of(nt, WEIGHT_NETPERF)
    locations = {name: Location(region, zone) for name, (region, zone) in NODES.items()}
    out: dict[tuple[str, str], int | None] = {}
    for item in appgroup.spec.workloads:
        for dep in item.dependencies or ():
            source, target = item.workload.selector, dep.workload.selector
            a, b = run.pods[source].node, run.pods[target].node
            if a is None or b is None:
                out[(source, target)] = None
                continue
            edge = Edge(source, target)
            settings = NetworkSettings(count_dependents=False)
            out[(source, target)] = evaluate(source, a, locations, [edge], [(target, b)], links, settings).cost
    return out


# output -----------------------------------------------------------------------------------


def _where(p: Placed) -> tuple[str, str, str, str]:
    if p.node is None:
        return ("-", "-", "-", p.verdict)
    region, zone = NODES.get(p.node, ("?", "?"))
    numa = ",".join(z.removeprefix("node-") for z in p.numa) or "-"
    return (p.node, f"{region}/{zone}", numa, p.verdict)


def render(runs: dict[str, Run], costs: dict[str, dict[tuple[str, str], int | None]]) -> str:
    lines = []
    left, right = runs["toposched"], runs["plain"]
    header = ("pod", "cpu", "node", "region/zone", "NUMA", "kubelet")
    widths = (22, 4, 7, 13, 5, 21)
    row = "  ".join(f"{{:{w}}}" for w in widths) + " | " + "  ".join(f"{{:{w}}}" for w in widths[2:])
    lines.append(f"{'':>{sum(widths[:2]) + 4}}{'toposched':<{sum(widths[2:]) + 6}} | kube-scheduler alone")
    lines.append(row.format(*header, *header[2:]))
    for workload, placed in left.pods.items():
        lines.append(row.format(workload, CPUS[workload], *_where(placed), *_where(right.pods[workload])))
    lines.append("")
    lines.append(f"{'dependency':<46}{'toposched':>10}{'alone':>8}")
    for (source, target), cost in costs["toposched"].items():
        other = costs["plain"][(source, target)]
        lines.append(f"{source + ' -> ' + target:<46}{_cost(cost):>10}{_cost(other):>8}")
    lines.append(f"{'summed network cost':<46}{_sum(costs['toposched']):>10} {_sum(costs['plain']):>7}")
    lines.append("")
    lines.append(f"{'TopologyAffinityErrors (the kubelets)':<46}{errors(left.pods):>10}{errors(right.pods):>8}")
    lines.append(f"{'pods the kubelets admitted':<46}{admitted(left.pods):>10}{admitted(right.pods):>8}")
    lines.append("")
    lines += render_gpus(left, right)
    lines.append("")
    lines += render_dra(left, right)
    return "\n".join(lines)


def render_gpus(left: Run, right: Run) -> list[str]:
    """The GPU workload side by side: node, NUMA zones of the CPUs, the GPU (id@zone) and the verdict."""
    rows = [
        (name, GPU_PODS[name], *_gpu_where(placed), *_gpu_where(right.gpu_pods[name]))
        for name, placed in left.gpu_pods.items()
    ]
    totals = [
        (label, count(left.gpu_pods), count(right.gpu_pods))
        for label, count in (
            ("TopologyAffinityErrors of GPU pods", errors),
            ("GPU pods the kubelets admitted", admitted),
        )
    ]
    title = f"GPU workload: one {GPU} each, 2 per NUMA zone on {' and '.join(DEVICES)}"
    return _side_by_side(
        title, ("GPU pod", "cpu", "node", "NUMA", "GPU@NUMA", "kubelet"), (22, 4, 7, 5, 9, 21), rows, totals
    )


def render_dra(left: Run, right: Run) -> list[str]:
    """The DRA GPU pods side by side: node, the CPUs' NUMA zones (the kubelet), the GPU (id@zone:
    PodResources and its slice), whether they match, and the verdict."""
    rows = [
        (name, DRA_PODS[name], *_dra_where(placed), *_dra_where(right.dra_pods[name]))
        for name, placed in left.dra_pods.items()
    ]
    totals = [
        (label, count(left.dra_pods), count(right.dra_pods))
        for label, count in (
            ("DRA GPU pods misaligned (GPU off the CPUs)", misaligned),
            ("DRA GPU pods the kubelets admitted", admitted),
        )
    ]
    title = f"DRA GPUs: one {dra.GPU} each through a ResourceClaim, on {DRA_NODE} ({DRA_GPUS})"
    header = ("DRA GPU pod", "cpu", "node", "NUMA", "GPU@NUMA", "aligned", "kubelet")
    return _side_by_side(title, header, (22, 4, 7, 5, 9, 8, 13), rows, totals)


def _side_by_side(
    title: str,
    header: Sequence[str],
    widths: Sequence[int],
    rows: Sequence[Sequence[Any]],
    totals: Sequence[tuple[str, int, int]],
) -> list[str]:
    """Pods with toposched's columns | kube-scheduler alone's (the pod's name and CPUs once), then
    the totals of both."""
    row = "  ".join(f"{{:{w}}}" for w in widths) + " | " + "  ".join(f"{{:{w}}}" for w in widths[2:])
    gap = 2 * (len(widths) - 3)  # the separators between toposched's columns
    lines = [title, "", f"{'':>{sum(widths[:2]) + 4}}{'toposched':<{sum(widths[2:]) + gap}} | kube-scheduler alone"]
    lines.append(row.format(*header, *header[2:]))
    lines += [row.format(*r) for r in rows]
    lines.append("")
    return [*lines, *(f"{label:<46}{a:>10}{b:>8}" for label, a, b in totals)]


def _dra_where(p: Placed) -> tuple[str, str, str, str, str]:
    node, numa, gpus, verdict = _gpu_where(p)
    aligned = "-" if not p.devices else "NO" if misaligned({"": p}) else "yes"
    return (node, numa, gpus, aligned, verdict)


def render_deleted(run: Run) -> str:
    """What became of the NRTs deleted before the run."""
    again = ", ".join(f"{n} after {s:.0f} s" if s is not None else f"{n} not yet" for n, s in run.deleted_nrts.items())
    lines = ["", f"NRTs deleted just before toposched's placement, published again by their exporters: {again}"]
    lines += [f"  {pod} waited: {reason}" for pod, reason in run.waited.items()]
    if not run.waited:
        lines.append("  no pod had to wait for them")
    blind = run.unpredicted()
    lines.append(f"  pods bound without an NRT to go by: {', '.join(blind) if blind else 'none'}")
    return "\n".join(lines)


def _gpu_where(p: Placed) -> tuple[str, str, str, str]:
    node, _, numa, verdict = _where(p)
    gpus = ",".join(f"{i}@" + ("+".join(z.removeprefix("node-") for z in zones) or "-") for i, zones in p.devices)
    return (node, numa, gpus or "-", verdict)


def _cost(cost: int | None) -> str:
    return "-" if cost is None else str(cost)


def _sum(costs: dict[tuple[str, str], int | None]) -> str:
    known = [c for c in costs.values() if c is not None]
    missing = len(costs) - len(known)
    return f"{sum(known)}" + (f" (+{missing} unplaced)" if missing else "")


def summary(runs: dict[str, Run], costs: dict[str, dict[tuple[str, str], int | None]]) -> dict[str, Any]:
    return {
        name: {
            "topologyAffinityErrors": errors(run.pods),
            "admitted": admitted(run.pods),
            "networkCost": sum(c for c in costs[name].values() if c is not None),
            "pods": {w: _pod_summary(p) for w, p in run.pods.items()},
            "gpu": {
                "topologyAffinityErrors": errors(run.gpu_pods),
                "admitted": admitted(run.gpu_pods),
                "pods": {w: _pod_summary(p) | {"devices": _devices(p)} for w, p in run.gpu_pods.items()},
            },
            "dra": {
                "misaligned": misaligned(run.dra_pods),
                "admitted": admitted(run.dra_pods),
                "pods": {w: _pod_summary(p) | {"devices": _devices(p)} for w, p in run.dra_pods.items()},
            },
        }
        | (
            {"deletedNRTs": run.deleted_nrts, "waitedForNRT": run.waited, "boundBlind": run.unpredicted()}
            if run.deleted_nrts
            else {}
        )
        for name, run in runs.items()
    }


def _devices(p: Placed) -> list[dict[str, Any]]:
    return [{"id": device_id, "numa": list(zones)} for device_id, zones in p.devices]


def _pod_summary(p: Placed) -> dict[str, Any]:
    out: dict[str, Any] = {"node": p.node, "numa": list(p.numa), "kubelet": p.verdict}
    if p.verdict not in ("running", "admitted") and p.message:
        out["message"] = p.message  # the kubelet's reason, for whoever reads a rejection
        out["predicted"] = p.predicted  # the extender's zones for it (None: it predicted none)
    return out


# main -------------------------------------------------------------------------------------


async def demo(kubeconfig: Path, namespace: str, json_out: Path | None, delete_nrt: Sequence[str] = ()) -> int:
    listed = ", ".join(f"{n} ({r}/{z})" for n, (r, z) in NODES.items())
    step(f"real kubelet nodes: {listed}; {SHAPE}; {DRA_NODE}: {DRA_SHAPE}")
    started = time.monotonic()
    nodes = {n.name: n for n in await asyncio.to_thread(real_nodes)}
    print(f"ready in {time.monotonic() - started:.0f} s")
    exporters: list[NodeExporter] = []
    work = Path(tempfile.mkdtemp(prefix="toposched-demo-"))
    async with Harness(kubeconfig, work) as h:
        try:
            for name, (region, zone) in NODES.items():
                labels = {REGION_LABEL: region, ZONE_LABEL: zone, "toposched-demo": "numa"}
                await h.core.patch_node(name, {"metadata": {"labels": labels}})
            await h.core.patch_node(DRA_NODE, {"metadata": {"labels": {"toposched-demo": "dra"}}})
            await asyncio.to_thread(ensure_device_class, dra.GPU)
            await h.core.patch_namespaced_config_map(
                "netperf-metrics", namespace, {"data": latencies()}
            )  # the NetworkTopology's nodes now include the real ones
            step("exporters: `toposched exporter` for each real node (local processes), NRTs from PodResources")
            with ThreadPoolExecutor(4) as pool:
                exporters = list(pool.map(start_exporter, nodes.values()))
            alone = f"{namespace}-alone"
            for ns in (namespace, alone):
                await empty_namespace(h, ns)  # an earlier run's pods go
            await dra.wait_released(h, [DRA_NODE])  # and their claims' GPUs
            await asyncio.to_thread(_fresh, exporters)
            step("schedulers: kube-scheduler alone (profile plain), and kube-scheduler + the toposched extender")
            h.start_plain()
            await h.start_toposched()
            print(f"both as local processes; logs in {work}")
            runs: dict[str, Run] = {}
            step(f"kube-scheduler alone places the GPU workload, then Online Boutique (namespace {alone})")
            runs["plain"] = await place(h, "plain", alone, nodes)
            await h.delete_pods(alone)
            await dra.wait_released(h, [DRA_NODE])
            await asyncio.to_thread(_fresh, exporters)
            deleted_at = await delete_nrts(h, delete_nrt)
            step("the exporters' freshness: each real node's NRT as toposched is about to see it")
            if delete_nrt:
                print(f"  (deleted on purpose a moment ago: the NRTs of {', '.join(delete_nrt)})")
            await show_freshness(h, exporters)
            step(
                f"toposched places the GPU workload, then Online Boutique (namespace {namespace}, "
                "AppGroup online-boutique)"
            )
            runs["toposched"] = await place(h, "toposched", namespace, nodes, patient=bool(delete_nrt))
            runs["toposched"].deleted_nrts = dict.fromkeys(delete_nrt)
            await after_deletion(h, runs["toposched"], deleted_at)
            nt = NetworkTopology.from_dict(
                await h.custom.get_namespaced_custom_object(
                    NetworkTopology.GROUP, NetworkTopology.VERSION, namespace, NetworkTopology.PLURAL, "net-topology"
                )
            )
            appgroup = AppGroup.model_validate(yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text()))
            costs = {name: dependency_costs(run, appgroup, nt) for name, run in runs.items()}
            step("side by side: each pod's node, region/zone and NUMA zones (and GPU), as the kubelets decided")
            print(render(runs, costs))
            if runs["toposched"].deleted_nrts:
                print(render_deleted(runs["toposched"]))
            if json_out is not None:
                text = json.dumps(summary(runs, costs), indent=2) + "\n"
                await asyncio.to_thread(json_out.write_text, text)
        finally:
            for exporter in exporters:
                exporter.stop()
    return 0


def _fresh(exporters: Sequence[NodeExporter]) -> None:
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda e: wait_agreement(e, 60), exporters))


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default="toposched-demo")
    parser.add_argument(
        "--kubeconfig", type=Path, default=Path(os.environ.get("KUBECONFIG", REPO / ".cluster/kubeconfig"))
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--delete-nrt",
        metavar="NODE,...",
        default=os.environ.get("TOPOSCHED_DEMO_DELETE_NRT", ""),
        help="delete these real nodes' NRTs (all: every one) just before toposched places its pods",
    )
    args = parser.parse_args(argv)
    delete_nrt = list(NODES) if args.delete_nrt == "all" else [n for n in args.delete_nrt.split(",") if n]
    if unknown := sorted(set(delete_nrt) - set(NODES)):
        parser.error(f"--delete-nrt: {', '.join(unknown)} is not a real node of the demo ({', '.join(NODES)})")
    try:
        require_real_nodes()
        return asyncio.run(demo(args.kubeconfig, args.namespace, args.json, delete_nrt))
    except (SetupError, RealNodeError) as exc:
        print(f"\nno placement on real nodes: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
