"""NUMA scenarios judged by real kubelets (testkit.realnode) with the real exporter on every node.

The same comparison as the simulated scenarios in ``bench/placement.py`` (kube-scheduler alone,
+ toposched, + toposched MostAllocated), but every pod is bound to a real kubelet with a fake
two-NUMA topology, whose CPU, Memory and Topology Managers admit or reject it, and every NRT is
published by ``toposched exporter`` from that kubelet's PodResources. TopologyAffinityErrors
(pod ``status.reason`` TopologyAffinityError or UnexpectedAdmissionError) and admitted pods are
read from the pods' status, as the kubelets reported it.

Shape (per node): 2 NUMA zones x 8 CPUs (CPU 0 reserved), 32 GiB per zone, Static Memory
Manager; pods ask for 1-6 integral CPUs with 4 GiB each (the simulated scenario's 2-12 CPUs on
16-CPU zones, halved), about 4.5 pods per node. These nodes have no devices, so the figures
compare with earlier runs; ``bench/devices.py`` runs the same machinery on nodes whose devices a
real device plugin serves (``create_pool(..., devices=...)``), and every run counts the devices
the kubelets hold. "Stale" runs the exporter with a 5 s List interval and period and without the
state-file trigger, so NRTs lag by up to 5 s.
"""

import asyncio
import contextlib
import dataclasses
import json
import os
import random
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol, TypeVar

from bench import scheduler_plugins
from bench.harness import BENCH_LABEL, Harness, SetupError
from bench.stats import spread, summary
from testkit.realnode import (
    KubeletSettings,
    NodeDevices,
    NodeDRA,
    RealNode,
    RealNodeError,
    Topology,
    add_node,
    missing_tools,
    remove_node,
    reset_node,
    workload_pod,
)
from testkit.realnode.accounting import kubelet_devices, kubelet_figures
from testkit.realnode.exporter import NodeExporter, process_usage, start_exporter, wait_agreement
from testkit.simulated_kubelet import Node as SimulatedNode
from toposched.apis.constants import NUMA_ZONES_ANNOTATION
from toposched.schedhook.placement.parse import pod_from_spec

A = TypeVar("A")
T = TypeVar("T")

TOPOLOGY = Topology.uniform(zones=2, cores_per_zone=8, memory_per_zone="32Gi")
NODE_SHAPE = "2 NUMA zones x 8 CPUs (CPU 0 reserved), 32 GiB per zone, no devices"
REJECTIONS = ("TopologyAffinityError", "UnexpectedAdmissionError", "SMTAlignmentError")
SETTLE_SECONDS = 180
"""Longest wait for a run's pods to be bound and decided by their kubelets."""


def require_real_nodes() -> None:
    """Root and the node tools, or a SetupError that says how to get them (or how to do without)."""
    problems = [] if os.geteuid() == 0 else ["root"]
    problems += [f"{m.what} ({m.package})" for m in missing_tools()]
    if problems:
        raise SetupError(
            f"the NUMA scenarios on real kubelet nodes need {', '.join(problems)}: run `make test-tools` as root "
            "(or `python -m bench --real-nodes 0` for the simulated kubelets only)"
        )


def _parallel(call: Callable[[A], T], items: Iterable[A], workers: int = 4) -> list[T]:
    """``call`` on every item, a few at a time (node starts are mostly waiting); the first error is raised."""
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(call, items))


