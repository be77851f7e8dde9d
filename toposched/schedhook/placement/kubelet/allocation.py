"""What the resource managers' allocations share while one pod is admitted: the zones' free amounts
its containers take from, and the error that fails an allocation. Pure."""

from decimal import Decimal

import numpy as np

from toposched.schedhook.placement.kubelet.facts import NodeFacts
from toposched.schedhook.placement.kubelet.hints import Ints, milli
from toposched.schedhook.placement.kubelet.topologymanager import bits


class RejectedError(Exception):
    """A resource manager's allocation would fail: the kubelet's UnexpectedAdmissionError."""


class ZonePool:
    """The free CPUs, memory and hugepages per NUMA zone as this pod's containers leave them:
    what the NRT says is available until a container takes some."""

    def __init__(self, facts: NodeFacts) -> None:
        self.facts = facts
        self.free = {z.numa: dict(z.available) for z in facts.node.zones}
        self._free: dict[str, Ints] = {}
        """resource -> its free [zone] vector in thousandths, once this pod's containers took some."""
        self._taken: set[str] = set()
        """Resources this pod's containers took some of: their free vectors are this pod's own."""

    def vector(self, which: str, resource: str) -> Ints:
        """[zone]: ``which`` (capacity, allocatable or free) of the resource in thousandths, zones by NUMA id."""
        if which != "free":
            return self.facts.vector(which, resource)
        if resource not in self._taken:  # as the NRT says, and the same for every pod evaluated on this node
            return self.facts.vector("available", resource)
        found = self._free.get(resource)
        if found is None:
            values = [milli(self.free[n].get(resource, Decimal(0))) for n in self.facts.ids]
            found = self._free[resource] = np.array(values, dtype=np.int64)
        return found

    def sum(self, resource: str, m: int) -> Decimal:
        """The free amount of ``resource`` on the zones of mask ``m``."""
        return sum((self.free[n].get(resource, Decimal(0)) for n in bits(m) if n in self.free), Decimal(0))

    def set(self, n: int, resource: str, left: Decimal) -> None:
        """Zone ``n`` has ``left`` of ``resource`` free once this pod's container took some."""
        self.free[n][resource] = left
        self._taken.add(resource)
        self._free.pop(resource, None)

    def amount(self, n: int, resource: str) -> Decimal:
        return self.free[n].get(resource, Decimal(0))
