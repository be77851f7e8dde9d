"""Will the kubelet admit this pod on this node? A prediction from the node's NodeResourceTopology.

When the NRT says which resource managers are active (the toposched exporter publishes
cpuManagerPolicy and memoryManagerPolicy), the prediction follows the kubelet: CPU hints only
for Guaranteed pods with integral CPUs under the static CPU manager, memory and hugepages hints
only under the Static Memory Manager, device hints for every QoS, the Topology Manager's merge,
container or pod scope. Without those attributes (older exporters) it falls back to the upstream
NodeResourceTopologyMatch filter, which is stricter (it treats CPU and memory as NUMA-bound).
"""

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from apis.constants import NRT_ATTR_TOPOLOGY_MANAGER_POLICY, NRT_ATTR_TOPOLOGY_MANAGER_SCOPE, NRT_ZONE_PREFIX
from apis.noderesourcetopology import NodeResourceTopology
from apis.quantity import parse_quantity
from schedhook.placement.topologymanager import (
    NONE,
    POLICIES,
    SINGLE_NUMA_NODE,
    Hint,
    ProviderHints,
    bits,
    count,
    mask,
    masks,
    merge,
)

HOST_LEVEL = ("ephemeral-storage", "storage")
LEGACY_POLICIES = {
    "SingleNUMANodeContainerLevel": (SINGLE_NUMA_NODE, "container"),
    "SingleNUMANodePodLevel": (SINGLE_NUMA_NODE, "pod"),
    "Restricted": ("restricted", "container"),
    "RestrictedContainerLevel": ("restricted", "container"),
    "RestrictedPodLevel": ("restricted", "pod"),
    "BestEffort": ("best-effort", "container"),
    "BestEffortContainerLevel": ("best-effort", "container"),
    "BestEffortPodLevel": ("best-effort", "pod"),
    "None": (NONE, "container"),
}


def numa_affine(resource: str) -> bool:
    return resource in ("cpu", "memory") or resource.startswith("hugepages-")


@dataclass(frozen=True)
class Zone:
    numa: int
    capacity: Mapping[str, Decimal]
    allocatable: Mapping[str, Decimal]
    available: Mapping[str, Decimal]

    @functools.cached_property
    def floats(self) -> dict[str, dict[str, float]]:
        """The same values as floats, for the fast path (computed once per zone)."""
        return {
            "capacity": {k: float(v) for k, v in self.capacity.items()},
            "allocatable": {k: float(v) for k, v in self.allocatable.items()},
            "available": {k: float(v) for k, v in self.available.items()},
        }


@dataclass(frozen=True)
class NodeTopology:
    name: str
    zones: tuple[Zone, ...]
    policy: str = NONE
    scope: str = "container"
    cpu_manager: str | None = None
    """None: the NRT does not say (fall back to the upstream filter)."""
    memory_manager: str | None = None
    node_allocatable: Mapping[str, Decimal] = field(default_factory=dict)
    distances: Mapping[int, Mapping[int, int]] = field(default_factory=dict)
    """NUMA id -> NUMA id -> distance, from the zones' costs."""
    max_numa: int = 8
    """The kubelet's topologyManagerMaxNUMANodes (attribute), for LeastNUMANodes."""

    @property
    def numa_ids(self) -> list[int]:
        return [z.numa for z in self.zones]

    @functools.cached_property
    def reported(self) -> frozenset[str]:
        """Resources some zone reports (a device resource no zone reports is host-level)."""
        return frozenset(r for z in self.zones for r in z.allocatable)

    @property
    def knows_managers(self) -> bool:
        return self.cpu_manager is not None and self.memory_manager is not None


