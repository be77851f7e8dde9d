"""One node's resource managers while a pod's containers are admitted: their hints and allocations. Pure.

The hints come from ``kubelet.hints`` (the same functions the columnar table calls for thousands
of nodes); the allocations follow the static CPU manager's packed allocator, the Static Memory
Manager's Allocate and the device manager, so that later containers of the pod see what earlier
ones took.
"""

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from toposched.schedhook.placement.kubelet import distribute, hints
from toposched.schedhook.placement.kubelet.claims import (
    ALIGN_BY_SOCKET,
    ALIGN_BY_UNCORE_CACHE,
    CPU,
    DISTRIBUTE_ACROSS_NUMA,
    FULL_PCPUS_ONLY,
    STATIC_CPU,
    STATIC_MEMORY,
    Claims,
    device,
    numa_memory,
)
from toposched.schedhook.placement.kubelet.hints import Ints, Masks, milli, milli_request
from toposched.schedhook.placement.kubelet.topologymanager import (
    Hint,
    ProviderHints,
    bits,
    count,
    mask,
    narrower,
)
from toposched.schedhook.placement.model import NodeTopology


class RejectedError(Exception):
    """A resource manager's allocation would fail: the kubelet's UnexpectedAdmissionError."""


def memory_groups(node: NodeTopology) -> dict[int, int]:
    """The Memory Manager's NUMA groups the NRT shows: zone -> the multi-NUMA group its pinned
    memory belongs to (from the zones' own state when published, else the node's groups)."""
    cells = {z.numa: z.memory_cells for z in node.zones if z.memory_cells is not None}
    if cells:
        return {n: m for n, m in cells.items() if count(m) > 1}
    return {n: m for m in node.memory_groups for n in bits(m)}


def pinned_zones(node: NodeTopology, groups: Mapping[int, int]) -> set[int]:
    """The zones holding pinned memory of some container: in a group, with Memory Manager state,
    or with less memory available than allocatable."""
    return {
        z.numa
        for z in node.zones
        if z.memory_cells is not None
        or z.numa in groups
        or any(r in z.available and z.available[r] < q for r, q in z.allocatable.items() if numa_memory(r))
    }


