"""The static CPU manager for one pod on one node: its topology hints and its allocations. Pure.

The hints come from ``kubelet.hints`` (the same function the columnar table calls for thousands
of nodes); an allocation goes first within the aligned zones, then elsewhere, packed
(``cpuassignment``) or spread by ``distribute-cpus-across-numa`` (``distribute``).
"""

from collections.abc import Sequence
from decimal import Decimal

import numpy as np

from toposched.apis.kubelet import ALIGN_BY_SOCKET, DISTRIBUTE_ACROSS_NUMA, FULL_PCPUS_ONLY
from toposched.schedhook.placement.kubelet import distribute, hints
from toposched.schedhook.placement.kubelet.allocation import RejectedError, ZonePool
from toposched.schedhook.placement.kubelet.claims import CPU
from toposched.schedhook.placement.kubelet.cpuassignment import CpuAssignment
from toposched.schedhook.placement.kubelet.hints import Ints, Masks, milli_request
from toposched.schedhook.placement.kubelet.topologymanager import Hint, bits, mask


class CpuManager:
    def __init__(self, pool: ZonePool) -> None:
        self.pool = pool
        self.facts = pool.facts
        self.options = pool.facts.node.cpu_options
        self.cpus = CpuAssignment(pool)

    def hints(self, request: int, singles: bool = False) -> list[Hint]:
        facts = self.facts
        masks = facts.masks(facts.cpu_ids, singles)
        reusable = mask(*(n for n, k in self.cpus.reusable.items() if k))
        inside = None
        if reusable:  # the masks must hold the pod's reusable CPUs
            inside = np.array([(reusable & ~m) == 0 for m in facts.id_masks(masks)], dtype=np.bool_)
        sockets, per_socket = self._sockets(masks)
        fits, preferred = hints.cpu_hints(
            masks,
            self.pool.vector("capacity", CPU),
            self.pool.vector("free", CPU),
            milli_request(Decimal(request)),
            known=len(facts.cpu_ids),
            reused=1000 * sum(self.cpus.reusable.values()),
            inside=inside,
            sockets=sockets,
            per_socket=per_socket,
        )
        return facts.hints(masks, fits, preferred)

    def _sockets(self, masks: Masks) -> tuple[Ints | None, int]:
        """align-by-socket: the sockets each mask's CPU zones span, and NUMA nodes per socket as the
        kubelet counts them (its NUMA nodes with CPUs over its sockets, rounded down)."""
        if ALIGN_BY_SOCKET not in self.options:
            return None, 0
        ids, socket = self.facts.ids, self.facts.socket
        spans = np.array(
            [len({socket[ids[p]] for p in m if ids[p] in socket}) for m in masks.positions], dtype=np.int64
        )
        return spans, len(self.facts.cpu_ids) // max(1, len(set(socket.values())))

    def _aligned_zones(self, affinity: int | None) -> list[int]:
        """The zones whose CPUs the allocator takes first: the affinity's, or under align-by-socket
        every zone of the affinity's sockets."""
        ids, socket = self.facts.ids, self.facts.socket
        within = [n for n in ids if affinity is None or n in bits(affinity)]
        if affinity is None or ALIGN_BY_SOCKET not in self.options:
            return within
        sockets = {socket[n] for n in within if n in socket}
        return [n for n in ids if n in within or socket.get(n, -1) in sockets]

    def check_smt_alignment(self, request: int) -> None:
        """full-pcpus-only: a request the kubelet refuses with SMTAlignmentError -- not whole cores,
        or more whole free cores than there are (the siblings of reserved CPUs never count)."""
        if FULL_PCPUS_ONLY not in self.options:
            return
        threads = self.facts.node.threads_per_core or 1
        if request % threads:
            raise RejectedError(f"SMTAlignmentError: {request} CPUs are not whole cores of {threads} threads")
        physical = sum(self.cpus.free_cores.values()) * threads
        if request > physical:
            raise RejectedError(f"SMTAlignmentError: {request} CPUs requested, {physical} on whole free cores")

    def take(self, request: int, affinity: int | None, init: bool) -> tuple[int, ...]:
        """Allocate ``request`` exclusive CPUs as the static policy does, first within the
        affinity, then elsewhere. Packed (the default): whole free zones while at least a zone's
        worth is still needed (smallest first), then whole free cores while at least a core's
        worth is needed, then single CPUs, both from the fullest zones first (and within a zone,
        the halves of used cores before whole ones). With ``distribute-cpus-across-numa``: spread
        as ``distribute.spread`` decides. The pod's init containers' CPUs count as free ones.
        Returns the zones they came from. (With fewer sockets than NUMA nodes, whole sockets and
        sockets' order come first: ``CpuAssignment.pack``.)"""
        cpus, ids = self.cpus, self.facts.ids
        used: dict[int, int] = {}
        left = request
        within = self._aligned_zones(affinity)
        elsewhere = [n for n in ids if n not in within and cpus.cpus_of(n)]
        spreads = DISTRIBUTE_ACROSS_NUMA in self.options
        # The second pass is the kubelet's second call, over every CPU still allocatable: a zone
        # of the affinity keeps free CPUs only when a whole socket was taken in its place.
        for second in (False, True):
            zones = [n for n in ids if n not in within or cpus.cpus_of(n)] if second else within
            counts = self._spread(zones, left) if spreads else None
            if counts is not None:
                for n, k in counts.items():
                    cpus.take_packed_in(n, k)
                    used[n] = used.get(n, 0) + k
                    left -= k
            else:
                left = cpus.pack(zones, left, used)
            if not left:
                break
        if left:  # the CPU Manager's allocation fails: UnexpectedAdmissionError
            raise RejectedError(f"not enough CPUs: {request} requested, {request - left} free")
        if init:  # a regular init container's CPUs wait for the app containers to reuse them
            for n, k in used.items():
                cpus.reusable[n] = cpus.reusable.get(n, 0) + k
        if spreads and set(used) - set(within):
            # The spill follows a balance over the zones' exact CPUs, which a NRT's counts may not
            # match at the margin (its reserved siblings, an exporter a moment behind): any zone
            # outside the mask with free CPUs may get some.
            return tuple(sorted({*used, *elsewhere}))
        return tuple(sorted(used))

    def _spread(self, zones: Sequence[int], left: int) -> dict[int, int] | None:
        """distribute-cpus-across-numa over ``zones`` for as many of ``left`` as they hold."""
        facts = self.facts
        available = {n: self.cpus.cpus_of(n) for n in zones if n in facts.cpu_capacity}
        amount = min(left, sum(available.values()))
        group = (facts.threads or 1) if FULL_PCPUS_ONLY in self.options else 1
        machine = sum(facts.cpu_capacity.values())
        return distribute.spread(available, amount, group, machine, len(facts.cpu_ids))