def from_nrt(nrt: NodeResourceTopology, node_allocatable: Mapping[str, Decimal] | None = None) -> NodeTopology:
    """The node as the predictor sees it; zones other than NUMA nodes, or with ids above 63, are ignored."""
    policy, scope = NONE, "container"
    if nrt.topology_policies:
        policy, scope = LEGACY_POLICIES.get(nrt.topology_policies[0], (policy, scope))
    attr_policy = nrt.attribute(NRT_ATTR_TOPOLOGY_MANAGER_POLICY)
    attr_scope = nrt.attribute(NRT_ATTR_TOPOLOGY_MANAGER_SCOPE)
    if attr_policy in POLICIES:
        policy = attr_policy
    if attr_scope in ("container", "pod"):
        scope = attr_scope
    zones = []
    distances: dict[int, dict[int, int]] = {}
    for z in nrt.zones:
        suffix = z.name.removeprefix(NRT_ZONE_PREFIX)
        if z.type != "Node" or not suffix.isdigit() or int(suffix) > 63:
            continue
        resources = z.resources or []
        distances[int(suffix)] = {
            int(c.name.removeprefix(NRT_ZONE_PREFIX)): c.value
            for c in z.costs or []
            if c.name.removeprefix(NRT_ZONE_PREFIX).isdigit()
        }
        zones.append(
            Zone(
                numa=int(suffix),
                capacity={r.name: parse_quantity(r.capacity) for r in resources},
                allocatable={r.name: parse_quantity(r.allocatable) for r in resources},
                available={r.name: parse_quantity(r.available) for r in resources},
            )
        )
    return NodeTopology(
        name=nrt.name,
        zones=tuple(sorted(zones, key=lambda z: z.numa)),
        policy=policy,
        scope=scope,
        cpu_manager=nrt.attribute("cpuManagerPolicy"),
        memory_manager=nrt.attribute("memoryManagerPolicy"),
        node_allocatable=dict(node_allocatable or {}),
        distances=distances,
        max_numa=_max_numa(nrt.attribute("topologyManagerMaxNUMANodes")),
    )


def _max_numa(raw: str | None) -> int:
    """Valid values are 2..1024 (as upstream); anything else means the kubelet default, 8."""
    if raw is not None and raw.isdigit() and 1 < int(raw) <= 1024:
        return int(raw)
    return 8


@dataclass(frozen=True)
class Container:
    name: str
    requests: Mapping[str, Decimal]
    limits: Mapping[str, Decimal] = field(default_factory=dict)
    sidecar: bool = False
    """A restartable init container: runs alongside the app containers."""

    @functools.cached_property
    def request(self) -> dict[str, Decimal]:
        """Requests, defaulting to limits as the apiserver does."""
        return {**dict(self.limits), **dict(self.requests)}


@dataclass(frozen=True)
class Pod:
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...] = ()

    @functools.cached_property
    def qos(self) -> str:
        everything = [*self.init_containers, *self.containers]
        if all(not c.requests.get(r) and not c.limits.get(r) for c in everything for r in ("cpu", "memory")):
            return "BestEffort"
        for c in everything:
            for r in ("cpu", "memory"):
                limit = c.limits.get(r)
                if limit is None or c.requests.get(r, limit) != limit:
                    return "Burstable"
        return "Guaranteed"

    def effective(self) -> dict[str, Decimal]:
        """The pod-level request: max(sum of app and sidecar containers, each init container)."""
        total: dict[str, Decimal] = {}
        for c in [*self.containers, *(c for c in self.init_containers if c.sidecar)]:
            for r, q in container_request(c).items():
                total[r] = total.get(r, Decimal(0)) + q
        for c in self.init_containers:
            if not c.sidecar:
                for r, q in container_request(c).items():
                    total[r] = max(total.get(r, Decimal(0)), q)
        return total


def container_request(c: Container) -> dict[str, Decimal]:
    """Requests, defaulting to limits as the apiserver does."""
    return c.request