class NodeState:
    """The node's free resources per NUMA zone while one pod's containers are placed, as the CPU and
    Memory Managers see them: what the NRT says is available, the CPUs and memory this pod's init
    containers hold for its app containers to reuse, and the Memory Manager's NUMA groups."""

    def __init__(self, node: NodeTopology) -> None:
        self.node = node
        self.ids = sorted(node.numa_ids)
        self.position = {n: i for i, n in enumerate(self.ids)}
        self.free = {z.numa: dict(z.available) for z in node.zones}
        self.capacity = {z.numa: z.capacity for z in node.zones}
        self.allocatable = {z.numa: z.allocatable for z in node.zones}
        self.cpu_ids = [n for n in self.ids if self.capacity[n].get(CPU, Decimal(0)) > 0]
        """The CPU manager knows only the NUMA nodes that have CPUs."""
        self.reusable_cpus: dict[int, int] = {}
        self.reusable_memory: dict[int, dict[str, Decimal]] = {}
        """mask -> resource -> memory of regular init containers pinned to exactly that mask."""
        self.groups = memory_groups(node)
        self.assigned = pinned_zones(node, self.groups)
        self._free: dict[str, Ints] = {}
        """resource -> its free [zone] vector in thousandths, once this pod's containers took some."""
        self._taken: set[str] = set()
        """Resources this pod's containers took some of: their free vectors are this pod's own."""
        self._devices: dict[str, DeviceGroups] = {}
        self._pinned: tuple[object, list[Hint]] | None = None
        """The last memory hints and what they were for (the Memory Manager's state unchanged since)."""
        self.socket = {z.numa: z.socket for z in node.zones if z.numa in self.cpu_ids and z.socket is not None}
        """CPU zone -> its socket, where the NRT says."""
        self.sockets_first = len(self.socket) == len(self.cpu_ids) and len(set(self.socket.values())) < len(self.socket)
        self.cpu_capacity = {n: int(self.capacity[n].get(CPU, Decimal(0))) for n in self.cpu_ids}
        """CPU zone -> its CPUs (reserved ones included), as the kubelet's topology counts them."""
        self.per_socket = sum(self.cpu_capacity.values()) // max(1, len(set(self.socket.values())))
        """The machine's CPUs over its sockets (the kubelet's CPUsPerSocket, also its CPUs per
        uncore cache when a cache is a socket)."""
        """Fewer sockets than NUMA nodes (sub-NUMA clustering): the packed allocator goes by socket first."""
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

    def _vector(self, which: str, resource: str) -> Ints:
        """[zone]: ``which`` (capacity, allocatable or free) of the resource in thousandths, zones by NUMA id."""
        if which == "free":
            if resource in self._taken:  # this pod's own state
                found = self._free.get(resource)
                if found is None:
                    found = self._free[resource] = self._read(self.free, resource)
                return found
            which = "available"  # as the NRT says, and the same for every pod evaluated on this node
        key = (which, resource)
        found = self.node.vectors.get(key)
        if found is None:
            table = self.free if which == "available" else getattr(self, which)  # free is available until a take
            found = self.node.vectors[key] = self._read(table, resource)
        return found

    def _read(self, table: Mapping[int, Mapping[str, Decimal]], resource: str) -> Ints:
        return np.array([milli(table[n].get(resource, Decimal(0))) for n in self.ids], dtype=np.int64)

    def _freed(self, resource: str) -> None:
        """Free amounts of ``resource`` changed: from now on they are this pod's own, read again when needed."""
        self._taken.add(resource)
        self._free.pop(resource, None)

    def _masks(self, ids: Sequence[int], singles: bool = False) -> Masks:
        """The masks hints are looked for in: every mask over ``ids``, or (``singles``) only the
        single zones, whose preferences are exact too."""
        if singles:
            return hints.single_zones(len(self.ids))
        return hints.every_mask(tuple(self.position[n] for n in ids), len(self.ids))

    def _as_id_masks(self, masks: Masks) -> tuple[int, ...]:
        return _id_masks(tuple(self.ids), masks)

    def _hints(self, masks: Masks, fits: np.ndarray, preferred: np.ndarray) -> list[Hint]:
        as_ids = self._as_id_masks(masks)
        return [Hint(as_ids[i], bool(preferred[i])) for i in np.flatnonzero(fits).tolist()]

    # -- CPU manager (static policy) -----------------------------------------------------------------

    def cpu_hints(self, request: int, singles: bool = False) -> list[Hint]:
        masks = self._masks(self.cpu_ids, singles)
        reusable = mask(*(n for n, k in self.reusable_cpus.items() if k))
        inside = None
        if reusable:  # the masks must hold the pod's reusable CPUs
            inside = np.array([(reusable & ~m) == 0 for m in self._as_id_masks(masks)], dtype=np.bool_)
        sockets, per_socket = self._sockets(masks)
        fits, preferred = hints.cpu_hints(
            masks,
            self._vector("capacity", CPU),
            self._vector("free", CPU),
            milli_request(Decimal(request)),
            known=len(self.cpu_ids),
            reused=1000 * sum(self.reusable_cpus.values()),
            inside=inside,
            sockets=sockets,
            per_socket=per_socket,
        )
        return self._hints(masks, fits, preferred)

    def _sockets(self, masks: Masks) -> tuple[Ints | None, int]:
        """align-by-socket: the sockets each mask's CPU zones span, and NUMA nodes per socket as the
        kubelet counts them (its NUMA nodes with CPUs over its sockets, rounded down)."""
        if ALIGN_BY_SOCKET not in self.node.cpu_options:
            return None, 0
        socket = self.socket
        spans = np.array(
            [len({socket[self.ids[p]] for p in m if self.ids[p] in socket}) for m in masks.positions], dtype=np.int64
        )
        return spans, len(self.cpu_ids) // max(1, len(set(socket.values())))

    def _aligned_zones(self, affinity: int | None) -> list[int]:
        """The zones whose CPUs the allocator takes first: the affinity's, or under align-by-socket
        every zone of the affinity's sockets."""
        within = [n for n in self.ids if affinity is None or n in bits(affinity)]
        if affinity is None or ALIGN_BY_SOCKET not in self.node.cpu_options:
            return within
        sockets = {self.socket[n] for n in within if n in self.socket}
        return [n for n in self.ids if n in within or self.socket.get(n, -1) in sockets]

    def check_smt_alignment(self, request: int) -> None:
        """full-pcpus-only: a request the kubelet refuses with SMTAlignmentError -- not whole cores,
        or more whole free cores than there are (the siblings of reserved CPUs never count)."""
        if FULL_PCPUS_ONLY not in self.node.cpu_options:
            return
        threads = self.node.threads_per_core or 1
        if request % threads:
            raise RejectedError(f"SMTAlignmentError: {request} CPUs are not whole cores of {threads} threads")
        physical = sum(self.free_cores.values()) * threads
        if request > physical:
            raise RejectedError(f"SMTAlignmentError: {request} CPUs requested, {physical} on whole free cores")

    def take_cpus(self, request: int, affinity: int | None, init: bool) -> tuple[int, ...]:
        """Allocate ``request`` exclusive CPUs as the static policy does, first within the
        affinity, then elsewhere. Packed (the default): whole free zones while at least a zone's
        worth is still needed (smallest first), then whole free cores while at least a core's
        worth is needed, then single CPUs, both from the fullest zones first (and within a zone,
        the halves of used cores before whole ones). With ``distribute-cpus-across-numa``: spread
        as ``distribute.spread`` decides. The pod's init containers' CPUs count as free ones.
        Returns the zones they came from. (With fewer sockets than NUMA nodes, whole sockets and
        sockets' order come first: ``_pack``.)"""
        used: dict[int, int] = {}
        left = request
        within = self._aligned_zones(affinity)
        elsewhere = [n for n in self.ids if n not in within and self._cpus_of(n)]
        spreads = DISTRIBUTE_ACROSS_NUMA in self.node.cpu_options
        # The second pass is the kubelet's second call, over every CPU still allocatable: a zone
        # of the affinity keeps free CPUs only when a whole socket was taken in its place.
        for second in (False, True):
            zones = [n for n in self.ids if n not in within or self._cpus_of(n)] if second else within
            counts = self._spread(zones, left) if spreads else None
            if counts is not None:
                for n, k in counts.items():
                    self._take_packed_in(n, k)
                    used[n] = used.get(n, 0) + k
                    left -= k
            else:
                left = self._pack(zones, left, used)
            if not left:
                break
        if left:  # the CPU Manager's allocation fails: UnexpectedAdmissionError
            raise RejectedError(f"not enough CPUs: {request} requested, {request - left} free")
        if init:  # a regular init container's CPUs wait for the app containers to reuse them
            for n, k in used.items():
                self.reusable_cpus[n] = self.reusable_cpus.get(n, 0) + k
        if spreads and set(used) - set(within):
            # The spill follows a balance over the zones' exact CPUs, which a NRT's counts may not
            # match at the margin (its reserved siblings, an exporter a moment behind): any zone
            # outside the mask with free CPUs may get some.
            return tuple(sorted({*used, *elsewhere}))
        return tuple(sorted(used))

    def _spread(self, zones: Sequence[int], left: int) -> dict[int, int] | None:
        """distribute-cpus-across-numa over ``zones`` for as many of ``left`` as they hold."""
        available = {n: self._cpus_of(n) for n in zones if n in self.cpu_ids}
        amount = min(left, sum(available.values()))
        group = (self.threads or 1) if FULL_PCPUS_ONLY in self.node.cpu_options else 1
        machine = sum(self.cpu_capacity.values())
        return distribute.spread(available, amount, group, machine, len(self.cpu_ids))

    def _pack(self, zones: Sequence[int], left: int, used: dict[int, int]) -> int:
        """The packed allocator over ``zones`` (one takeByTopology call): at most as many CPUs as
        the zones hold; returns how many of ``left`` are still needed. Whole free zones and whole
        free sockets first -- sockets first with fewer sockets than NUMA nodes (sub-NUMA
        clustering), zones first otherwise -- then whole cores, then single CPUs."""
        need = min(left, sum(self._cpus_of(n) for n in zones))
        rest = left - need
        levels = [self._take_free_zones]
        if self.socket and len(self.socket) == len(self.cpu_ids):
            levels.insert(0 if self.sockets_first else 1, self._take_free_sockets)
        for level in levels:
            need = level(zones, need, used)
        if need and ALIGN_BY_UNCORE_CACHE in self.node.cpu_options and len(self.socket) == len(self.cpu_ids):
            need = self._take_uncore_caches(zones, need, used)
        # The pod's reusable CPUs (its init containers') are in the pool like free ones.
        if self.threads:
            for n in self._packing_order(zones):
                whole = self.free_cores[n] + self.reusable_cpus.get(n, 0) // self.threads
                cores = min(need // self.threads, whole)
                if cores > 0:
                    self._take(n, cores * self.threads, whole=True)
                    used[n] = used.get(n, 0) + cores * self.threads
                    need -= cores * self.threads
        for n in self._packing_order(zones):
            take = min(need, self._cpus_of(n))
            if take:
                self._take(n, take, whole=False)
                used[n] = used.get(n, 0) + take
                need -= take
        return rest + need

    def _take_free_zones(self, zones: Sequence[int], need: int, used: dict[int, int]) -> int:
        """takeFullNUMANodes: each zone whose CPUs are all free, while at least its size is needed."""
        for n in self._packing_order(zones):
            size = int(self.capacity[n].get(CPU, Decimal(0)))
            if size and self._cpus_of(n) == size and need >= size:
                self._take(n, size, whole=True)
                used[n] = used.get(n, 0) + size
                need -= size
        return need

    def _take_free_sockets(self, zones: Sequence[int], need: int, used: dict[int, int]) -> int:
        """takeFullSockets, as the kubelet writes it: a socket counts as free when as many of its
        CPUs are in ``zones`` as the machine has CPUs per socket on average (not its own size), and
        taking it takes every CPU of the socket -- on uneven sockets, also CPUs of other zones and
        used ones (an oracle finding: seed 23, case 115)."""
        socket = self.socket
        if self.sockets_first:
            order = sorted({socket[n] for n in zones if n in socket and self._cpus_of(n)},
                           key=lambda s: (self._socket_cpus(s, zones), s))  # fmt: skip
        else:  # one socket per zone: the zones' order
            order = [socket[n] for n in self._packing_order(zones) if n in socket and self._cpus_of(n)]
        for s in order:
            members = [n for n in self.cpu_ids if socket[n] == s]
            size = sum(self.cpu_capacity[n] for n in members)
            if self._socket_cpus(s, zones) != self.per_socket or need < size:
                continue
            need -= self._take_whole(members, used)
        return need

    def _take_uncore_caches(self, zones: Sequence[int], need: int, used: dict[int, int]) -> int:
        """prefer-align-cpus-by-uncorecache (takeUncoreCache): uncore caches in the zones' order;
        while a cache's worth (the machine's average) is needed, every wholly free cache that
        the need holds; then the request from one cache alone if it has enough free cores -- the
        lowest-numbered ones, so its zones in id order. A cache is a socket here: the kubelet's
        own fallback when cadvisor reports none, and the usual L3 of one socket (NRTs do not
        publish finer caches yet). With SMT and halves of used cores in the cache, which cores
        come first is not in the NRT: followed as not claimed, the cache's zones all possible."""
        socket, threads = self.socket, max(1, self.threads)
        capacity = self.cpu_capacity
        order = [socket[n] for n in self._packing_order(zones) if n in socket and self._cpus_of(n)]
        for s in order:
            if need >= self.per_socket:
                for f in dict.fromkeys(order):
                    members = [n for n in self.cpu_ids if socket[n] == f]
                    size = sum(capacity[n] for n in members)
                    if need >= size and all(n in zones and self._cpus_of(n) == capacity[n] for n in members):
                        need -= self._take_whole(members, used)
            if not need:
                return 0
            mine = sorted(n for n in zones if socket.get(n) == s and self._cpus_of(n))
            free = sum(self._cpus_of(n) for n in mine)
            whole = sum(self.free_cores[n] for n in mine) if self.threads else free
            if free < need or whole * threads < need:
                continue  # not claimed: the cache cannot take the whole request
            if self.threads and free > whole * threads:
                # Halves of used cores: whether the lowest-numbered cores the kubelet looks at
                # hold the request depends on where the halves are, which the NRT does not say.
                # Followed as not claimed; the cache's zones stay possible.
                for n in mine:
                    used.setdefault(n, 0)
                continue
            for n in mine:
                k = min(need, self._cpus_of(n))
                if k:
                    self._take(n, k, whole=True)
                    used[n] = used.get(n, 0) + k
                    need -= k
            return need
        return need

    def _take_whole(self, members: Sequence[int], used: dict[int, int]) -> int:
        """Every CPU of the zones ``members`` (a socket or cache taken whole; CPUs of them already
        used or reserved are counted as the kubelet counts them); returns how many."""
        for n in members:
            self._take(n, self._cpus_of(n), whole=True)
            used[n] = used.get(n, 0) + self.cpu_capacity[n]
        return sum(self.cpu_capacity[n] for n in members)

    def _socket_cpus(self, s: int, zones: Sequence[int]) -> int:
        return sum(self._cpus_of(n) for n in zones if self.socket.get(n) == s)

    def _packing_order(self, zones: Sequence[int]) -> list[int]:
        """The zones as the allocator looks at them: fewest CPUs to take first (the fullest), or
        with sockets first, by their socket's fewest, then their own."""
        socket = self.socket
        if not self.sockets_first:
            return sorted(zones, key=lambda n: (self._cpus_of(n), n))
        return sorted(
            zones,
            key=lambda n: (
                (self._socket_cpus(socket[n], zones), socket[n], self._cpus_of(n), n)
                if n in socket
                else (0, -1, self._cpus_of(n), n)
            ),
        )

    def _take_packed_in(self, n: int, cpus: int) -> None:
        """``cpus`` of zone ``n`` as the packed allocator takes them within one zone: whole cores
        while a core's worth is needed, then single CPUs."""
        if self.threads:
            whole = min(cpus // self.threads, self.free_cores[n] + self.reusable_cpus.get(n, 0) // self.threads)
            if whole:
                self._take(n, whole * self.threads, whole=True)
                cpus -= whole * self.threads
        if cpus:
            self._take(n, cpus, whole=False)

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
        self._freed(CPU)
        if self.threads:
            halves = 0 if whole else max(0, have - self.free_cores[n] * self.threads)
            cores = -(-max(0, rest - halves) // self.threads)
            self.free_cores[n] = max(0, self.free_cores[n] - cores)

    def _cpus_of(self, n: int) -> int:
        """The zone's CPUs the allocator may take: free ones and this pod's reusable ones."""
        return max(int(self.free[n].get(CPU, Decimal(0))), 0) + self.reusable_cpus.get(n, 0)

    # -- Memory manager (Static policy) ---------------------------------------------------------------

    def memory_hints(self, request: Mapping[str, Decimal], singles: bool = False) -> list[Hint]:
        """Masks whose allocatable holds every requested type, free (with this pod's reusable
        memory) too, and that respect the NUMA groups of earlier multi-NUMA allocations
        (``singles``: single zones only)."""
        key = (tuple(request.items()), singles)
        if self._pinned is not None and self._pinned[0] == key:  # asked again before any change
            return self._pinned[1]
        masks = self._masks(self.ids, singles)
        types = list(request)
        as_ids = self._as_id_masks(masks)
        reusable = None
        if self.reusable_memory:
            reusable = np.array(
                [[milli(self.reusable_memory.get(m, {}).get(r, Decimal(0))) for m in as_ids] for r in types],
                dtype=np.int64,
            ).reshape(len(types), len(as_ids))
        allowed = None
        if self.groups or self.assigned:
            allowed = np.array([self._may_pin(m) for m in as_ids], dtype=np.bool_)
        fits, preferred = hints.memory_hints(
            masks,
            np.stack([self._vector("allocatable", r) for r in types]),
            np.stack([self._vector("free", r) for r in types]),
            np.array([milli_request(q) for q in request.values()], dtype=np.int64),
            known=len(self.ids),
            reusable=reusable,
            allowed=allowed,
        )
        found = self._hints(masks, fits, preferred)
        self._pinned = (key, found)
        return found

    def _may_pin(self, m: int) -> bool:
        """Do the NUMA groups of earlier allocations let memory be pinned to mask ``m``? A single
        zone must not be in a group; a wider mask must be the group of each assigned zone in it."""
        if count(m) == 1:
            return bits(m)[0] not in self.groups
        return not any(n in self.assigned and self.groups.get(n) != m for n in bits(m))

    def take_memory(self, request: Mapping[str, Decimal], decided: Hint, init: bool) -> int:
        """Pin the container's memory as the Memory Manager's Allocate does; returns the mask.

        Raises RejectedError where the kubelet would fail the allocation (UnexpectedAdmissionError)."""
        found = self.memory_hints(request)
        chosen = decided
        if decided.affinity is None:  # no alignment asked for: the Memory Manager's own best hint
            if not found:
                raise RejectedError("no NUMA zones with enough memory")
            chosen = _best(found)
            if decided.preferred and not chosen.preferred:
                raise RejectedError("no preferred memory hint")
        assert chosen.affinity is not None
        if any(self.sum(self.free, r, chosen.affinity) < q for r, q in request.items()):
            wider = [h for h in found if h.affinity is not None and chosen.affinity & ~h.affinity == 0]
            if not wider:
                raise RejectedError("failed to find NUMA zones to extend the aligned memory")
            extended = _best(wider)
            if chosen.preferred and not extended.preferred:
                raise RejectedError("failed to find a preferred extension of the aligned memory")
            chosen = extended
        m = chosen.affinity
        assert m is not None
        if count(m) > 1 and not self._may_pin(m):
            raise RejectedError("the aligned memory violates earlier NUMA allocations")
        self._pinned = None  # what the Memory Manager holds changes now
        reusable = self.reusable_memory.setdefault(m, {})
        for r, q in request.items():
            left = max(Decimal(0), q - reusable.get(r, Decimal(0)))
            for n in bits(m):
                have = self.free[n].get(r, Decimal(0))
                take = min(have, left)
                if take > 0:
                    self.free[n][r] = have - take
                    left -= take
                    self._freed(r)
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

    def devices(self, resource: str) -> "DeviceGroups":
        """The node's devices of ``resource`` by the zones they are attached to (this pod's view)."""
        found = self._devices.get(resource)
        if found is None:
            found = self._devices[resource] = DeviceGroups.of(self.node, resource)
        return found

    def knows_devices(self, resource: str) -> bool:
        """Does the NRT list the node's devices of ``resource`` (in a zone, or as a device group)?"""
        return resource in self.node.reported or resource in self.node.device_groups

    def device_hints(self, resource: str, amount: Decimal, singles: bool = False) -> list[Hint] | None:
        """The device manager's hints: None when no device of the resource has topology, [] when
        fewer are free (with the pod's reusable ones) than asked for; masks over the zones that
        have devices of the resource."""
        groups = self.devices(resource)
        if not groups.aligned:
            return None  # no topology for this resource: host-level
        wanted = int(amount)
        if sum(groups.free) + sum(groups.reusable) < wanted:
            return []
        bearing = [
            n for n in self.ids if any(n in g for g, k in zip(groups.numa, groups.allocatable, strict=True) if k)
        ]
        masks = self._masks(bearing or self.ids, singles)
        attached = np.array([[n in numa for n in self.ids] for numa in groups.numa], dtype=np.bool_)
        reached = hints.reach(masks, attached.reshape(len(groups.numa), len(self.ids)))
        topology = np.array([bool(numa) for numa in groups.numa], dtype=np.bool_)
        reusable = np.array(groups.reusable, dtype=np.int64) * topology
        inside = None
        if reusable.any():  # every reusable device must be attached to a zone of the mask
            inside = np.asarray((reached[:, reusable > 0] > 0).all(axis=1), dtype=np.bool_)
        fits, preferred = hints.device_hints(
            masks,
            reached @ (1000 * np.array(groups.allocatable, dtype=np.int64)),
            reached @ (1000 * (np.array(groups.free, dtype=np.int64) + reusable)),
            1000 * wanted,
            known=len(bearing or self.ids),
            inside=inside,
        )
        return self._hints(masks, fits, preferred)

    def take_devices(self, request: Mapping[str, Decimal], affinity: int | None, init: bool) -> set[int]:
        """Allocate the container's devices as the device manager does: its pod's reusable ones
        first, then those attached to the affinity's zones; only when those are too few all of
        them and then others. Returns the zones devices may come from outside the affinity: the
        reused ones' zones, and every zone the manager might pick from when it spills (it picks
        among equals at random). Raises RejectedError where the manager's allocation fails: fewer
        devices free than asked for."""
        spill: set[int] = set()
        within = set(bits(affinity)) if affinity is not None else set()
        for resource, amount in request.items():
            if not device(resource) or amount <= 0 or not self.knows_devices(resource):
                continue  # host-level: the node as a whole has them or not (kube-scheduler checks)
            groups = self.devices(resource)
            held = {n for i, k in enumerate(groups.reusable) if k for n in groups.numa[i]}
            plenty = sum(groups.reusable) > int(amount)
            taken = groups.take_reusable(int(amount))
            # The pod's reusable devices come first wherever they are, the affinity or not; the
            # manager picks among them, and an init container's spilled ones were picked, at
            # random (Go's map order): any of their zones may be this container's.
            spill |= {n for i, k in enumerate(taken) if k for n in groups.numa[i] if not within & set(groups.numa[i])}
            if any(taken):
                spill |= groups.scattered | (held if plenty else set())
            needed = int(amount) - sum(taken)
            if needed:
                aligned = [i for i, numa in enumerate(groups.numa) if groups.aligned and within & set(numa)]
                rest = [i for i in range(len(groups.numa)) if i not in aligned]
                # Shared devices (on several zones) first: the view later containers get is then
                # the one with fewer free devices elsewhere, never more.
                aligned.sort(key=lambda i: (-len(groups.numa[i]), groups.numa[i]))
                if needed > sum(groups.free):  # the device manager's allocation fails
                    raise RejectedError(f"not enough {resource}: {amount} requested, {sum(groups.free)} free")
                more = groups.take(aligned, needed, taken)
                if more:
                    possible = {n for i in rest if groups.free[i] for n in groups.numa[i]}
                    spill |= possible
                    groups.take(rest, more, taken)
                    if init:
                        groups.scattered |= possible
            if init:  # a regular init container's devices wait for the app containers to reuse them
                for i, k in enumerate(taken):
                    groups.reusable[i] += k
        return spill

    def providers(self, claims: Claims, singles: bool = False) -> list[ProviderHints]:
        """The CPU, memory and device managers' hints for one container (or the pod, in pod
        scope); ``singles``: only the single-zone ones (all that single-numa-node keeps)."""
        node = self.node
        cpu: dict[str, list[Hint] | None] = {}
        if node.cpu_manager == STATIC_CPU and claims.cpus:
            cpu[CPU] = self.cpu_hints(claims.cpus, singles)
        pinned: dict[str, list[Hint] | None] = {}
        if node.memory_manager == STATIC_MEMORY and claims.memory:
            found = self.memory_hints(claims.memory, singles)
            pinned = {r: list(found) for r in claims.memory}
        plugged: dict[str, list[Hint] | None] = {r: self.device_hints(r, q, singles) for r, q in claims.devices.items()}
        return [cpu, pinned, plugged]


@dataclass
class DeviceGroups:
    """One device resource's devices on a node, grouped by the NUMA zones they are attached to:
    one group per zone for the devices attached to it alone, one per multi-zone set and one for
    devices without topology (``numa == ()``)."""

    numa: list[tuple[int, ...]]
    allocatable: list[int]
    free: list[int]
    reusable: list[int]
    """Devices of this pod's regular init containers that its later containers reuse first."""
    aligned: bool
    """Some device has topology: a zone reports the resource, or a group of several zones has
    it (the device manager then aligns the resource at all)."""
    scattered: set[int] = field(default_factory=set)
    """Zones the devices a regular init container of this pod got beyond its aligned ones may
    be on: the device manager picks those at random."""

    @classmethod
    def of(cls, node: NodeTopology, resource: str) -> "DeviceGroups":
        shared = node.device_groups.get(resource, ())
        numa: list[tuple[int, ...]] = []
        allocatable: list[int] = []
        free: list[int] = []
        for zone in node.zones:  # the zone's own figures count its shared devices too
            others = [g for g in shared if zone.numa in g.numa]
            numa.append((zone.numa,))
            allocatable.append(max(0, int(zone.allocatable.get(resource, 0)) - sum(g.allocatable for g in others)))
            free.append(max(0, int(zone.available.get(resource, 0)) - sum(g.available for g in others)))
        for g in shared:
            numa.append(g.numa)
            allocatable.append(g.allocatable)
            free.append(g.available)
        aligned = resource in node.reported or any(g.numa for g in shared)
        return cls(numa, allocatable, free, [0] * len(numa), aligned)

    def take_reusable(self, wanted: int) -> list[int]:
        taken = [0] * len(self.numa)
        for i, k in enumerate(self.reusable):
            use = min(k, wanted - sum(taken))
            taken[i] += use
            self.reusable[i] -= use
        return taken

    def take(self, order: Sequence[int], wanted: int, taken: list[int]) -> int:
        """Take up to ``wanted`` free devices from the groups in ``order``; returns how many are missing."""
        for i in order:
            use = min(self.free[i], wanted)
            self.free[i] -= use
            taken[i] += use
            wanted -= use
        return wanted


@functools.cache
def _id_masks(ids: tuple[int, ...], masks: Masks) -> tuple[int, ...]:
    """Each mask of ``masks`` (over zone positions) as a mask over the NUMA ids."""
    return tuple(mask(*(ids[p] for p in m)) for m in masks.positions)


def _best(found: Sequence[Hint]) -> Hint:
    """The Memory Manager's pick among its own hints: preferred first, then the narrowest."""
    best = found[0]
    for h in found[1:]:
        assert h.affinity is not None
        assert best.affinity is not None
        if (h.preferred and not best.preferred) or (
            h.preferred == best.preferred and narrower(h.affinity, best.affinity)
        ):
            best = h
    return best
