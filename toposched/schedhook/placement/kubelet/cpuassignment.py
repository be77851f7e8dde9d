"""The static CPU manager's packed allocator (the kubelet's takeByTopology) over this pod's view of a node. Pure.

Whole free zones and whole free sockets first -- sockets first with fewer sockets than NUMA nodes
(sub-NUMA clustering), zones first otherwise -- then, under prefer-align-cpus-by-uncorecache,
uncore caches, then whole cores while a core's worth is needed, then single CPUs, from the
fullest zones first. Only counts per zone are followed (which CPUs of a zone, the NRT does not
say), with the whole cores each zone has free.
"""

from collections.abc import Sequence
from decimal import Decimal

from toposched.apis.kubelet import ALIGN_BY_UNCORE_CACHE
from toposched.schedhook.placement.kubelet.allocation import ZonePool
from toposched.schedhook.placement.kubelet.claims import CPU


class CpuAssignment:
    """The CPUs this pod's containers may still take, per zone: the free ones, with the whole
    cores among them, and those its regular init containers hold for its app containers to reuse."""

    def __init__(self, pool: ZonePool) -> None:
        self.pool = pool
        self.facts = pool.facts
        self.free_cores = dict(pool.facts.free_cores)
        self.reusable: dict[int, int] = {}
        """zone -> CPUs of this pod's regular init containers, for its app containers to reuse."""

    def pack(self, zones: Sequence[int], left: int, used: dict[int, int]) -> int:
        """The packed allocator over ``zones`` (one takeByTopology call): at most as many CPUs as
        the zones hold; returns how many of ``left`` are still needed. Whole free zones and whole
        free sockets first -- sockets first with fewer sockets than NUMA nodes (sub-NUMA
        clustering), zones first otherwise -- then whole cores, then single CPUs."""
        facts, threads = self.facts, self.facts.threads
        need = min(left, sum(self.cpus_of(n) for n in zones))
        rest = left - need
        levels = [self._take_free_zones]
        whole_sockets = bool(facts.socket) and len(facts.socket) == len(facts.cpu_ids)
        if whole_sockets:
            levels.insert(0 if facts.sockets_first else 1, self._take_free_sockets)
        for level in levels:
            need = level(zones, need, used)
        if need and ALIGN_BY_UNCORE_CACHE in facts.node.cpu_options and len(facts.socket) == len(facts.cpu_ids):
            need = self._take_uncore_caches(zones, need, used)
        # The pod's reusable CPUs (its init containers') are in the pool like free ones.
        if threads:
            for n in self._packing_order(zones):
                whole = self.free_cores[n] + self.reusable.get(n, 0) // threads
                cores = min(need // threads, whole)
                if cores > 0:
                    self._take(n, cores * threads, whole=True)
                    used[n] = used.get(n, 0) + cores * threads
                    need -= cores * threads
        for n in self._packing_order(zones):
            take = min(need, self.cpus_of(n))
            if take:
                self._take(n, take, whole=False)
                used[n] = used.get(n, 0) + take
                need -= take
        return rest + need

    def _take_free_zones(self, zones: Sequence[int], need: int, used: dict[int, int]) -> int:
        """takeFullNUMANodes: each zone whose CPUs are all free, while at least its size is needed."""
        for n in self._packing_order(zones):
            size = self.facts.cpu_capacity.get(n, 0)
            if size and self.cpus_of(n) == size and need >= size:
                self._take(n, size, whole=True)
                used[n] = used.get(n, 0) + size
                need -= size
        return need

    def _take_free_sockets(self, zones: Sequence[int], need: int, used: dict[int, int]) -> int:
        """takeFullSockets, as the kubelet writes it: a socket counts as free when as many of its
        CPUs are in ``zones`` as the machine has CPUs per socket on average (not its own size), and
        taking it takes every CPU of the socket -- on uneven sockets, also CPUs of other zones and
        used ones (an oracle finding: seed 23, case 115)."""
        socket = self.facts.socket
        if self.facts.sockets_first:
            order = sorted({socket[n] for n in zones if n in socket and self.cpus_of(n)},
                           key=lambda s: (self._socket_cpus(s, zones), s))  # fmt: skip
        else:  # one socket per zone: the zones' order
            order = [socket[n] for n in self._packing_order(zones) if n in socket and self.cpus_of(n)]
        for s in order:
            members = [n for n in self.facts.cpu_ids if socket[n] == s]
            size = sum(self.facts.cpu_capacity[n] for n in members)
            if self._socket_cpus(s, zones) != self.facts.per_socket or need < size:
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
        socket, threads = self.facts.socket, max(1, self.facts.threads)
        capacity = self.facts.cpu_capacity
        order = [socket[n] for n in self._packing_order(zones) if n in socket and self.cpus_of(n)]
        for s in order:
            if need >= self.facts.per_socket:
                for f in dict.fromkeys(order):
                    members = [n for n in self.facts.cpu_ids if socket[n] == f]
                    size = sum(capacity[n] for n in members)
                    if need >= size and all(n in zones and self.cpus_of(n) == capacity[n] for n in members):
                        need -= self._take_whole(members, used)
            if not need:
                return 0
            mine = sorted(n for n in zones if socket.get(n) == s and self.cpus_of(n))
            free = sum(self.cpus_of(n) for n in mine)
            whole = sum(self.free_cores[n] for n in mine) if self.facts.threads else free
            if free < need or whole * threads < need:
                continue  # not claimed: the cache cannot take the whole request
            if self.facts.threads and free > whole * threads:
                # Halves of used cores: whether the lowest-numbered cores the kubelet looks at
                # hold the request depends on where the halves are, which the NRT does not say.
                # Followed as not claimed; the cache's zones stay possible.
                for n in mine:
                    used.setdefault(n, 0)
                continue
            for n in mine:
                k = min(need, self.cpus_of(n))
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
            self._take(n, self.cpus_of(n), whole=True)
            used[n] = used.get(n, 0) + self.facts.cpu_capacity[n]
        return sum(self.facts.cpu_capacity[n] for n in members)

    def _socket_cpus(self, s: int, zones: Sequence[int]) -> int:
        return sum(self.cpus_of(n) for n in zones if self.facts.socket.get(n) == s)

    def _packing_order(self, zones: Sequence[int]) -> list[int]:
        """The zones as the allocator looks at them: fewest CPUs to take first (the fullest), or
        with sockets first, by their socket's fewest, then their own."""
        socket = self.facts.socket
        if not self.facts.sockets_first:
            return sorted(zones, key=lambda n: (self.cpus_of(n), n))
        return sorted(
            zones,
            key=lambda n: (
                (self._socket_cpus(socket[n], zones), socket[n], self.cpus_of(n), n)
                if n in socket
                else (0, -1, self.cpus_of(n), n)
            ),
        )

    def take_packed_in(self, n: int, cpus: int) -> None:
        """``cpus`` of zone ``n`` as the packed allocator takes them within one zone: whole cores
        while a core's worth is needed, then single CPUs."""
        if self.facts.threads:
            whole = min(cpus // self.facts.threads, self.free_cores[n] + self.reusable.get(n, 0) // self.facts.threads)
            if whole:
                self._take(n, whole * self.facts.threads, whole=True)
                cpus -= whole * self.facts.threads
        if cpus:
            self._take(n, cpus, whole=False)

    def _take(self, n: int, cpus: int, whole: bool) -> None:
        """``cpus`` of zone ``n``: the pod's reusable ones first, then free ones (``whole``: as
        whole cores; else halves of used cores before whole ones)."""
        reused = min(cpus, self.reusable.get(n, 0))
        if reused:
            self.reusable[n] -= reused
        rest = cpus - reused
        if not rest:
            return
        have = int(self.pool.amount(n, CPU))
        self.pool.set(n, CPU, Decimal(have - rest))
        if self.facts.threads:
            halves = 0 if whole else max(0, have - self.free_cores[n] * self.facts.threads)
            cores = -(-max(0, rest - halves) // self.facts.threads)
            self.free_cores[n] = max(0, self.free_cores[n] - cores)

    def cpus_of(self, n: int) -> int:
        """The zone's CPUs the allocator may take: free ones and this pod's reusable ones."""
        return max(int(self.pool.amount(n, CPU)), 0) + self.reusable.get(n, 0)