@dataclass(frozen=True)
class Verdict:
    admit: bool
    reason: str = ""
    numa: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Container (or ``pod`` in pod scope) -> NUMA nodes the kubelet is predicted to use."""


class Availability:
    """Per-zone free amounts while containers are placed one after another."""

    def __init__(self, node: NodeTopology) -> None:
        self.node = node
        self.free = {z.numa: dict(z.available) for z in node.zones}

    def total(self, resource: str, m: int, field_: str = "available") -> Decimal:
        if field_ == "available":
            return sum((self.free[n].get(resource, Decimal(0)) for n in bits(m) if n in self.free), Decimal(0))
        zones = {z.numa: z for z in self.node.zones}
        source = "capacity" if field_ == "capacity" else "allocatable"
        return sum((getattr(zones[n], source).get(resource, Decimal(0)) for n in bits(m) if n in zones), Decimal(0))

    def reported(self, resource: str) -> bool:
        return any(resource in z.allocatable for z in self.node.zones)

    def take(self, resource: str, amount: Decimal, m: int) -> None:
        """Take ``amount`` from the zones of ``m``, lowest NUMA id first."""
        for n in bits(m):
            if amount <= 0:
                return
            have = self.free[n].get(resource, Decimal(0))
            used = min(have, amount)
            self.free[n][resource] = have - used
            amount -= used


def _hints_for(resource: str, amount: Decimal, avail: Availability, capacity_field: str) -> list[Hint]:
    """Masks that can hold ``amount``; preferred = the narrowest size that could hold it at all."""
    candidates = masks(avail.node.numa_ids)
    sizes = [count(m) for m in candidates if avail.total(resource, m, capacity_field) >= amount]
    if not sizes:
        return []
    min_affinity = min(sizes)
    return [Hint(m, count(m) == min_affinity) for m in candidates if avail.total(resource, m) >= amount]


def provider_hints(request: Mapping[str, Decimal], qos: str, avail: Availability) -> list[ProviderHints]:
    """The CPU, memory and device managers' hints for one container (or the pod, in pod scope)."""
    node = avail.node
    cpu: dict[str, list[Hint] | None] = {}
    memory: dict[str, list[Hint] | None] = {}
    devices: dict[str, list[Hint] | None] = {}
    for resource, amount in request.items():
        if amount <= 0 or resource in HOST_LEVEL:
            continue
        if resource == "cpu":
            integral = amount == amount.to_integral_value()
            if node.cpu_manager == "static" and qos == "Guaranteed" and integral:
                cpu["cpu"] = _hints_for("cpu", amount, avail, "capacity")
        elif numa_affine(resource):
            if node.memory_manager == "Static" and qos == "Guaranteed":
                memory[resource] = _hints_for(resource, amount, avail, "allocatable")
        elif avail.reported(resource):
            devices[resource] = _hints_for(resource, amount, avail, "allocatable")
        else:
            devices[resource] = None  # no topology for this resource: host-level
    return [cpu, memory, devices]


def _take_exclusive(request: Mapping[str, Decimal], qos: str, avail: Availability, affinity: int) -> None:
    """What the resource managers hand out exclusively leaves the zones; the shared pool does not."""
    node = avail.node
    for resource, amount in request.items():
        if amount <= 0 or resource in HOST_LEVEL:
            continue
        if resource == "cpu":
            take = node.cpu_manager == "static" and qos == "Guaranteed" and amount == amount.to_integral_value()
        elif numa_affine(resource):
            take = node.memory_manager == "Static" and qos == "Guaranteed"
        else:
            take = True
        if take:
            avail.take(resource, amount, affinity)