@dataclass
class Pool:
    """The benchmark's real nodes and their exporters."""

    tag: str
    policy: str
    settings: KubeletSettings = field(default_factory=KubeletSettings)
    """The nodes' kubelet settings but the Topology Manager policy (``policy``)."""
    node_settings: dict[str, KubeletSettings] = field(default_factory=dict)
    """Nodes whose settings differ from ``settings`` (a reshape keeps them too, but the policy)."""
    nodes: dict[str, RealNode] = field(default_factory=dict)
    exporters: dict[str, NodeExporter] = field(default_factory=dict)
    stale: bool = False

    def names(self) -> list[str]:
        return sorted(self.nodes)

    def label(self) -> None:
        kubectl = next(iter(self.nodes.values())).cluster.kubectl
        kubectl("label", "node", "--overwrite", *self.names(), f"{BENCH_LABEL}={self.tag}")

    def start_exporters(self, stale: bool) -> None:
        self.stop_exporters()
        self.stale = stale
        options: dict[str, Any] = {"list_interval": 5.0, "period": 5.0, "watch_state_files": False} if stale else {}
        started = _parallel(lambda n: start_exporter(n, **options), self.nodes.values())
        self.exporters = {e.node.name: e for e in started}

    def stop_exporters(self) -> None:
        for exporter in self.exporters.values():
            exporter.stop()
        self.exporters.clear()

    def wait_fresh(self, within: float = 30) -> None:
        """Every NRT equals its kubelet's accounting (the previous run's pods are gone)."""
        _parallel(lambda e: wait_agreement(e, within), self.exporters.values())

    def reshape(self, policy: str) -> None:
        """Every node restarted under ``policy`` (a reset kills the exporters with the nodes)."""
        self.stop_exporters()

        def settings(name: str) -> KubeletSettings:
            return dataclasses.replace(self.node_settings.get(name, self.settings), topology_manager_policy=policy)

        reset = _parallel(lambda n: reset_node(n, settings=settings(n)), self.names())
        self.nodes = {n.name: n for n in reset}
        self.policy = policy
        self.label()

    def prepare(self, policy: str, stale: bool) -> None:
        """Nodes under ``policy`` with exporters in the ``stale`` mode; restarts only what differs."""
        if policy != self.policy:
            self.reshape(policy)  # stops the exporters
        if stale != self.stale or not self.exporters:
            self.start_exporters(stale)

    def remove(self) -> None:
        self.stop_exporters()
        failures = []
        for name in self.names():
            try:
                remove_node(name)
            except RealNodeError as exc:
                failures.append(str(exc))
        self.nodes.clear()
        if failures:
            raise RealNodeError("; ".join(failures))


def create_pool(
    count: int,
    policy: str,
    devices: NodeDevices | None = None,
    topology: Topology = TOPOLOGY,
    settings: KubeletSettings | Sequence[KubeletSettings] | None = None,
    dra: NodeDRA | None = None,
) -> Pool:
    """``count`` real nodes of ``topology`` under ``policy`` with ``settings`` (the default node's
    otherwise; a sequence: node i has the i-th, round robin), each with ``devices`` (served by its
    device plugin) and ``dra`` (published by its DRA driver); a reshape keeps all but the policy."""
    require_real_nodes()
    each = [settings or KubeletSettings()] if settings is None or isinstance(settings, KubeletSettings) else settings
    pool = Pool(uuid.uuid4().hex[:6], policy, each[0])
    names = [f"bench-rn{i:02d}-{pool.tag}" for i in range(count)]
    pool.node_settings = {n: each[i % len(each)] for i, n in enumerate(names) if each[i % len(each)] != each[0]}

    def add(name: str) -> RealNode:
        own = dataclasses.replace(pool.node_settings.get(name, pool.settings), topology_manager_policy=policy)
        return add_node(name, topology, own, devices=devices, dra=dra)

    try:
        for node in _parallel(add, names):
            pool.nodes[node.name] = node
    except BaseException:
        for name in names:  # a half-made pool goes entirely
            with contextlib.suppress(RealNodeError):
                remove_node(name)
        raise
    pool.label()
    return pool


# pods and runs -----------------------------------------------------------------------------

PodStream = Callable[[int, str, str, int], list[dict[str, Any]]]
"""(count, scheduler, pool tag, seed) -> the pods of one run, the same for every scheduler."""


class RunJudge(Protocol):
    """A scenario's own figures per run: what its pods need in their namespace before they are
    created, and what it counts of the admitted ones while they still run."""

    async def before(self, h: Harness, pool: Pool, namespace: str) -> None: ...

    async def figures(
        self, pool: Pool, admitted: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]]
    ) -> tuple[dict[str, int], list[dict[str, Any]]]:
        """(figure -> count, examples) of the run; ``admitted``: the pods as last seen."""
        ...


def real_pods(count: int, scheduler: str, tag: str, seed: int) -> list[dict[str, Any]]:
    """Guaranteed pods, 1-6 integral CPUs with 4 GiB each, for the pool's nodes only."""
    rng = random.Random(seed)
    pods = []
    for i in range(count):
        cpu = rng.choice([1, 2, 3, 4, 5, 6])
        body = workload_pod(f"p{i:04d}", cpu=cpu, memory=f"{cpu * 4}Gi")
        body["spec"].update(schedulerName=scheduler, nodeSelector={BENCH_LABEL: tag})
        pods.append(body)
    return pods


