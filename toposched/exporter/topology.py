"""Build the node's NodeResourceTopology from sysfs, the kubelet settings and PodResources. Pure.

Per zone (one per NUMA node, ``node-<id>``):
- capacity from sysfs (CPUs, MemTotal, hugepages), devices from the kubelet's allocatable list;
- allocatable from GetAllocatableResources: exclusive-capable CPUs, Memory Manager memory and
  hugepages, healthy devices with topology (a device on several NUMA nodes counts in each; the
  device-groups attribute counts it once);
- available = allocatable - exclusive usage from List (CPU ids, memory blocks split across
  their NUMA nodes without double counting, devices) and from the kubelet's checkpoints (what
  init containers still hold, which List does not show).
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
    NRT_ATTR_CPU_MANAGER_POLICY_OPTIONS,
    NRT_ATTR_CPU_SOURCE,
    NRT_ATTR_DEVICE_GROUPS,
    NRT_ATTR_KUBELET_RESTART,
    NRT_ATTR_MEMORY_MANAGER_POLICY,
    NRT_ATTR_MEMORY_NUMA_GROUPS,
    NRT_ATTR_MEMORY_SOURCE,
    NRT_ATTR_NUMA,
    NRT_ATTR_POD_CPUS,
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
    NRT_ZONE_ATTR_SOCKET,
    NRT_ZONE_PREFIX,
    NRT_ZONE_TYPE_NODE,
)
from toposched.apis.devicegroups import DeviceGroup, format_groups
from toposched.apis.fingerprint import METHOD_ALL, METHOD_EXCLUSIVE, fingerprint
from toposched.apis.kubelet import STATIC_CPU, STATIC_MEMORY, legacy_policy
from toposched.apis.noderesourcetopology import AttributeInfo, CostInfo, NodeResourceTopology, ResourceInfo, Zone
from toposched.apis.podcpus import format_pod_cpus
from toposched.exporter.checkpoints import (
    Checkpoints,
    CpuState,
    DeviceHolding,
    Holding,
    MemoryState,
    device_holders,
    stale_pods,
)
from toposched.exporter.kubeletconfig import KubeletConfig
from toposched.exporter.sysfs import Machine, NumaNode, format_cpulist


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
class ClaimDevice:
    """A DRA device one of the container's ResourceClaims holds (PodResources ``dynamic_resources``)."""

    claim_namespace: str
    claim_name: str
    driver: str
    pool: str
    device: str


@dataclass(frozen=True)
class ContainerUse:
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[DeviceSet, ...] = ()
    name: str = ""
    claims: tuple[ClaimDevice, ...] = ()


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
    hold_stale: bool = False
    """The kubelet may be admitting its first pods since it (re)started: what pods it no longer
    runs hold counts as held, not free (``toposched.exporter.restarts``)."""


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
    if inputs.kubelet.memory_manager_policy == STATIC_MEMORY:
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


# The order of the node's attributes in the NRT. The publisher compares whole objects, so another
# order would rewrite an NRT whose content did not change.
_ATTRIBUTE_ORDER = (
    NRT_ATTR_PODRESOURCES,
    NRT_ATTR_KUBELET_RESTART,
    NRT_ATTR_CPU_SOURCE,
    NRT_ATTR_MEMORY_SOURCE,
    NRT_ATTR_THREADS_PER_CORE,
    NRT_ATTR_TOPOLOGY_MANAGER_POLICY,
    NRT_ATTR_TOPOLOGY_MANAGER_SCOPE,
    NRT_ATTR_TOPOLOGY_MANAGER_POLICY_OPTIONS,
    NRT_ATTR_CPU_MANAGER_POLICY,
    NRT_ATTR_CPU_MANAGER_POLICY_OPTIONS,
    NRT_ATTR_MEMORY_MANAGER_POLICY,
    NRT_ATTR_RESERVED_SYSTEM_CPUS,
    NRT_ATTR_PODS_FINGERPRINT,
    NRT_ATTR_PODS_FINGERPRINT_METHOD,
    NRT_ATTR_POD_CPUS,
    NRT_ATTR_NUMA,
    NRT_ATTR_MEMORY_NUMA_GROUPS,
    NRT_ATTR_DEVICE_GROUPS,
)