def predict(node: NodeTopology, pod: Pod) -> Verdict:
    """The kubelet's admission decision for ``pod`` on ``node`` and the NUMA nodes it would use."""
    if not node.zones:
        return Verdict(True, "no NUMA zones published")
    if not node.knows_managers:
        return upstream_filter(node, pod)
    if node.policy == NONE:
        return Verdict(True)
    qos = pod.qos
    avail = Availability(node)
    everything = mask(*node.numa_ids)
    if node.scope == "pod":
        request = pod.effective()
        decision = merge(provider_hints(request, qos, avail), node.numa_ids, node.policy)
        if not decision.admit:
            return Verdict(False, "cannot align pod")
        return Verdict(True, numa={"pod": tuple(bits(decision.affinity or everything))})
    placed: dict[str, tuple[int, ...]] = {}
    for c in pod.init_containers:
        request = container_request(c)
        decision = merge(provider_hints(request, qos, avail), node.numa_ids, node.policy)
        if not decision.admit:
            kind = "sidecar" if c.sidecar else "init"
            return Verdict(False, f"cannot align {kind} container {c.name}", placed)
        affinity = decision.affinity or everything
        placed[c.name] = tuple(bits(affinity))
        if c.sidecar:  # regular init containers give their resources back to the app containers
            _take_exclusive(request, qos, avail, affinity)
    for c in pod.containers:
        request = container_request(c)
        decision = merge(provider_hints(request, qos, avail), node.numa_ids, node.policy)
        if not decision.admit:
            return Verdict(False, f"cannot align container {c.name}", placed)
        affinity = decision.affinity or everything
        placed[c.name] = tuple(bits(affinity))
        _take_exclusive(request, qos, avail, affinity)
    return Verdict(True, numa=placed)


def upstream_filter(node: NodeTopology, pod: Pod) -> Verdict:
    """NodeResourceTopologyMatch's filter: only single-numa-node filters; NUMA-affine requests fit one zone."""
    qos = pod.qos
    everything = [*pod.init_containers, *pod.containers]
    if qos == "BestEffort" and not any(
        not numa_affine(r) and r not in HOST_LEVEL for c in everything for r in container_request(c)
    ):
        return Verdict(True)
    if node.policy != SINGLE_NUMA_NODE:
        return Verdict(True)
    free = {z.numa: dict(z.available) for z in node.zones}

    def fits(request: Mapping[str, Decimal]) -> int | None:
        candidates = set(free)
        for resource, amount in request.items():
            if amount <= 0:
                continue
            if node.node_allocatable and resource not in node.node_allocatable:
                return None
            reporting = {n for n, z in free.items() if resource in z}
            if not reporting:
                if resource in HOST_LEVEL or not numa_affine(resource):
                    continue
                return None
            relaxed = qos != "Guaranteed" and numa_affine(resource)
            candidates &= {n for n in reporting if relaxed or free[n][resource] >= amount}
            if not candidates:
                return None
        return min(candidates) if candidates else None

    if node.scope == "pod":
        chosen = fits(pod.effective())
        return Verdict(True, numa={"pod": (chosen,)}) if chosen is not None else Verdict(False, "cannot align pod")
    placed: dict[str, tuple[int, ...]] = {}
    for c in pod.init_containers:
        chosen = fits(container_request(c))
        if chosen is None:
            kind = "sidecar" if c.sidecar else "init"
            return Verdict(False, f"cannot align {kind} container {c.name}", placed)
        placed[c.name] = (chosen,)
    for c in pod.containers:
        request = container_request(c)
        chosen = fits(request)
        if chosen is None:
            return Verdict(False, f"cannot align container {c.name}", placed)
        placed[c.name] = (chosen,)
        for resource, amount in request.items():
            if resource in free[chosen] and not (qos != "Guaranteed" and numa_affine(resource)):
                free[chosen][resource] -= amount
    return Verdict(True, numa=placed)


def quantities(raw: Mapping[str, str | int] | None) -> dict[str, Decimal]:
    return {k: parse_quantity(v) for k, v in (raw or {}).items()}


def pod_from_spec(spec: Mapping[str, object]) -> Pod:
    """A Pod from a core/v1 pod spec (dict), for the extender and the explain command."""

    def containers(key: str) -> tuple[Container, ...]:
        out = []
        for c in spec.get(key) or []:  # type: ignore[attr-defined]
            resources = c.get("resources") or {}
            out.append(
                Container(
                    name=c.get("name", ""),
                    requests=quantities(resources.get("requests")),
                    limits=quantities(resources.get("limits")),
                    sidecar=c.get("restartPolicy") == "Always",
                )
            )
        return tuple(out)

    return Pod(containers=containers("containers"), init_containers=containers("initContainers"))
