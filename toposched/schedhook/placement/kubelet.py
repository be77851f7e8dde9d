"""Will the kubelet admit this pod on this node? A prediction from the node's NodeResourceTopology.

When the NRT says which resource managers are active (the toposched exporter publishes
cpuManagerPolicy and memoryManagerPolicy), the prediction follows the kubelet: CPU hints only
for Guaranteed pods with integral CPUs under the static CPU manager, memory and hugepages hints
only under the Static Memory Manager, device hints for every QoS, the Topology Manager's merge,
container or pod scope. Without those attributes (older exporters) it falls back to the upstream
NodeResourceTopologyMatch filter, which is stricter (it treats CPU and memory as NUMA-bound).
"""

from collections.abc import Mapping
from decimal import Decimal

from toposched.schedhook.placement.model import (
    HOST_LEVEL,
    NodeTopology,
    Pod,
    Verdict,
    container_request,
    numa_affine,
)
from toposched.schedhook.placement.topologymanager import (
    NONE,
    SINGLE_NUMA_NODE,
    Hint,
    ProviderHints,
    bits,
    count,
    mask,
    masks,
    merge,
)


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