@dataclass
class _Figures:
    """One NUMA zone's amounts by resource name, and its attributes, while the NRT is worked out."""

    capacity: dict[str, Decimal]
    allocatable: dict[str, Decimal] = field(default_factory=dict)
    used: defaultdict[str, Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    attributes: dict[str, str] = field(default_factory=dict)


def build(inputs: Inputs) -> NodeResourceTopology:
    """The node's NRT: per NUMA zone its CPUs, memory, hugepages and devices; attributes that say
    where the figures came from, the kubelet's policies and the pods fingerprint."""
    zones = {n.id: _Figures(capacity=_capacity(n)) for n in inputs.machine.nodes}
    for n in inputs.machine.nodes:
        if n.socket is not None and n.cpus:
            zones[n.id].attributes[NRT_ZONE_ATTR_SOCKET] = str(n.socket)
    attributes: dict[str, str] = {}
    if inputs.allocatable is None:
        attributes[NRT_ATTR_PODRESOURCES] = "unavailable: allocatable derived from capacity and kubelet reservations"
    checkpoints = inputs.checkpoints or Checkpoints()
    stale = _stale_of(inputs)
    if stale and inputs.hold_stale:
        attributes[NRT_ATTR_KUBELET_RESTART] = (
            f"{len(stale)} pod(s) it no longer runs still hold resources: held until it has admitted its first pods"
        )
        stale = set()
    _cpus(inputs, checkpoints.cpu, stale, zones, attributes)
    _memory(inputs, checkpoints.memory, stale, zones, attributes)
    _devices(inputs, checkpoints, stale, zones, attributes)
    attributes |= _kubelet_attributes(inputs.kubelet)
    if inputs.pods is not None:
        counted = [p for p in inputs.pods if inputs.fingerprint_method == METHOD_ALL or p.exclusive()]
        attributes[NRT_ATTR_PODS_FINGERPRINT] = fingerprint((p.namespace, p.name) for p in counted)
        attributes[NRT_ATTR_PODS_FINGERPRINT_METHOD] = inputs.fingerprint_method
        pod_cpus = _pod_cpus(inputs.machine, inputs.pods)
        if pod_cpus:
            attributes[NRT_ATTR_POD_CPUS] = pod_cpus
    if not inputs.machine.numa:
        attributes[NRT_ATTR_NUMA] = "unsupported by the kernel: one zone for the whole machine"

    metadata: dict[str, object] = {"name": inputs.node}
    if inputs.owner:
        metadata["ownerReferences"] = [{**inputs.owner, "blockOwnerDeletion": False}]
    return NodeResourceTopology(
        metadata=metadata,
        topology_policies=[topology_policy(inputs.kubelet)],
        zones=[_zone(n, zones[n.id]) for n in inputs.machine.nodes],
        attributes=[
            AttributeInfo(name=name, value=attributes[name]) for name in sorted(attributes, key=_ATTRIBUTE_ORDER.index)
        ],
    )


def _pod_cpus(machine: Machine, pods: Sequence[PodUse]) -> str:
    """Each listed pod's pinned CPUs by NUMA zone (``NRT_ATTR_POD_CPUS``); a CPU two of its
    containers list (an init container's, reused) counts once."""
    zone_of = {cpu: n.id for n in machine.nodes for cpu in n.cpus}
    by_pod = {
        (pod.namespace, pod.name): Counter(
            zone_of[cpu] for cpu in {c for container in pod.containers for c in container.cpu_ids} if cpu in zone_of
        )
        for pod in pods
    }
    return format_pod_cpus(by_pod)


def _stale_of(inputs: Inputs) -> set[str]:
    """The pods the kubelet's checkpoints hold that it no longer runs: CPUs or memory
    (``checkpoints.stale_pods``), or devices alone (``checkpoints.device_holders``)."""
    if inputs.pods is None:
        return set()
    checkpoints = inputs.checkpoints or Checkpoints()
    stale = stale_pods(checkpoints, map(_held, inputs.pods))
    if checkpoints.devices is not None:
        stale |= set(checkpoints.devices.entries) - device_holders(checkpoints, _devices_held(inputs), stale)
    return stale


def _devices_held(inputs: Inputs) -> list[DeviceHolding]:
    """What each container PodResources lists holds of devices."""
    return [
        (container.name, frozenset((d.resource, device_id) for d in container.devices for device_id in d.ids))
        for pod in inputs.pods or ()
        for container in pod.containers
    ]


def _capacity(node: NumaNode) -> dict[str, Decimal]:
    """What sysfs says the zone has (devices are added from the kubelet's list)."""
    return {"cpu": Decimal(len(node.cpus)), "memory": Decimal(node.memory_bytes)} | {
        name: Decimal(size) for name, size in node.hugepages.items()
    }


def _cpus(
    inputs: Inputs, state: CpuState | None, stale: set[str], zones: dict[int, _Figures], attributes: dict[str, str]
) -> None:
    """CPUs: the kubelet lists exclusive-capable CPUs only under the static policy; otherwise every
    CPU but the reserved ones is allocatable and available."""
    machine, allocatable = inputs.machine, inputs.allocatable
    if allocatable is None or not allocatable.cpu_ids:
        reserved = set(inputs.kubelet.reserved_system_cpus)
        for n in machine.nodes:
            zones[n.id].allocatable["cpu"] = Decimal(len([c for c in n.cpus if c not in reserved]))
        attributes[NRT_ATTR_CPU_SOURCE] = "estimated: CPUs not pinned (cpuManagerPolicy is not static)"
        return
    attributes[NRT_ATTR_CPU_SOURCE] = "cpu-manager"
    cpu_node = machine.cpu_to_node()
    for zone in zones.values():
        zone.allocatable["cpu"] = Decimal(0)
    for cpu in allocatable.cpu_ids:
        if cpu in cpu_node:
            zones[cpu_node[cpu]].allocatable["cpu"] += 1
    for pod in inputs.pods or ():
        for container in pod.containers:
            for cpu in container.cpu_ids:
                if cpu in cpu_node:
                    zones[cpu_node[cpu]].used["cpu"] += 1
    if state is None or state.policy != STATIC_CPU:
        return
    # What the CPU Manager can still hand out: every allocatable CPU no container of a pod it still
    # runs holds (its shared pool, and what pods it no longer runs hold until it notices). Counted
    # from the entries, not from the pool: it writes its checkpoint twice per change (a removed
    # container's entry goes, then its CPUs join the pool; an admitted one's leave the pool, then
    # its entry comes), and a read between the two finds CPUs in neither. Being freed, they are
    # free; being taken, PodResources (from the kubelet's memory, ahead of the file) may already
    # list them, and the pods fingerprint count the pod: what it lists is held too.
    held = {
        cpu
        for uid, containers in state.entries.items()
        if uid not in stale
        for cpus in containers.values()
        for cpu in cpus
    }
    held.update(cpu for pod in inputs.pods or () for container in pod.containers for cpu in container.cpu_ids)
    handed = set(allocatable.cpu_ids) - held
    threads = machine.threads_per_core
    if threads is not None:
        attributes[NRT_ATTR_THREADS_PER_CORE] = str(threads)
    for n in machine.nodes:
        zone = zones[n.id]
        zone.used["cpu"] = zone.allocatable["cpu"] - sum(1 for cpu in handed if cpu_node.get(cpu) == n.id)
        if threads is not None:
            zone.attributes[NRT_ZONE_ATTR_FREE_CORES] = str(sum(1 for core in n.cores if handed.issuperset(core)))


def _memory(
    inputs: Inputs, state: MemoryState | None, stale: set[str], zones: dict[int, _Figures], attributes: dict[str, str]
) -> None:
    """Memory and hugepages: only the Static Memory Manager reports them per NUMA node (and its
    checkpoint how they are grouped); otherwise they are estimated and all available."""
    allocatable = inputs.allocatable
    if allocatable is None or not allocatable.memory:
        for n_id, amount in _estimated_memory(inputs).items():
            zones[n_id].allocatable["memory"] = amount
        for n in inputs.machine.nodes:
            for name, size in n.hugepages.items():
                reserved = inputs.kubelet.reserved_memory.get(n.id, {}).get(name, Decimal(0))
                zones[n.id].allocatable[name] = max(Decimal(0), Decimal(size) - reserved)
        attributes[NRT_ATTR_MEMORY_SOURCE] = (
            "estimated: Memory Manager not Static; from sysfs and the node's allocatable"
        )
        return
    attributes[NRT_ATTR_MEMORY_SOURCE] = "memory-manager"
    for block in allocatable.memory:  # one block per NUMA node and type
        if block.numa and block.numa[0] in zones:
            zone = zones[block.numa[0]].allocatable
            zone[block.type] = zone.get(block.type, Decimal(0)) + Decimal(block.size)
    blocks = [block for pod in inputs.pods or () for c in pod.containers for block in c.memory]
    for block in blocks:
        room = {
            numa: zones[numa].allocatable.get(block.type, Decimal(0)) - zones[numa].used[block.type]
            for numa in block.numa
            if numa in zones
        }
        for numa, amount in _split(block, room).items():
            if numa in zones:
                zones[numa].used[block.type] += amount
    groups = sorted({block.numa for block in blocks if len(block.numa) > 1})
    if state is not None and state.policy == STATIC_MEMORY:
        groups = _memory_from_checkpoint(state, stale, zones)
    if groups:
        attributes[NRT_ATTR_MEMORY_NUMA_GROUPS] = ";".join(format_cpulist(list(g)) for g in groups)


def _memory_from_checkpoint(state: MemoryState, stale: set[str], zones: dict[int, _Figures]) -> list[tuple[int, ...]]:
    """Pinnable and free memory per zone as the Memory Manager counts them, what pods it no longer
    runs hold given back; the groups of NUMA nodes that pinned memory spans."""
    free = {n: dict(z.free) for n, z in state.zones.items()}
    for uid in stale:
        for held in state.entries.get(uid, {}).values():
            for kind, size, numas in held:
                left = Decimal(size)
                for numa in numas:  # given back in the order the kubelet took it
                    zone = state.zones.get(numa)
                    if zone is None or left <= 0:
                        continue
                    back = min(zone.allocatable.get(kind, Decimal(0)) - free[numa].get(kind, Decimal(0)), left)
                    free[numa][kind] = free[numa].get(kind, Decimal(0)) + back
                    left -= back
    for numa, zone in state.zones.items():
        if numa in zones:
            for kind, pinnable in zone.allocatable.items():
                zones[numa].allocatable[kind] = pinnable
                zones[numa].used[kind] = pinnable - free[numa].get(kind, pinnable)
    # Each pinned block counts one assignment on each of its zones; the kubelet drops stale pods'
    # blocks before it computes the next hints, and a zone left without any is its own group again.
    stale_blocks = Counter(
        numa for uid in stale for held in state.entries.get(uid, {}).values() for _, _, numas in held for numa in numas
    )
    live = {
        numa: zone.cells
        for numa, zone in state.zones.items()
        if numa in zones and zone.assignments - stale_blocks[numa] > 0
    }
    for numa, cells in live.items():
        zones[numa].attributes[NRT_ZONE_ATTR_MEMORY_CELLS] = format_cpulist(list(cells))
    return sorted({cells for cells in live.values() if len(cells) > 1})


def _devices(
    inputs: Inputs, checkpoints: Checkpoints, stale: set[str], zones: dict[int, _Figures], attributes: dict[str, str]
) -> None:
    """Devices: each zone counts the healthy devices attached to it (a device on two zones in
    both, as either zone can serve it); devices on several zones or without topology are listed
    again as device groups (``apis.devicegroups``), so that a set of zones counts each device once.
    In use: what PodResources lists, and what the device checkpoint gives the pods the kubelet
    still runs (their init containers' devices too). What the kubelet's list holds that the NRT
    leaves out is ``device_problems``."""
    if inputs.allocatable is None:
        return
    attached, _ = _attached(inputs.allocatable, set(zones))
    held = _devices_held(inputs)
    used = {device for _, devices in held for device in devices}
    if checkpoints.devices is not None:
        holders = set(checkpoints.devices.entries) if inputs.hold_stale else device_holders(checkpoints, held, stale)
        for uid in holders:
            used.update(*checkpoints.devices.entries[uid].values())
    groups: dict[tuple[str, tuple[int, ...]], list[int]] = {}
    for (resource, device_id), numa in attached.items():
        free = (resource, device_id) not in used
        for n in numa:
            zone = zones[n]
            zone.allocatable[resource] = zone.allocatable.get(resource, Decimal(0)) + 1
            zone.capacity[resource] = zone.capacity.get(resource, Decimal(0)) + 1
            if not free:
                zone.used[resource] += 1
        if len(numa) != 1:
            counts = groups.setdefault((resource, numa), [0, 0])
            counts[0] += 1
            counts[1] += free
    if groups:
        listed: dict[str, list[DeviceGroup]] = {}
        for (resource, numa), (allocatable, available) in groups.items():
            listed.setdefault(resource, []).append(DeviceGroup(numa, allocatable, available))
        attributes[NRT_ATTR_DEVICE_GROUPS] = format_groups(listed)


def _attached(allocatable: Allocatable, numa_ids: set[int]) -> tuple[dict[tuple[str, str], tuple[int, ...]], list[str]]:
    """(resource, device id) -> the NUMA zones it is attached to, and what was left out. The
    kubelet lists a device once per NUMA node it is attached to; the entries are joined again. A
    NUMA id the machine does not have is left out (the kubelet leaves it out of its masks too)."""
    zones: dict[tuple[str, str], set[int]] = {}
    unknown: set[int] = set()
    for devices in allocatable.devices:
        unknown.update(n for n in devices.numa if n not in numa_ids)
        for device_id in devices.ids:
            zones.setdefault((devices.resource, device_id), set()).update(n for n in devices.numa if n in numa_ids)
    problems = []
    if unknown:
        problems.append(f"NUMA ids the machine does not have: {', '.join(map(str, sorted(unknown)))}")
    return {key: tuple(sorted(numa)) for key, numa in zones.items()}, problems


def device_problems(machine: Machine, allocatable: Allocatable) -> str:
    """What of the kubelet's device list the NRT leaves out, in one line ("" when nothing is)."""
    _, problems = _attached(allocatable, {n.id for n in machine.nodes})
    return "; ".join(problems)


def _kubelet_attributes(kubelet: KubeletConfig) -> dict[str, str]:
    """The kubelet's policies, as the scheduler side needs them to predict its admission."""
    attributes = {
        NRT_ATTR_TOPOLOGY_MANAGER_POLICY: kubelet.topology_manager_policy,
        NRT_ATTR_TOPOLOGY_MANAGER_SCOPE: kubelet.topology_manager_scope,
        NRT_ATTR_CPU_MANAGER_POLICY: kubelet.cpu_manager_policy,
        NRT_ATTR_MEMORY_MANAGER_POLICY: kubelet.memory_manager_policy,
    }
    for name, options in (
        (NRT_ATTR_TOPOLOGY_MANAGER_POLICY_OPTIONS, kubelet.topology_manager_policy_options),
        (NRT_ATTR_CPU_MANAGER_POLICY_OPTIONS, kubelet.cpu_manager_policy_options),
    ):
        if options:
            attributes[name] = ",".join(f"{k}={v}" for k, v in sorted(options.items()))
    if kubelet.reserved_system_cpus:
        attributes[NRT_ATTR_RESERVED_SYSTEM_CPUS] = format_cpulist(kubelet.reserved_system_cpus)
    return attributes


def _zone(node: NumaNode, figures: _Figures) -> Zone:
    """A zone of the NRT: capacity, allocatable and available of every resource it has, its
    distances to the other zones."""
    resources = []
    for name in sorted(set(figures.capacity) | set(figures.allocatable)):
        allocatable = figures.allocatable.get(name, Decimal(0))
        capacity = max(figures.capacity.get(name, allocatable), allocatable)
        available = max(Decimal(0), allocatable - figures.used.get(name, Decimal(0)))
        resources.append(
            ResourceInfo(
                name=name,
                capacity=str(int(capacity)),
                allocatable=str(int(allocatable)),
                available=str(int(available)),
            )
        )
    costs = [CostInfo(name=zone_name(other), value=d) for other, d in sorted(node.distances.items())] or None
    zone = Zone(name=zone_name(node.id), type=NRT_ZONE_TYPE_NODE, costs=costs, resources=resources)
    if figures.attributes:  # set only when there are some: unset fields are not sent
        zone.attributes = [AttributeInfo(name=k, value=v) for k, v in sorted(figures.attributes.items())]
    return zone


def topology_policy(kubelet: KubeletConfig) -> str:
    """The deprecated one-word policy (``topologyPolicies``) older consumers read."""
    return legacy_policy(kubelet.topology_manager_policy, kubelet.topology_manager_scope)
