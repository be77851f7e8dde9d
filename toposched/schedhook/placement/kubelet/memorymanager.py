"""The Static Memory Manager for one pod on one node: its topology hints and Allocate. Pure.

Memory and hugepages are pinned to a NUMA mask; a multi-NUMA allocation groups its zones, and
later allocations must respect the groups (``facts.may_pin``).
"""

from collections.abc import Mapping, Sequence
from decimal import Decimal

import numpy as np

from toposched.schedhook.placement.kubelet import hints
from toposched.schedhook.placement.kubelet.allocation import RejectedError, ZonePool
from toposched.schedhook.placement.kubelet.facts import may_pin
from toposched.schedhook.placement.kubelet.hints import milli, milli_request
from toposched.schedhook.placement.kubelet.topologymanager import Hint, bits, count, narrower


class MemoryManager:
    def __init__(self, pool: ZonePool) -> None:
        self.pool = pool
        self.facts = pool.facts
        self.groups = dict(pool.facts.groups)
        """zone -> the multi-NUMA group its pinned memory belongs to, as this pod's containers leave it."""
        self.assigned = set(pool.facts.assigned)
        """Zones holding pinned memory."""
        self.reusable: dict[int, dict[str, Decimal]] = {}
        """mask -> resource -> memory of regular init containers pinned to exactly that mask."""
        self._last: tuple[object, list[Hint]] | None = None
        """The last hints and what they were for (the manager's state unchanged since)."""

    def hints(self, request: Mapping[str, Decimal], singles: bool = False) -> list[Hint]:
        """Masks whose allocatable holds every requested type, free (with this pod's reusable
        memory) too, and that respect the NUMA groups of earlier multi-NUMA allocations
        (``singles``: single zones only)."""
        key = (tuple(request.items()), singles)
        if self._last is not None and self._last[0] == key:  # asked again before any change
            return self._last[1]
        facts = self.facts
        masks = facts.masks(facts.ids, singles)
        types = list(request)
        as_ids = facts.id_masks(masks)
        reusable = None
        if self.reusable:
            reusable = np.array(
                [[milli(self.reusable.get(m, {}).get(r, Decimal(0))) for m in as_ids] for r in types],
                dtype=np.int64,
            ).reshape(len(types), len(as_ids))
        allowed = None
        if self.groups or self.assigned:
            allowed = np.array([self.may_pin(m) for m in as_ids], dtype=np.bool_)
        fits, preferred = hints.memory_hints(
            masks,
            np.stack([self.pool.vector("allocatable", r) for r in types]),
            np.stack([self.pool.vector("free", r) for r in types]),
            np.array([milli_request(q) for q in request.values()], dtype=np.int64),
            known=len(facts.ids),
            reusable=reusable,
            allowed=allowed,
        )
        found = facts.hints(masks, fits, preferred)
        self._last = (key, found)
        return found

    def forget_hints(self) -> None:
        self._last = None

    def may_pin(self, m: int) -> bool:
        return may_pin(m, self.groups, self.assigned)

    def take(self, request: Mapping[str, Decimal], decided: Hint, init: bool) -> int:
        """Pin the container's memory as the Memory Manager's Allocate does; returns the mask.

        Raises RejectedError where the kubelet would fail the allocation (UnexpectedAdmissionError)."""
        m = self._mask(request, decided)
        self.forget_hints()  # what the Memory Manager holds changes now
        reusable = self.reusable.setdefault(m, {})
        for r, q in request.items():
            left = max(Decimal(0), q - reusable.get(r, Decimal(0)))
            for n in bits(m):
                have = self.pool.amount(n, r)
                take = min(have, left)
                if take > 0:
                    self.pool.set(n, r, have - take)
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

    def _mask(self, request: Mapping[str, Decimal], decided: Hint) -> int:
        """The mask Allocate pins to: the decided one, the manager's own best without alignment,
        extended where the decided one's free memory is short."""
        found = self.hints(request)
        chosen = decided
        if decided.affinity is None:  # no alignment asked for: the Memory Manager's own best hint
            if not found:
                raise RejectedError("no NUMA zones with enough memory")
            chosen = _best(found)
            if decided.preferred and not chosen.preferred:
                raise RejectedError("no preferred memory hint")
        assert chosen.affinity is not None
        if any(self.pool.sum(r, chosen.affinity) < q for r, q in request.items()):
            wider = [h for h in found if h.affinity is not None and chosen.affinity & ~h.affinity == 0]
            if not wider:
                raise RejectedError("failed to find NUMA zones to extend the aligned memory")
            extended = _best(wider)
            if chosen.preferred and not extended.preferred:
                raise RejectedError("failed to find a preferred extension of the aligned memory")
            chosen = extended
        m = chosen.affinity
        assert m is not None
        if count(m) > 1 and not self.may_pin(m):
            raise RejectedError("the aligned memory violates earlier NUMA allocations")
        return m


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
