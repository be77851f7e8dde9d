"""The copies of a pod shape a node's kubelet admits, counted zone by zone in closed form. Pure.

The capacity count admits copies one after another through the full prediction; in the commonest
case that walk has a closed form. Under single-numa-node a pod of one container is aligned to one
zone -- the lowest zone every hinting manager prefers -- and once admitted, each manager takes
exactly its claims from that zone alone: the static CPU manager its CPUs, the Static Memory
Manager its memory and hugepages, the device manager devices attached to that zone only. A copy
then leaves the other zones as they were, so zone after zone, from the lowest, takes as many
copies as its own free amounts hold, until the first copy no zone holds is rejected.

What the closed form does not cover is left to the full walk (``ZoneCounter.count`` answers None): other
policies, several containers, CPU options that take whole cores or look past the aligned zone
(``full-pcpus-only``, ``align-by-socket``, ``distribute-cpus-across-numa``, uncore caches),
sockets holding several zones, devices shared between zones or without topology, fractional
memory requests. The per-zone rule is each manager's single-zone hint (``kubelet.hints``)
repeated as the zone's free amounts go down by one copy's claims; tests hold it to the full walk.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from toposched.apis.kubelet import (
    ALIGN_BY_SOCKET,
    ALIGN_BY_UNCORE_CACHE,
    DISTRIBUTE_ACROSS_NUMA,
    FULL_PCPUS_ONLY,
    POD_SCOPE,
    SINGLE_NUMA_NODE,
    STATIC_CPU,
    STATIC_MEMORY,
)
from toposched.schedhook.placement.kubelet.claims import CPU, Claims, container_claims, pod_claims
from toposched.schedhook.placement.kubelet.facts import NodeFacts, facts_of, may_pin_alone
from toposched.schedhook.placement.kubelet.hints import Bools, Ints, milli_request
from toposched.schedhook.placement.kubelet.reasons import cannot_align, first_shortfall, subject
from toposched.schedhook.placement.model import POD, NodeTopology, Pod

WIDENING = frozenset({FULL_PCPUS_ONLY, ALIGN_BY_SOCKET, DISTRIBUTE_ACROSS_NUMA, ALIGN_BY_UNCORE_CACHE})
"""CPU options under which an allocation is not simply a zone's count of CPUs going down."""


@dataclass(frozen=True)
class ZoneCopies:
    per_zone: tuple[tuple[int, int], ...]
    """(NUMA id, copies admitted there), by NUMA id: the order the copies fill the zones in."""

    @property
    def total(self) -> int:
        return sum(k for _, k in self.per_zone)

    def first(self, n: int) -> dict[int, int]:
        """NUMA id -> copies among the first ``n``, for the zones that get any."""
        out: dict[int, int] = {}
        for numa, k in self.per_zone:
            if n <= 0:
                break
            if k:
                out[numa] = min(k, n)
                n -= k
        return out


class ZoneCounter:
    """One pod shape's copies counted zone by zone, node after node."""

    def __init__(self, pod: Pod) -> None:
        self.pod = pod
        self.applies = len(pod.containers) == 1 and not pod.init_containers and pod.resources is None
        self._claims: dict[bool, Claims] = {}

    def count(self, node: NodeTopology) -> ZoneCopies | None:
        """The kubelet's copies on ``node`` zone by zone; None where the closed form does not hold
        or no manager aligns the pod (every copy is then admitted as the first is)."""
        if not (self.applies and _covered(node)):
            return None
        limits = _limits(node, facts_of(node), self.claims(node.scope == POD_SCOPE))
        if not limits:
            return None
        return ZoneCopies(tuple((n, min(each[i] for each in limits)) for i, n in enumerate(facts_of(node).ids)))

    def claims(self, scoped: bool) -> Claims:
        found = self._claims.get(scoped)
        if found is None:
            pod = self.pod
            found = self._claims[scoped] = pod_claims(pod) if scoped else container_claims(pod, pod.containers[0])
        return found

    def reasons(self, nodes: Sequence[NodeTopology]) -> list[str]:
        """Why each node's kubelet rejects the copy after the last counted (``admission.misaligned``
        on the node, for all of them at once): single-numa-node finds no zone for it."""
        pod, rows = self.pod, len(nodes)
        requests = [(r, q) for c in (*pod.init_containers, *pod.containers) for r, q in c.request.items()]
        widest = max((len(n.zones) for n in nodes), default=0)

        def available(resource: str) -> tuple[Ints, Bools]:
            values = np.full((widest, rows), NOTHING, dtype=np.int64)
            for i, node in enumerate(nodes):
                values[: len(node.zones), i] = facts_of(node).vector("available", resource)
            reported = [any(resource in z.available for z in n.zones) for n in nodes]
            return values, np.array(reported, dtype=np.bool_)

        detail, details = first_shortfall(requests, available, rows, np.arange(rows))
        who = subject(pod, pod.containers[0])
        return [
            cannot_align(POD if n.scope == POD_SCOPE else who, SINGLE_NUMA_NODE, details[d] if d >= 0 else "")
            for n, d in zip(nodes, detail.tolist(), strict=True)
        ]