def kubelet_verdict(pod: dict[str, Any]) -> str:
    """What the pod's kubelet decided, from the status it reported: ``running``, ``admitted`` (its
    containers are being started: the kubelet has synced it, which it does only after admitting
    it), a rejection reason, ``not yet judged``; ``unbound`` or ``unschedulable`` before a node."""
    status = pod.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    if not (pod.get("spec") or {}).get("nodeName"):
        scheduled = conditions.get("PodScheduled") or {}
        return "unschedulable" if scheduled.get("reason") == "Unschedulable" else "unbound"
    phase = status.get("phase")
    if phase == "Failed":
        return str(status.get("reason") or "Failed")
    if phase in ("Running", "Succeeded"):
        return "running"
    if "Initialized" in conditions or status.get("containerStatuses"):
        return "admitted"
    return "not yet judged"


@dataclass
class RealRun:
    admitted: int = 0
    """Admitted by the kubelet: running, or its containers being started."""
    running: int = 0
    errors: int = 0
    pending: int = 0
    undecided: int = 0
    """Bound, but neither running nor rejected when the run ended."""
    seconds: float = 0.0
    zone_mismatches: int = 0
    """Admitted pods whose kubelet-assigned CPUs are not on the zones the extender annotated."""
    simulator_disagreements: int = 0
    """Pods the admission simulator, replaying the same binds, decides otherwise than the kubelet."""
    devices: int = 0
    """Healthy devices on the pool's nodes, as their kubelets hold them."""
    devices_in_use: int = 0
    """Of those, the ones the admitted pods hold when the run ends."""
    stranded_devices: int = 0
    """Free devices none of whose zones has the CPUs the stream's smallest pod asks for."""
    reasons: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)
    judged: dict[str, int] = field(default_factory=dict)
    """The scenario's own figures (``RunJudge``)."""


async def real_run(
    h: Harness,
    pool: Pool,
    scheduler: str,
    pods: list[dict[str, Any]],
    namespace: str,
    burst: int,
    interval: float,
    judge: RunJudge | None = None,
) -> RealRun:
    await asyncio.to_thread(pool.wait_fresh)
    await h.namespace(namespace)
    if judge is not None:
        await judge.before(h, pool, namespace)
    state: dict[str, dict[str, Any]] = {}
    last_change = time.monotonic()
    binds: list[float] = []
    stop = asyncio.Event()

    def on_pod(pod: dict[str, Any]) -> None:
        nonlocal last_change
        name = pod["metadata"]["name"]
        node = (pod.get("spec") or {}).get("nodeName")
        before = state.get(name)
        view = {"node": node, "verdict": kubelet_verdict(pod), "pod": pod}
        view["bound_at"] = before["bound_at"] if before and before["bound_at"] else None
        if before is None or (before["node"], before["verdict"]) != (node, view["verdict"]):
            last_change = time.monotonic()
            if node and view["bound_at"] is None:
                view["bound_at"] = last_change
                binds.append(last_change)
        state[name] = view

    def settled() -> bool:
        """Every pod bound and judged by its kubelet, or unschedulable; nothing changed for 2 s."""
        if len(state) < len(pods):
            return False
        if any(v["verdict"] in ("unbound", "not yet judged") for v in state.values()):
            return False
        return time.monotonic() - last_change > 2

    follower = asyncio.create_task(h.follow_pods(namespace, on_pod, stop))
    started = time.monotonic()
    try:
        for start in range(0, len(pods), burst):
            await h.create_pods(namespace, pods[start : start + burst])
            if start + burst < len(pods):
                await asyncio.sleep(interval)
        deadline = time.monotonic() + SETTLE_SECONDS
        while not settled() and time.monotonic() < deadline:
            for exporter in pool.exporters.values():
                exporter.node.ensure_running()  # a dead kubelet ends the run with its log, not a timeout
            await asyncio.sleep(0.5)
    finally:
        stop.set()
        follower.cancel()
        await asyncio.gather(follower, return_exceptions=True)
    run = RealRun(seconds=(max(binds) - started) if binds else 0.0)
    for view in state.values():
        verdict = view["verdict"]
        view["zones"] = _kubelet_zones(pool, view["pod"])
        if verdict in ("unbound", "unschedulable"):
            run.pending += 1
        elif verdict in ("admitted", "running"):
            run.admitted += 1
            run.running += verdict == "running"
            annotated = (view["pod"]["metadata"].get("annotations") or {}).get(NUMA_ZONES_ANNOTATION)
            if annotated and view["zones"] and view["zones"] != tuple(sorted(json.loads(annotated))):
                run.zone_mismatches += 1
                run.examples.append(_example("zones differ from the annotation", view))
        elif verdict in REJECTIONS:
            run.errors += 1
            run.reasons[verdict] = run.reasons.get(verdict, 0) + 1
            if scheduler != "plain":
                run.examples.append(_example("rejected", view))
        else:
            run.undecided += 1
    run.pending += len(pods) - len(state)
    admitted = {v["pod"]["metadata"]["uid"] for v in state.values() if v["verdict"] in ("admitted", "running")}
    run.devices, run.devices_in_use, run.stranded_devices = device_use(pool, admitted, smallest_cpu_request(pods))
    run.simulator_disagreements, examples = _simulator_cross_check(pool, state)
    run.examples += examples
    if judge is not None:
        live = [v["pod"] for v in state.values() if v["verdict"] in ("admitted", "running")]
        run.judged, examples = await judge.figures(pool, live, pods)
        run.examples += examples
    await h.delete_namespace(namespace)
    return run


