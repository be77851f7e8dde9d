"""Will the kubelet admit this pod on this node? A prediction from the node's NodeResourceTopology.

When the NRT says which resource managers are active (the toposched exporter publishes
cpuManagerPolicy and memoryManagerPolicy), the prediction follows the kubelet: CPU hints only
for Guaranteed pods with integral CPUs under the static CPU manager, memory and hugepages hints
only under the Static Memory Manager, device hints for every QoS, the Topology Manager's merge,
container or pod scope. Without those attributes (older exporters) it falls back to the upstream
NodeResourceTopologyMatch filter, which is stricter (it treats CPU and memory as NUMA-bound).
"""

from collections.abc import Mapping, Sequence
from decimal import Decimal

from toposched.schedhook.placement.model import (
    HOST_LEVEL,
    Container,
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
    narrower,
)

CPU = "cpu"


def guaranteed_cpus(pod: Pod, container: Container) -> int:
    """Exclusive CPUs the static CPU manager gives the container: its integral request in a
    Guaranteed pod, else none."""
    amount = container_request(container).get(CPU, Decimal(0))
    if pod.qos != "Guaranteed" or amount <= 0 or amount != amount.to_integral_value():
        return 0
    return int(amount)


def pod_guaranteed_cpus(pod: Pod) -> int:
    """The pod's exclusive CPUs as the CPU manager counts them in pod scope: the larger of the app
    and sidecar containers' sum and, per regular init container, it plus the sidecars before it."""
    sidecars = peak = 0
    for c in pod.init_containers:
        if CPU not in container_request(c):
            continue
        cpus = guaranteed_cpus(pod, c)
        if c.sidecar:
            sidecars += cpus
        else:
            peak = max(peak, sidecars + cpus)
    return max(peak, sidecars + sum(guaranteed_cpus(pod, c) for c in pod.containers))


def memory_request(pod: Pod, container: Container) -> dict[str, Decimal]:
    """Memory and hugepages the Static Memory Manager pins for the container (Guaranteed pods only)."""
    if pod.qos != "Guaranteed":
        return {}
    return {r: q for r, q in container_request(container).items() if numa_memory(r) and q > 0}


def pod_memory_request(pod: Pod) -> dict[str, Decimal]:
    """The pod's pinned memory in pod scope (the Memory Manager's own sum, like ``pod_guaranteed_cpus``)."""
    if pod.qos != "Guaranteed":
        return {}
    sidecars: dict[str, Decimal] = {}
    peak: dict[str, Decimal] = {}
    for c in pod.init_containers:
        for r, q in memory_request(pod, c).items():
            peak.setdefault(r, Decimal(0))
            if c.sidecar:
                sidecars[r] = sidecars.get(r, Decimal(0)) + q
            else:
                peak[r] = max(peak[r], sidecars.get(r, Decimal(0)) + q)
    apps: dict[str, Decimal] = {}
    for c in pod.containers:
        for r, q in memory_request(pod, c).items():
            apps[r] = apps.get(r, Decimal(0)) + q
    return {r: max(q + sidecars.get(r, Decimal(0)), peak.get(r, Decimal(0))) for r, q in apps.items()}


class RejectedError(Exception):
    """A resource manager's allocation would fail: the kubelet's UnexpectedAdmissionError."""