NOTHING = np.iinfo(np.int64).min
"""A zone a node does not have: below any amount, so never a node's best."""


def _covered(node: NodeTopology) -> bool:
    return (
        node.policy == SINGLE_NUMA_NODE
        and node.knows_managers
        and not WIDENING & node.cpu_options
        and not facts_of(node).sockets_first
    )


def _limits(node: NodeTopology, facts: NodeFacts, claims: Claims) -> list[list[int]] | None:
    """Per manager that aligns the pod, the copies each zone (by position) holds for it; None
    when a manager's allocation is beyond the closed form."""
    limits = []
    if node.cpu_manager == STATIC_CPU and claims.cpus:
        limits.append(_cpus(facts, claims.cpus))
    if node.memory_manager == STATIC_MEMORY and claims.memory:
        if any(q != q.to_integral_value() for q in claims.memory.values()):
            return None
        limits.append(_memory(facts, claims.memory))
    for resource, amount in claims.devices.items():
        known = facts.devices(resource)
        if not known.listed:
            continue  # host-level: kube-scheduler's fit alone counts it
        if not known.aligned or node.device_groups.get(resource):
            return None  # devices on several zones or none: a copy takes from more than one zone
        wanted = int(amount)
        held, free = [h for h, _ in known.reach], [f for _, f in known.reach]
        limits.append(_hinted([k // wanted for k in free], [h >= wanted for h in held], len(known.bearing or held)))
    return limits


def _hinted(copies: Sequence[int], could: Sequence[bool], known: int) -> list[int]:
    """A manager's single-zone hint is preferred only where some zone could hold the request at
    all, or the manager knows one zone (``hints.preferred``): otherwise no zone takes a copy."""
    return list(copies) if any(could) or known == 1 else [0] * len(copies)


def _cpus(facts: NodeFacts, cpus: int) -> list[int]:
    """Each allocation takes ``cpus`` of the zone's free ones, which the pool keeps as a whole
    number from the first allocation on (in thousandths: the free ones, rounded down)."""
    free = facts.vector("available", CPU).tolist()
    could = [c >= 1000 * cpus for c in facts.vector("capacity", CPU).tolist()]
    return _hinted([max(0, k) // (1000 * cpus) for k in free], could, len(facts.cpu_ids))


def _memory(facts: NodeFacts, request: Mapping[str, Decimal]) -> list[int]:
    """Each allocation pins the request (whole bytes: exact in thousandths) to the zone; a zone in
    a multi-zone group takes none."""
    copies = [MANY] * len(facts.ids)
    could = [True] * len(facts.ids)
    for resource, q in request.items():
        wanted = milli_request(q)
        allocatable, free = facts.vector("allocatable", resource).tolist(), facts.vector("available", resource).tolist()
        could = [c and a >= wanted for c, a in zip(could, allocatable, strict=True)]
        copies = [min(k, max(0, f) // wanted) for k, f in zip(copies, free, strict=True)]
    pinnable = [ok and may_pin_alone(n, facts.groups) for n, ok in zip(facts.ids, could, strict=True)]
    copies = [k if ok else 0 for ok, k in zip(pinnable, copies, strict=True)]
    return _hinted(copies, could, len(facts.ids))


MANY = 1 << 62