def _kubelet_zones(pool: Pool, pod: dict[str, Any]) -> tuple[str, ...]:
    node = pool.nodes.get((pod.get("spec") or {}).get("nodeName") or "")
    return () if node is None else kubelet_zones(node, pod)


def kubelet_zones(node: RealNode, pod: dict[str, Any]) -> tuple[str, ...]:
    """The NUMA zones of the CPUs ``node``'s kubelet gave the pod (from its checkpoint); () if none."""
    cpus = [c for cpus in node.assigned_cpus(pod["metadata"]["uid"]).values() for c in cpus]
    return tuple(sorted({f"node-{node.topology.zone_of_cpu(c)}" for c in cpus}))


def smallest_cpu_request(pods: Iterable[dict[str, Any]]) -> int:
    """The fewest CPUs a pod of the stream asks for (its containers' limits summed)."""
    return min(sum(int(c["resources"]["limits"].get("cpu", 0)) for c in pod["spec"]["containers"]) for pod in pods)


def device_use(pool: Pool, active: Collection[str], cpus: int) -> tuple[int, int, int]:
    """(healthy devices, devices in use, stranded devices) over the pool's nodes, from their kubelets'
    own accounting (the CPU Manager's and the device manager's checkpoints; ``active``: the UIDs of
    the pods they still run). A free device is stranded when none of its zones has ``cpus`` free
    CPUs left (a device without topology: no zone of its node has), so no pod of the stream could
    use it; a device on two zones is counted once."""
    total = used = stranded = 0
    for node in pool.nodes.values():
        if not node.devices.resources:
            continue
        figures = kubelet_figures(node, active)
        free_cpus = {int(zone.removeprefix("node-")): f["cpu"][1] for zone, f in figures.items()}
        for zones, allocated in kubelet_devices(node, active).values():
            total += 1
            used += allocated
            if not allocated and all(free_cpus[z] < cpus for z in zones or free_cpus):
                stranded += 1
    return total, used, stranded


def _example(what: str, view: dict[str, Any]) -> dict[str, Any]:
    pod = view["pod"]
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    return {
        "what": what,
        "pod": pod["metadata"]["name"],
        "node": view["node"],
        "cpu": limits.get("cpu"),
        "annotated": (pod["metadata"].get("annotations") or {}).get(NUMA_ZONES_ANNOTATION),
        "kubelet": view["verdict"],
        "kubelet_zones": list(view.get("zones") or ()),
        "message": (pod.get("status") or {}).get("message", "")[:200],
    }