class NodeState:
    """The node's free resources per NUMA zone while one pod's containers are placed, as the CPU and
    Memory Managers see them: what the NRT says is available, the CPUs and memory this pod's init
    containers hold for its app containers to reuse, and the Memory Manager's NUMA groups."""

    def __init__(self, node: NodeTopology) -> None:
        self.node = node
        self.ids = node.numa_ids
        self.free = {z.numa: dict(z.available) for z in node.zones}
        self.capacity = {z.numa: z.capacity for z in node.zones}
        self.allocatable = {z.numa: z.allocatable for z in node.zones}
        self.cpu_ids = [z.numa for z in node.zones if z.capacity.get(CPU, Decimal(0)) > 0]
        """The CPU manager knows only the NUMA nodes that have CPUs."""
        self.reusable_cpus: dict[int, int] = {}
        self.reusable_memory: dict[int, dict[str, Decimal]] = {}
        """mask -> resource -> memory of regular init containers pinned to exactly that mask."""
        cells = {z.numa: z.memory_cells for z in node.zones if z.memory_cells is not None}
        if cells:  # the Memory Manager's own per-zone state
            self.groups = {n: m for n, m in cells.items() if count(m) > 1}
        else:
            self.groups = {n: m for m in node.memory_groups for n in bits(m)}
        """zone -> the multi-NUMA group its pinned memory belongs to."""
        self.assigned = set(cells) | {
            z.numa
            for z in node.zones
            if z.numa in self.groups
            or any(r in z.available and z.available[r] < q for r, q in z.allocatable.items() if numa_memory(r))
        }
        """Zones holding pinned memory of some container (the Memory Manager's assignments)."""
        self.threads = node.threads_per_core or 0
        if not self.threads or any(z.free_cores is None for z in node.zones if z.numa in self.cpu_ids):
            self.threads = 0  # whole cores unknown: CPUs are counted singly
        # Never more whole cores than the zone's free CPUs make (an NRT can say anything).
        self.free_cores = {
            z.numa: min(z.free_cores or 0, max(int(z.available.get(CPU, Decimal(0))), 0) // (self.threads or 1))
            for z in node.zones
        }

    def sum(self, table: Mapping[int, Mapping[str, Decimal]], resource: str, m: int) -> Decimal:
        return sum((table[n].get(resource, Decimal(0)) for n in bits(m) if n in table), Decimal(0))

    # -- CPU manager (static policy) -----------------------------------------------------------------

    def cpu_hints(self, request: int) -> list[Hint]:
        min_affinity = len(self.cpu_ids)
        reusable = mask(*(n for n, k in self.reusable_cpus.items() if k))
        reused = sum(self.reusable_cpus.values())
        found = []
        for m in masks(self.cpu_ids):
            if self.sum(self.capacity, CPU, m) >= request:
                min_affinity = min(min_affinity, count(m))
            if reusable & ~m:  # the pod's reusable CPUs must lie inside the mask
                continue
            if self.sum(self.free, CPU, m) + reused >= request:
                found.append(m)
        return [Hint(m, count(m) == min_affinity) for m in found]

    def take_cpus(self, request: int, affinity: int | None, init: bool) -> tuple[int, ...]:
        """Allocate ``request`` exclusive CPUs as the static policy's packed allocator does, first
        within the affinity, then elsewhere: whole free zones while at least a zone's worth is
        still needed (smallest first), then whole free cores while at least a core's worth is
        needed, then single CPUs, both from the fullest zones first (and within a zone, the halves
        of used cores before whole ones). The pod's init containers' CPUs count as free ones.
        Returns the zones they came from. (Each zone is taken to be its own socket, which is what
        the allocator does when sockets are no fewer than NUMA nodes.)"""
        used: dict[int, int] = {}
        left = request
        within = [n for n in self.ids if affinity is None or n in bits(affinity)]
        for zones in (within, [n for n in self.ids if n not in within]):
            for n in sorted(zones, key=lambda n: (self._cpus_of(n), n)):
                size = int(self.capacity[n].get(CPU, Decimal(0)))
                if size and self._cpus_of(n) == size and left >= size:  # a free zone
                    self._take(n, size, whole=True)
                    used[n] = used.get(n, 0) + size
                    left -= size
            # The pod's reusable CPUs (its init containers') are in the pool like free ones.
            if self.threads:
                for n in sorted(zones, key=lambda n: (self._cpus_of(n), n)):
                    whole = self.free_cores[n] + self.reusable_cpus.get(n, 0) // self.threads
                    cores = min(left // self.threads, whole)
                    if cores > 0:
                        self._take(n, cores * self.threads, whole=True)
                        used[n] = used.get(n, 0) + cores * self.threads
                        left -= cores * self.threads
            for n in sorted(zones, key=lambda n: (self._cpus_of(n), n)):
                take = min(left, self._cpus_of(n))
                if take:
                    self._take(n, take, whole=False)
                    used[n] = used.get(n, 0) + take
                    left -= take
            if not left:
                break
        if left:  # the CPU Manager's allocation fails: UnexpectedAdmissionError
            raise RejectedError(f"not enough CPUs: {request} requested, {request - left} free")
        if init:  # a regular init container's CPUs wait for the app containers to reuse them
            for n, k in used.items():
                self.reusable_cpus[n] = self.reusable_cpus.get(n, 0) + k
        return tuple(sorted(used))

    def _take(self, n: int, cpus: int, whole: bool) -> None:
        """``cpus`` of zone ``n``: the pod's reusable ones first, then free ones (``whole``: as
        whole cores; else halves of used cores before whole ones)."""
        reused = min(cpus, self.reusable_cpus.get(n, 0))
        if reused:
            self.reusable_cpus[n] -= reused
        rest = cpus - reused
        if not rest:
            return
        have = int(self.free[n].get(CPU, Decimal(0)))
        self.free[n][CPU] = Decimal(have - rest)
        if self.threads:
            halves = 0 if whole else max(0, have - self.free_cores[n] * self.threads)
            cores = -(-max(0, rest - halves) // self.threads)
            self.free_cores[n] = max(0, self.free_cores[n] - cores)

    def _cpus_of(self, n: int) -> int:
        """The zone's CPUs the allocator may take: free ones and this pod's reusable ones."""
        return max(int(self.free[n].get(CPU, Decimal(0))), 0) + self.reusable_cpus.get(n, 0)

    # -- Memory manager (Static policy) ---------------------------------------------------------------

    def memory_hints(self, request: Mapping[str, Decimal]) -> list[Hint]:
        """Masks whose allocatable holds every requested type, free (with this pod's reusable
        memory) too, and that respect the NUMA groups of earlier multi-NUMA allocations."""
        min_affinity = len(self.ids)
        found = []
        for m in masks(self.ids):
            if any(self.sum(self.allocatable, r, m) < q for r, q in request.items()):
                continue
            min_affinity = min(min_affinity, count(m))
            if count(m) == 1:
                if bits(m)[0] in self.groups:
                    continue
            elif any(n in self.assigned and self.groups.get(n) != m for n in bits(m)):
                continue
            reusable = self.reusable_memory.get(m, {})
            if any(self.sum(self.free, r, m) + reusable.get(r, Decimal(0)) < q for r, q in request.items()):
                continue
            found.append(m)
        return [Hint(m, count(m) == min_affinity) for m in found]

    def take_memory(self, request: Mapping[str, Decimal], decided: Hint, init: bool) -> int:
        """Pin the container's memory as the Memory Manager's Allocate does; returns the mask.

        Raises RejectedError where the kubelet would fail the allocation (UnexpectedAdmissionError)."""
        hints = self.memory_hints(request)
        chosen = decided
        if decided.affinity is None:  # no alignment asked for: the Memory Manager's own best hint
            if not hints:
                raise RejectedError("no NUMA zones with enough memory")
            chosen = _best(hints)
            if decided.preferred and not chosen.preferred:
                raise RejectedError("no preferred memory hint")
        assert chosen.affinity is not None
        if any(self.sum(self.free, r, chosen.affinity) < q for r, q in request.items()):
            wider = [h for h in hints if h.affinity is not None and chosen.affinity & ~h.affinity == 0]
            if not wider:
                raise RejectedError("failed to find NUMA zones to extend the aligned memory")
            extended = _best(wider)
            if chosen.preferred and not extended.preferred:
                raise RejectedError("failed to find a preferred extension of the aligned memory")
            chosen = extended
        m = chosen.affinity
        assert m is not None
        if count(m) > 1 and any(n in self.assigned and self.groups.get(n) != m for n in bits(m)):
            raise RejectedError("the aligned memory violates earlier NUMA allocations")
        reusable = self.reusable_memory.setdefault(m, {})
        for r, q in request.items():
            left = max(Decimal(0), q - reusable.get(r, Decimal(0)))
            for n in bits(m):
                have = self.free[n].get(r, Decimal(0))
                take = min(have, left)
                if take > 0:
                    self.free[n][r] = have - take
                    left -= take
            if init:
                reusable[r] = max(reusable.get(r, Decimal(0)), q)
            else:
                reusable[r] = max(Decimal(0), reusable.get(r, Decimal(0)) - q)
        for n in bits(m):
            self.assigned.add(n)
            if count(m) > 1:
                self.groups[n] = m
            else:  # the kubelet regroups the zone alone, even out of a group (its other members stay)
                self.groups.pop(n, None)
        return m

    # -- device plugins -------------------------------------------------------------------------------

    def device_hints(self, resource: str, amount: Decimal) -> list[Hint] | None:
        if not any(resource in z.allocatable for z in self.node.zones):
            return None  # no topology for this resource: host-level
        sizes = [count(m) for m in masks(self.ids) if self.sum(self.allocatable, resource, m) >= amount]
        if not sizes:
            return []
        return [Hint(m, count(m) == min(sizes)) for m in masks(self.ids) if self.sum(self.free, resource, m) >= amount]

    def take_devices(self, request: Mapping[str, Decimal], affinity: int | None) -> None:
        for resource, amount in request.items():
            if resource == CPU or numa_affine(resource) or resource in HOST_LEVEL or amount <= 0:
                continue
            for n in [n for n in self.ids if affinity is None or n in bits(affinity)]:
                have = self.free[n].get(resource, Decimal(0))
                take = min(have, amount)
                self.free[n][resource] = have - take
                amount -= take

    def providers(
        self, cpus: int, memory: Mapping[str, Decimal], devices: Mapping[str, Decimal]
    ) -> list[ProviderHints]:
        """The CPU, memory and device managers' hints for one container (or the pod, in pod scope)."""
        node = self.node
        cpu: dict[str, list[Hint] | None] = {}
        if node.cpu_manager == "static" and cpus:
            cpu[CPU] = self.cpu_hints(cpus)
        pinned: dict[str, list[Hint] | None] = {}
        if node.memory_manager == "Static" and memory:
            hints = self.memory_hints(memory)
            pinned = {r: list(hints) for r in memory}
        plugged: dict[str, list[Hint] | None] = {}
        for resource, amount in devices.items():
            if amount > 0 and resource != CPU and not numa_affine(resource) and resource not in HOST_LEVEL:
                plugged[resource] = self.device_hints(resource, amount)
        return [cpu, pinned, plugged]


def numa_memory(resource: str) -> bool:
    return resource == "memory" or resource.startswith("hugepages-")


def _best(hints: Sequence[Hint]) -> Hint:
    """The Memory Manager's pick among its own hints: preferred first, then the narrowest."""
    best = hints[0]
    for h in hints[1:]:
        assert h.affinity is not None
        assert best.affinity is not None
        if (h.preferred and not best.preferred) or (
            h.preferred == best.preferred and narrower(h.affinity, best.affinity)
        ):
            best = h
    return best


def predict(node: NodeTopology, pod: Pod) -> Verdict:
    """The kubelet's admission decision for ``pod`` on ``node`` and the NUMA nodes it would use."""
    if not node.zones:
        return Verdict(True, "no NUMA zones published")
    if not node.knows_managers:
        return upstream_filter(node, pod)
    state = NodeState(node)
    distances = node.distances if node.prefer_closest else None
    everything = mask(*node.numa_ids)
    placed: dict[str, tuple[int, ...]] = {}
    if node.scope == "pod" and node.policy != NONE:
        decision = merge(
            state.providers(pod_guaranteed_cpus(pod), pod_memory_request(pod), pod.effective()),
            node.numa_ids,
            node.policy,
            distances,
        )
        if not decision.admit:
            return Verdict(False, "cannot align pod")
        used = set(bits(decision.affinity or everything))
        try:
            for c in (*pod.init_containers, *pod.containers):
                used.update(_allocate(state, pod, c, Hint(decision.affinity, decision.preferred)))
        except RejectedError as exc:
            return Verdict(False, f"cannot allocate for pod: {exc}")
        return Verdict(True, numa={"pod": tuple(sorted(used))})
    for c in (*pod.init_containers, *pod.containers):
        what = ("sidecar" if c.sidecar else "init") if c in pod.init_containers else ""
        name = f"{what} container {c.name}".strip()
        if node.policy == NONE:  # no hints asked for: the managers allocate with an empty, unpreferred hint
            decided = Hint(None, False)
        else:
            decision = merge(
                state.providers(guaranteed_cpus(pod, c), memory_request(pod, c), container_request(c)),
                node.numa_ids,
                node.policy,
                distances,
            )
            if not decision.admit:
                return Verdict(False, f"cannot align {name}", placed)
            decided = Hint(decision.affinity, decision.preferred)
        try:
            zones = _allocate(state, pod, c, decided)
        except RejectedError as exc:
            return Verdict(False, f"cannot allocate for {name}: {exc}", placed)
        if node.policy != NONE:
            placed[c.name] = tuple(sorted(set(bits(decided.affinity or everything)) | set(zones)))
    return Verdict(True, numa=placed)


def _allocate(state: NodeState, pod: Pod, container: Container, decided: Hint) -> set[int]:
    """What the resource managers hand out exclusively to one container leaves the zones; returns
    the zones it actually got (the aligned mask may not hold all its CPUs: the rest spills over)."""
    node = state.node
    init = container in pod.init_containers and not container.sidecar
    zones: set[int] = set()
    cpus = guaranteed_cpus(pod, container)
    if node.cpu_manager == "static" and cpus:
        zones.update(state.take_cpus(cpus, decided.affinity, init))
    memory = memory_request(pod, container)
    if node.memory_manager == "Static" and memory:
        zones.update(bits(state.take_memory(memory, decided, init)))
    state.take_devices(container_request(container), decided.affinity)
    return zones


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
