"""Build the node's NodeResourceTopology from sysfs, the kubelet settings and PodResources. Pure.

Per zone (one per NUMA node, ``node-<id>``):
- capacity from sysfs (CPUs, MemTotal, hugepages), devices from the kubelet's allocatable list;
- allocatable from GetAllocatableResources: exclusive-capable CPUs, Memory Manager memory and
  hugepages, devices with topology (a device on several NUMA nodes counts once, on the lowest);
- available = allocatable - exclusive usage from List (CPU ids, memory blocks split across
  their NUMA nodes without double counting, devices).
When a source is missing the value is estimated and an attribute says so, so that pods asking
for memory or CPU stay schedulable (the reference exporters publish nothing and the scheduler
plugin then rejects every such pod):
- CPU manager not static: allocatable CPUs = capacity - reservedSystemCPUs, all available;
- memory and hugepages without PodResources' Memory Manager figures: under the Static Memory
  Manager its own formula (MemTotal - hugepages - reservedMemory of the zone); otherwise the
  node's allocatable memory split by each zone's memory outside hugepages; all available;
- no PodResources at all: every resource as above, available = allocatable.
"""

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal

from toposched.apis.constants import (
    NRT_ATTR_CPU_MANAGER_POLICY,
    NRT_ATTR_CPU_SOURCE,
    NRT_ATTR_MEMORY_MANAGER_POLICY,
    NRT_ATTR_MEMORY_NUMA_GROUPS,
    NRT_ATTR_MEMORY_SOURCE,
    NRT_ATTR_NUMA,
    NRT_ATTR_PODRESOURCES,
    NRT_ATTR_PODS_FINGERPRINT,
    NRT_ATTR_PODS_FINGERPRINT_METHOD,
    NRT_ATTR_RESERVED_SYSTEM_CPUS,
    NRT_ATTR_THREADS_PER_CORE,
    NRT_ATTR_TOPOLOGY_MANAGER_POLICY,
    NRT_ATTR_TOPOLOGY_MANAGER_POLICY_OPTIONS,
    NRT_ATTR_TOPOLOGY_MANAGER_SCOPE,
    NRT_ZONE_ATTR_FREE_CORES,
    NRT_ZONE_ATTR_MEMORY_CELLS,
    NRT_ZONE_PREFIX,
    NRT_ZONE_TYPE_NODE,
)
from toposched.apis.fingerprint import METHOD_ALL, METHOD_EXCLUSIVE, fingerprint
from toposched.apis.noderesourcetopology import AttributeInfo, CostInfo, NodeResourceTopology, ResourceInfo, Zone
from toposched.exporter.checkpoints import Checkpoints, Holding, stale_pods
from toposched.exporter.kubeletconfig import KubeletConfig
from toposched.exporter.sysfs import Machine, format_cpulist


@dataclass(frozen=True)
class MemoryBlock:
    type: str
    """``memory`` or ``hugepages-<size>``."""
    size: int
    numa: tuple[int, ...]


@dataclass(frozen=True)
class DeviceSet:
    resource: str
    ids: tuple[str, ...]
    numa: tuple[int, ...]
    """Empty when the device plugin gave no topology."""


@dataclass(frozen=True)
class Allocatable:
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[DeviceSet, ...] = ()


@dataclass(frozen=True)
class ContainerUse:
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[DeviceSet, ...] = ()
    name: str = ""


@dataclass(frozen=True)
class PodUse:
    namespace: str
    name: str
    containers: tuple[ContainerUse, ...] = ()

    def exclusive(self) -> bool:
        """Holds exclusive CPUs, NUMA-pinned memory or devices with topology."""
        return any(
            c.cpu_ids or any(m.numa for m in c.memory) or any(d.numa for d in c.devices) for c in self.containers
        )


@dataclass
class Inputs:
    node: str
    machine: Machine
    kubelet: KubeletConfig
    allocatable: Allocatable | None = None
    """None when PodResources could not be read."""
    pods: Sequence[PodUse] | None = None
    node_allocatable: Mapping[str, Decimal] = field(default_factory=dict)
    """The Node's status.allocatable, when known, for estimates."""
    fingerprint_method: str = METHOD_EXCLUSIVE
    owner: dict[str, str] | None = None
    """ownerReference fields of the Node (apiVersion, kind, name, uid)."""
    checkpoints: Checkpoints | None = None
    """The CPU and Memory Managers' checkpoints, when readable: they also count what regular init
    containers hold, which PodResources does not list."""