def _simulator_cross_check(pool: Pool, state: dict[str, dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
    """Replay each node's pods, in bind order, through the admission simulator the kwok scenarios
    use (the extender's own predictor); count the pods whose verdict or zones differ from what
    the real kubelet decided."""
    disagreements = 0
    examples: list[dict[str, Any]] = []
    by_node: dict[str, list[dict[str, Any]]] = {}
    for view in state.values():
        if view["node"] and view["verdict"] not in ("not yet judged", "unbound", "unschedulable"):
            by_node.setdefault(view["node"], []).append(view)
    for name, views in by_node.items():
        node = pool.nodes.get(name)
        if node is None:
            continue
        simulated = _simulated_node(node)
        for view in sorted(views, key=lambda v: v["bound_at"] or 0.0):
            admitted, zones = simulated.admit(pod_from_spec(view["pod"]["spec"]))
            real_admitted = view["verdict"] in ("admitted", "running")
            simulated_zones = tuple(f"node-{z}" for z in zones)
            if admitted != real_admitted or (admitted and view["zones"] and simulated_zones != view["zones"]):
                disagreements += 1
                example = _example("the simulator decides otherwise", view)
                example["simulator"] = "admitted" if admitted else "rejected"
                example["simulator_zones"] = list(simulated_zones)
                examples.append(example)
    return disagreements, examples


def _simulated_node(node: RealNode) -> SimulatedNode:
    """The real node as the simulator sees it: its allocatable CPUs and memory per zone, its policy."""
    figures = kubelet_figures(node, active=())
    zones = [
        {r: Decimal(v[0]) for r, v in sorted(figures[f"node-{z}"].items()) if v[0]}
        for z in range(len(node.topology.zones))
    ]
    return SimulatedNode(node.name, node.settings.topology_manager_policy, zones, node.settings.topology_manager_scope)


async def real_scenario(
    h: Harness,
    pool: Pool,
    *,
    policy: str,
    pods: int,
    repeats: int,
    stale: bool,
    burst: int,
    interval: float,
    schedulers: Sequence[str],
    make_pods: PodStream = real_pods,
    node_shape: str = NODE_SHAPE,
    judge: RunJudge | None = None,
) -> dict[str, Any]:
    started = time.monotonic()
    await asyncio.to_thread(pool.prepare, policy, stale)
    runs: dict[str, list[RealRun]] = {s: [] for s in schedulers}
    for repeat in range(repeats):
        for scheduler in schedulers:
            stream = make_pods(pods, scheduler, pool.tag, repeat)
            namespace = f"real-{scheduler}-{pool.tag}-{repeat}"
            await asyncio.to_thread(pool.wait_fresh)  # every NRT exists before SP's cache lists them
            async with scheduler_plugins.numa_running(h, [scheduler]):
                run = await real_run(h, pool, scheduler, stream, namespace, burst, interval, judge)
                runs[scheduler].append(run)
    out: dict[str, Any] = {
        "judged_by": "kubelet",
        "policy": policy,
        "schedulers": list(schedulers),
        "nodes": len(pool.nodes),
        "node_shape": node_shape,
        "pods": pods,
        "repeats": repeats,
        "nrt_refresh_seconds": 5.0 if stale else 0.2,
        "burst": burst,
        "burst_interval_seconds": interval,
    }
    for scheduler, results in runs.items():
        out[scheduler] = {
            "topology_affinity_errors": spread([r.errors for r in results]),
            "placed": spread([r.admitted for r in results]),
            "running_at_end": spread([r.running for r in results]),
            "pending": spread([r.pending for r in results]),
            "undecided": spread([r.undecided for r in results]),
            "seconds": spread([round(r.seconds, 2) for r in results]),
            "errors_per_run": [r.errors for r in results],
            "rejection_reasons": _merge([r.reasons for r in results]),
            "zone_mismatches": sum(r.zone_mismatches for r in results),
            "simulator_disagreements": sum(r.simulator_disagreements for r in results),
            "examples": [e for r in results for e in r.examples][:10],
        }
        if any(r.devices for r in results):
            out[scheduler] |= {
                "devices": spread([r.devices for r in results]),
                "devices_in_use": spread([r.devices_in_use for r in results]),
                "devices_in_use_share": spread([round(r.devices_in_use / (r.devices or 1), 3) for r in results]),
                "stranded_devices": spread([r.stranded_devices for r in results]),
            }
        for figure in sorted({k for r in results for k in r.judged}):
            out[scheduler][figure] = spread([r.judged.get(figure, 0) for r in results])
    out["wall_seconds"] = round(time.monotonic() - started, 1)
    return out


def _merge(counts: list[dict[str, int]]) -> dict[str, int]:
    merged: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            merged[k] = merged.get(k, 0) + v
    return merged


# footprint -------------------------------------------------------------------------------------


def _node_usage(node: RealNode, exclude: set[int]) -> tuple[int, int, float]:
    rss = pss = 0
    cpu = 0.0
    for pid in node.pids() - exclude:
        r, p, c = process_usage(pid)
        rss, pss, cpu = rss + r, pss + p, cpu + c
    return rss, pss, cpu


def footprint(pool: Pool, seconds: float) -> dict[str, Any]:
    """Memory (RSS, PSS) and CPU per real node over ``seconds``: the node (kubelet, containerd, shims,
    containers) and its exporter apart; and how many such nodes this machine holds."""
    exporter_pids = {e.proc.pid for e in pool.exporters.values()}

    def sample() -> tuple[dict[str, tuple[int, int, float]], dict[str, tuple[int, int, float]]]:
        nodes = {n: _node_usage(node, exporter_pids) for n, node in pool.nodes.items()}
        exporters = {n: e.usage() for n, e in pool.exporters.items()}
        return nodes, exporters

    nodes_before, exporters_before = sample()
    time.sleep(seconds)
    nodes_after, exporters_after = sample()

    def per(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        names = sorted(after)
        return {
            "rss_mib": summary([after[n][0] / 2**20 for n in names], "MiB"),
            "pss_mib": summary([after[n][1] / 2**20 for n in names], "MiB"),
            "cpu_millicores": summary([(after[n][2] - before[n][2]) / seconds * 1000 for n in names], "millicores"),
        }

    node = per(nodes_before, nodes_after)
    exporter = per(exporters_before, exporters_after)
    pods = sum(1 for n in pool.nodes.values() for _ in (n.cpu_manager_state() or {}).get("entries", {}))
    return {
        "seconds": seconds,
        "nodes": len(pool.nodes),
        "pods_with_exclusive_cpus": pods,
        "node": node,
        "exporter": exporter,
    }


def capacity(idle: dict[str, Any]) -> dict[str, Any]:
    """How many idle real nodes (with their exporters) this machine holds, by memory and by CPU,
    leaving half of each for the control plane and the schedulers."""
    available = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    per_node_pss = (idle["node"]["pss_mib"]["median"] + idle["exporter"]["pss_mib"]["median"]) * 2**20
    per_node_cpu = idle["node"]["cpu_millicores"]["median"] + idle["exporter"]["cpu_millicores"]["median"]
    cores = os.cpu_count() or 1
    by_memory = int(available / 2 / per_node_pss) if per_node_pss else 0
    by_cpu = int(cores * 1000 / 2 / per_node_cpu) if per_node_cpu else 0
    return {
        "memory_available_mib": round(available / 2**20),
        "cores": cores,
        "per_node_pss_mib": round(per_node_pss / 2**20, 1),
        "per_node_idle_millicores": round(per_node_cpu, 1),
        "by_memory": by_memory,
        "by_cpu": by_cpu,
        "fit": min(by_memory, by_cpu),
    }


# all of it -------------------------------------------------------------------------------------


async def real_numa_scenarios(h: Harness, count: int, full: bool, schedulers: Sequence[str]) -> dict[str, Any]:
    pods = round(count * 4.5)
    repeats = 3  # medians of three even in a quick run: one run of 36 pods is noisy
    started = time.monotonic()
    pool = await asyncio.to_thread(create_pool, count, "single-numa-node")
    out: dict[str, Any] = {"created_seconds": round(time.monotonic() - started, 1)}
    try:
        await asyncio.to_thread(pool.start_exporters, False)
        await asyncio.to_thread(pool.wait_fresh)
        idle = await asyncio.to_thread(footprint, pool, 20.0 if full else 10.0)
        common: dict[str, Any] = {"pods": pods, "repeats": repeats, "schedulers": schedulers}
        stream: dict[str, Any] = {"stale": False, "burst": 10, "interval": 0.25}
        bursts: dict[str, Any] = {"stale": True, "burst": -(-pods // 3), "interval": 2.0}
        # In this order the nodes restart once (for restricted), the exporters twice.
        single = await real_scenario(h, pool, policy="single-numa-node", **common, **stream)
        out["fragmentation_single_numa_node"] = single
        out["stale_burst"] = await real_scenario(h, pool, policy="single-numa-node", **common, **bursts)
        out["fragmentation_restricted"] = await real_scenario(h, pool, policy="restricted", **common, **stream)
        # Loaded: the last scenario's pods are gone; run one stream again and measure while it runs.
        stream_pods = real_pods(pods, "toposched", pool.tag, seed=99)
        namespace = f"real-load-{pool.tag}"
        await asyncio.to_thread(pool.wait_fresh)
        await h.namespace(namespace)
        await h.create_pods(namespace, stream_pods)
        await asyncio.sleep(15)
        loaded = await asyncio.to_thread(footprint, pool, 10.0)
        await h.delete_namespace(namespace)
        out["footprint"] = {"idle": idle, "loaded": loaded, "capacity": capacity(idle)}
    finally:
        await asyncio.to_thread(pool.remove)
    out["total_seconds"] = round(time.monotonic() - started, 1)
    return out