def _held(pod: PodUse) -> list[Holding]:
    return [
        (c.name, frozenset(c.cpu_ids), frozenset((m.type, m.size, tuple(sorted(m.numa))) for m in c.memory))
        for c in pod.containers
    ]


def zone_name(numa: int) -> str:
    return f"{NRT_ZONE_PREFIX}{numa}"


def _estimated_memory(inputs: Inputs) -> dict[int, Decimal]:
    """Memory pods may use per NUMA node when the Memory Manager does not say (no PodResources).

    Under the Static Memory Manager the kubelet's own figure is known exactly: MemTotal minus the
    zone's hugepages minus ``reservedMemory`` of that zone, where a zone without an entry reserves
    nothing (the whole node reservation sits on the zones listed). Otherwise the node's
    allocatable memory, which has every hugepage taken off already, is split by each zone's
    memory outside hugepages: splitting by MemTotal would give a zone full of hugepages memory
    it does not have.
    """
    nodes = inputs.machine.nodes
    regular = {n.id: Decimal(max(0, n.memory_bytes - sum(n.hugepages.values()))) for n in nodes}
    if inputs.kubelet.memory_manager_policy == "Static":
        reserved = {n: r.get("memory", Decimal(0)) for n, r in inputs.kubelet.reserved_memory.items()}
        return {n: max(Decimal(0), regular[n] - reserved.get(n, Decimal(0))) for n in regular}
    total = sum(regular.values())
    node_memory = inputs.node_allocatable.get("memory")
    if node_memory is None:
        node_memory = total - inputs.kubelet.reserved("memory")
    out: dict[int, Decimal] = {}
    for n_id, memory in regular.items():
        usable = node_memory * memory / total if total else Decimal(0)
        out[n_id] = max(Decimal(0), usable.to_integral_value(ROUND_FLOOR))
    return out


def _split(block: MemoryBlock, room: dict[int, Decimal]) -> dict[int, Decimal]:
    """A multi-NUMA block taken greedily in ascending NUMA order, never beyond what a zone has."""
    left = Decimal(block.size)
    taken: dict[int, Decimal] = {}
    numas = sorted(block.numa)
    for i, n in enumerate(numas):
        share = left if i == len(numas) - 1 else min(left, room.get(n, Decimal(0)))
        taken[n] = share
        left -= share
    return taken


def build(inputs: Inputs) -> NodeResourceTopology:
    machine, kubelet = inputs.machine, inputs.kubelet
    cpu_node = machine.cpu_to_node()
    capacity: dict[int, dict[str, Decimal]] = {n.id: {} for n in machine.nodes}
    allocatable: dict[int, dict[str, Decimal]] = {n.id: {} for n in machine.nodes}
    used: dict[int, dict[str, Decimal]] = {n.id: defaultdict(Decimal) for n in machine.nodes}
    attributes: dict[str, str] = {}
    zone_attributes: dict[int, dict[str, str]] = {n.id: {} for n in machine.nodes}

    for n in machine.nodes:
        capacity[n.id]["cpu"] = Decimal(len(n.cpus))
        capacity[n.id]["memory"] = Decimal(n.memory_bytes)
        for name, size in n.hugepages.items():
            capacity[n.id][name] = Decimal(size)

    alloc = inputs.allocatable
    if alloc is None:
        attributes[NRT_ATTR_PODRESOURCES] = "unavailable: allocatable derived from capacity and kubelet reservations"

    # CPUs: the kubelet lists exclusive-capable CPUs only under the static policy.
    if alloc is not None and alloc.cpu_ids:
        for cpu in alloc.cpu_ids:
            if cpu in cpu_node:
                allocatable[cpu_node[cpu]]["cpu"] = allocatable[cpu_node[cpu]].get("cpu", Decimal(0)) + 1
        for n in machine.nodes:
            allocatable[n.id].setdefault("cpu", Decimal(0))
        attributes[NRT_ATTR_CPU_SOURCE] = "cpu-manager"
    else:
        reserved = set(kubelet.reserved_system_cpus)
        for n in machine.nodes:
            allocatable[n.id]["cpu"] = Decimal(len([c for c in n.cpus if c not in reserved]))
        attributes[NRT_ATTR_CPU_SOURCE] = "estimated: CPUs not pinned (cpuManagerPolicy is not static)"

    # Memory and hugepages: only the Static Memory Manager reports them per NUMA node.
    if alloc is not None and alloc.memory:
        # The kubelet reports one block per NUMA node and type.
        for block in alloc.memory:
            if block.numa and block.numa[0] in allocatable:
                numa = block.numa[0]
                allocatable[numa][block.type] = allocatable[numa].get(block.type, Decimal(0)) + Decimal(block.size)
        attributes[NRT_ATTR_MEMORY_SOURCE] = "memory-manager"
    else:
        for n_id, amount in _estimated_memory(inputs).items():
            allocatable[n_id]["memory"] = amount
        for n in machine.nodes:
            for name, size in n.hugepages.items():
                reserved_pages = kubelet.reserved_memory.get(n.id, {}).get(name, Decimal(0))
                allocatable[n.id][name] = max(Decimal(0), Decimal(size) - reserved_pages)
        attributes[NRT_ATTR_MEMORY_SOURCE] = (
            "estimated: Memory Manager not Static; from sysfs and the node's allocatable"
        )

    # Devices: counted once, on the lowest NUMA node of their topology; no topology -> host-level.
    device_node: dict[tuple[str, str], int] = {}
    if alloc is not None:
        for dev in alloc.devices:
            if not dev.numa:
                continue
            numa = min(dev.numa)
            if numa not in allocatable:
                continue
            for device_id in dev.ids:
                device_node[(dev.resource, device_id)] = numa
                allocatable[numa][dev.resource] = allocatable[numa].get(dev.resource, Decimal(0)) + 1
                capacity[numa][dev.resource] = capacity[numa].get(dev.resource, Decimal(0)) + 1

    # Exclusive usage from List.
    pods = list(inputs.pods or [])
    memory_from_manager = alloc is not None and bool(alloc.memory)
    for pod in pods:
        for c in pod.containers:
            if alloc is not None and alloc.cpu_ids:
                for cpu in c.cpu_ids:
                    if cpu in cpu_node:
                        used[cpu_node[cpu]]["cpu"] += 1
            if memory_from_manager:
                for block in c.memory:
                    room = {
                        numa: allocatable[numa].get(block.type, Decimal(0)) - used[numa][block.type]
                        for numa in block.numa
                        if numa in used
                    }
                    for numa, amount in _split(block, room).items():
                        if numa in used:
                            used[numa][block.type] += amount
            for dev in c.devices:
                for device_id in dev.ids:
                    where = device_node.get((dev.resource, device_id))
                    if where is not None:
                        used[where][dev.resource] += 1

    groups = sorted({block.numa for pod in pods for c in pod.containers for block in c.memory if len(block.numa) > 1})
    checkpoints = inputs.checkpoints or Checkpoints()
    stale = stale_pods(checkpoints, (_held(pod) for pod in pods)) if inputs.pods is not None else set()
    if alloc is not None and alloc.cpu_ids and checkpoints.cpu is not None and checkpoints.cpu.policy == "static":
        # The CPU Manager's shared pool, less the reserved CPUs, is exactly what it can still hand out
        # (with what pods it no longer runs still hold until it notices).
        pool = set(checkpoints.cpu.default_cpus)
        for uid in stale:
            for cpus in checkpoints.cpu.entries.get(uid, {}).values():
                pool |= cpus
        handed = pool & set(alloc.cpu_ids)  # what the CPU Manager can hand out
        threads = machine.threads_per_core
        if threads is not None:
            attributes[NRT_ATTR_THREADS_PER_CORE] = str(threads)
        for n in machine.nodes:
            free = sum(1 for cpu in handed if cpu_node.get(cpu) == n.id)
            used[n.id]["cpu"] = allocatable[n.id].get("cpu", Decimal(0)) - Decimal(free)
            if threads is not None:
                whole = sum(1 for core in n.cores if handed.issuperset(core))
                zone_attributes[n.id][NRT_ZONE_ATTR_FREE_CORES] = str(whole)
    if memory_from_manager and checkpoints.memory is not None and checkpoints.memory.policy == "Static":
        free_memory = {n: dict(z.free) for n, z in checkpoints.memory.zones.items()}
        for uid in stale:
            for blocks in checkpoints.memory.entries.get(uid, {}).values():
                for kind, size, numas in blocks:
                    left = Decimal(size)
                    for numa in numas:  # given back in the order the kubelet took it
                        zone = checkpoints.memory.zones.get(numa)
                        if zone is None or left <= 0:
                            continue
                        headroom = zone.allocatable.get(kind, Decimal(0)) - free_memory[numa].get(kind, Decimal(0))
                        back = min(headroom, left)
                        free_memory[numa][kind] = free_memory[numa].get(kind, Decimal(0)) + back
                        left -= back
        for numa, state in checkpoints.memory.zones.items():
            if numa in allocatable:
                for kind, pinnable in state.allocatable.items():
                    allocatable[numa][kind] = pinnable
                    used[numa][kind] = pinnable - free_memory[numa].get(kind, pinnable)
        # Each pinned block counts one assignment on each of its zones; the kubelet drops stale
        # pods' blocks before it computes the next hints, and a zone left without any is its own
        # group again.
        stale_blocks = Counter(
            numa
            for uid in stale
            for blocks in checkpoints.memory.entries.get(uid, {}).values()
            for _, _, numas in blocks
            for numa in numas
        )
        live = {
            numa: state.cells
            for numa, state in checkpoints.memory.zones.items()
            if numa in zone_attributes and state.assignments - stale_blocks[numa] > 0
        }
        for numa, cells in live.items():
            zone_attributes[numa][NRT_ZONE_ATTR_MEMORY_CELLS] = format_cpulist(list(cells))
        groups = sorted({cells for cells in live.values() if len(cells) > 1})

    zones = []
    for n in machine.nodes:
        resources = []
        for name in sorted(set(capacity[n.id]) | set(allocatable[n.id])):
            alloc_value = allocatable[n.id].get(name, Decimal(0))
            cap_value = max(capacity[n.id].get(name, alloc_value), alloc_value)
            avail = max(Decimal(0), alloc_value - used[n.id].get(name, Decimal(0)))
            resources.append(
                ResourceInfo(
                    name=name,
                    capacity=str(int(cap_value)),
                    allocatable=str(int(alloc_value)),
                    available=str(int(avail)),
                )
            )
        costs = [CostInfo(name=zone_name(other), value=d) for other, d in sorted(n.distances.items())] or None
        numa_zone = Zone(name=zone_name(n.id), type=NRT_ZONE_TYPE_NODE, costs=costs, resources=resources)
        if zone_attributes[n.id]:  # set only when there are some: unset fields are not sent
            numa_zone.attributes = [AttributeInfo(name=k, value=v) for k, v in sorted(zone_attributes[n.id].items())]
        zones.append(numa_zone)

    attributes[NRT_ATTR_TOPOLOGY_MANAGER_POLICY] = kubelet.topology_manager_policy
    attributes[NRT_ATTR_TOPOLOGY_MANAGER_SCOPE] = kubelet.topology_manager_scope
    if kubelet.topology_manager_policy_options:
        attributes[NRT_ATTR_TOPOLOGY_MANAGER_POLICY_OPTIONS] = ",".join(
            f"{k}={v}" for k, v in sorted(kubelet.topology_manager_policy_options.items())
        )
    attributes[NRT_ATTR_CPU_MANAGER_POLICY] = kubelet.cpu_manager_policy
    attributes[NRT_ATTR_MEMORY_MANAGER_POLICY] = kubelet.memory_manager_policy
    if kubelet.reserved_system_cpus:
        attributes[NRT_ATTR_RESERVED_SYSTEM_CPUS] = format_cpulist(kubelet.reserved_system_cpus)
    if inputs.pods is not None:
        counted = pods if inputs.fingerprint_method == METHOD_ALL else [p for p in pods if p.exclusive()]
        attributes[NRT_ATTR_PODS_FINGERPRINT] = fingerprint((p.namespace, p.name) for p in counted)
        attributes[NRT_ATTR_PODS_FINGERPRINT_METHOD] = inputs.fingerprint_method
    if not machine.numa:
        attributes[NRT_ATTR_NUMA] = "unsupported by the kernel: one zone for the whole machine"
    if memory_from_manager and groups:
        attributes[NRT_ATTR_MEMORY_NUMA_GROUPS] = ";".join(format_cpulist(list(g)) for g in groups)

    metadata: dict[str, object] = {"name": inputs.node}
    if inputs.owner:
        metadata["ownerReferences"] = [{**inputs.owner, "blockOwnerDeletion": False}]
    return NodeResourceTopology(
        metadata=metadata,
        topology_policies=[topology_policy(kubelet)],
        zones=zones,
        attributes=[AttributeInfo(name=k, value=v) for k, v in attributes.items()],
    )


def topology_policy(kubelet: KubeletConfig) -> str:
    """The deprecated one-word policy (``topologyPolicies``) older consumers read."""
    level = "PodLevel" if kubelet.topology_manager_scope == "pod" else "ContainerLevel"
    return {
        "single-numa-node": f"SingleNUMANode{level}",
        "restricted": f"Restricted{level}",
        "best-effort": f"BestEffort{level}",
    }.get(kubelet.topology_manager_policy, "None")
