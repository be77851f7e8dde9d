"""How many more pods of a shape each node can take, on which NUMA zones, and why no more. Pure.

Copies of the shape are admitted one after another through the kubelet's own prediction
(``kubelet.admission.predict`` over one ``NodeState``), each keeping the CPUs, pinned memory and
devices it was given, until the kubelet would reject the next one or kube-scheduler's fit (the
node's allocatable less its pods' requests) has no room for it. A node whose NUMA knowledge is
missing, stale or unreadable has an unknown capacity: it is never counted as free.

Nodes with the same NRT view and the same room get the same answer: each distinct one is counted
once per shape (a large cluster has few distinct machines in few distinct states). Where the
kubelet's walk has a closed form (``zonecopies``: single-numa-node, one container) each node is
counted zone by zone instead, and the reasons of those the kubelet ends are said all at once.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal

from toposched.schedhook.placement.kubelet.admission import predict
from toposched.schedhook.placement.kubelet.claims import effective, holds_exclusive
from toposched.schedhook.placement.kubelet.state import NodeState
from toposched.schedhook.placement.model import NodeTopology, Pod
from toposched.schedhook.placement.occupancy import PODS, Occupancy
from toposched.schedhook.placement.shapes import Shape
from toposched.schedhook.placement.snapshot import Snapshot
from toposched.schedhook.placement.zonecopies import ZoneCounter

MAX_COPIES = 1024
"""Copies counted on one node at most (no node holds more pods than this)."""
KUBELET, SCHEDULER, UNKNOWN, CORDONED = "kubelet", "kube-scheduler", "unknown", "cordoned"
"""What stops the count on a node: the kubelet's admission, kube-scheduler's fit, no trusted
NUMA knowledge, or the node taking no new pods."""


@dataclass(frozen=True)
class NodeFit:
    node: str
    fits: int | None
    """Copies the node takes; None: unknown (its NUMA knowledge is missing, stale or unreadable)."""
    zones: Mapping[int, int] = field(default_factory=dict)
    """NUMA id -> copies using that zone (a copy spread over two zones counts in both)."""
    reason: str = ""
    """Why one more would not fit (or why the capacity is unknown)."""
    limit: str = KUBELET


@dataclass(frozen=True)
class ShapeCapacity:
    shape: Shape
    nodes: tuple[NodeFit, ...]

    @property
    def total(self) -> int:
        return sum(f.fits for f in self.nodes if f.fits)

    @property
    def unknown(self) -> tuple[NodeFit, ...]:
        return tuple(f for f in self.nodes if f.fits is None)

    def none_by_reason(self) -> dict[str, int]:
        """Nodes that take no copy, counted by why, the commonest first."""
        counts = Counter(f.reason for f in self.nodes if f.fits == 0)
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def capacity(
    snapshot: Snapshot, shapes: Sequence[Shape], occupancy: Occupancy, candidates: Sequence[str]
) -> list[ShapeCapacity]:
    """Each shape's copies on each candidate node (by itself: the shapes do not share the room)."""
    counts = [Counting(shape.pod) for shape in shapes]
    fits: list[list[NodeFit]] = [[] for _ in shapes]
    for name in candidates:
        nrt, room = snapshot.nrts.get(name), occupancy.room.get(name)
        known = _unknown(name, snapshot, occupancy)
        strict = room is not None
        if known is None and room is None:  # no Node object: the NRT's zones are all that is known
            if nrt is None:
                known = NodeFit(name, None, reason=f"nothing known of {name}: no NRT, no allocatable", limit=UNKNOWN)
            else:
                room = zone_sums(nrt)
        for count, found in zip(counts, fits, strict=True):
            found.append(known or count.fit(name, nrt, room or {}, strict))
    return [ShapeCapacity(s, c.explained(f)) for s, c, f in zip(shapes, counts, fits, strict=True)]


def _unknown(name: str, snapshot: Snapshot, occupancy: Occupancy) -> NodeFit | None:
    """The node's fit when nothing need be counted: unknown, or cordoned."""
    why = snapshot.invalid.get(name) or occupancy.blind.get(name) or snapshot.blind.get(name)
    if why:
        return NodeFit(name, None, reason=why, limit=UNKNOWN)
    if name in occupancy.cordoned:
        return NodeFit(name, 0, reason="node is cordoned (spec.unschedulable)", limit=CORDONED)
    return None


def copies(
    nrt: NodeTopology | None, pod: Pod, room: Mapping[str, Decimal], strict: bool = True, closed_form: bool = True
) -> NodeFit:
    """The copies of ``pod`` a node takes: kube-scheduler's fit bounds them, and the kubelet admits
    them one after another (``nrt`` None: the node publishes no NUMA zones, its fit alone counts).
    ``strict``: a resource ``room`` does not list is one the node does not have; ``closed_form``:
    count zone by zone where that holds (else always copy by copy)."""
    count = Counting(pod, closed_form)
    return count.explained([count.fit("", nrt, room, strict)])[0]


class Counting:
    """One shape's copies on node after node: zone by zone where the closed form holds, else copy
    by copy, once per distinct NRT view."""

    def __init__(self, pod: Pod, closed_form: bool = True) -> None:
        self.pod = pod
        self.wanted = {r: q for r, q in effective(pod).items() if q > 0}
        self.zones = ZoneCounter(pod) if closed_form else None
        self.runs: dict[str, Admitted] = {}
        self.alike: dict[tuple[str | None, str | None], bool] = {}
        """Per pair of CPU and Memory Manager policies: do the copies take nothing from the zones?"""
        self.unexplained: dict[str, NodeTopology] = {}
        """Nodes whose fits the kubelet ends, their reasons yet to be said (all at once)."""

    def fit(self, name: str, nrt: NodeTopology | None, room: Mapping[str, Decimal], strict: bool) -> NodeFit:
        """The node's fit given kube-scheduler's ``room`` on it."""
        limit, why = _room_for(self.wanted, room, strict)
        if nrt is None or not nrt.zones:
            return NodeFit(name, limit, {}, why, SCHEDULER)
        closed = None if self.zones is None or self._alike(nrt) else self.zones.count(nrt)
        if closed is None:
            key = repr(replace(nrt, name=""))
            run = self.runs.get(key)
            if run is None:
                run = self.runs[key] = Admitted(nrt, self.pod)
            return run.fit(name, limit, why)
        if closed.total >= limit:
            return NodeFit(name, limit, closed.first(limit), why, SCHEDULER)
        self.unexplained[name] = nrt
        return NodeFit(name, closed.total, closed.first(limit), "", KUBELET)

    def _alike(self, nrt: NodeTopology) -> bool:
        managers = (nrt.cpu_manager, nrt.memory_manager)
        found = self.alike.get(managers)
        if found is None:
            found = self.alike[managers] = _alike(nrt, self.pod)
        return found

    def explained(self, fits: Sequence[NodeFit]) -> tuple[NodeFit, ...]:
        """The fits with why the kubelet stops where it does (``ZoneCounter.reasons``)."""
        if not self.unexplained or self.zones is None:
            return tuple(fits)
        reasons = dict(zip(self.unexplained, self.zones.reasons(list(self.unexplained.values())), strict=True))
        self.unexplained = {}
        said = (NodeFit(f.node, f.fits, f.zones, reasons[f.node], f.limit) if f.node in reasons else f for f in fits)
        return tuple(said)


def _alike(nrt: NodeTopology, pod: Pod) -> bool:
    """The copies take nothing from the zones: each is admitted as the first is, on its zones."""
    return nrt.knows_managers and not holds_exclusive(pod, nrt.cpu_manager, nrt.memory_manager)


class Admitted:
    """The copies of a pod one NRT view's kubelet admits, one after another, as far as counted
    yet: nodes with the same view share them, each up to its own room."""

    def __init__(self, nrt: NodeTopology, pod: Pod) -> None:
        self.nrt, self.pod = nrt, pod
        self.state = NodeState(nrt)
        self.zones: list[Counter[int]] = [Counter()]
        """After each copy, the copies per NUMA zone so far."""
        self.stop = ""
        """Why the kubelet rejects the next copy ("": not yet known)."""
        self.alike = _alike(nrt, pod)

    def fit(self, node: str, limit: int, why: str) -> NodeFit:
        """The node's fit when kube-scheduler's fit leaves room for ``limit`` copies (for ``why``)."""
        while not self.stop and len(self.zones) <= (min(limit, 1) if self.alike else limit):
            verdict = predict(self.nrt, self.pod, self.state)
            if not verdict.admit:
                self.stop = verdict.reason
                break
            self.zones.append(self.zones[-1] + Counter({n for ids in verdict.numa.values() for n in ids}))
            self.state.next_pod()
        if self.alike and len(self.zones) > 1:
            return NodeFit(node, limit, dict.fromkeys(self.zones[1], limit), why, SCHEDULER)
        admitted = len(self.zones) - 1
        if admitted < limit:
            return NodeFit(node, admitted, dict(self.zones[admitted]), self.stop, KUBELET)
        return NodeFit(node, limit, dict(self.zones[limit]), why, SCHEDULER)


def room_for(pod: Pod, room: Mapping[str, Decimal], strict: bool = True) -> tuple[int, str]:
    """How many copies kube-scheduler's fit leaves room for, and what runs out first (its words)."""
    return _room_for({r: q for r, q in effective(pod).items() if q > 0}, room, strict)


def _room_for(wanted: Mapping[str, Decimal], room: Mapping[str, Decimal], strict: bool) -> tuple[int, str]:
    best, why = MAX_COPIES, f"more than {MAX_COPIES} copies"
    for resource, amount in sorted({**wanted, PODS: Decimal(1)}.items()):
        have = room.get(resource)
        if have is None:
            if not strict:
                continue
            have = Decimal(0)
        n = max(0, int(have // amount))
        if n < best:
            best, why = n, f"Insufficient {resource}"
    return best, why


def zone_sums(nrt: NodeTopology) -> dict[str, Decimal]:
    """Per resource, the zones' available amounts together (what a node without its Node object shows)."""
    total: dict[str, Decimal] = {}
    for z in nrt.zones:
        for resource, amount in z.available.items():
            total[resource] = total.get(resource, Decimal(0)) + amount
    return total


def never_fits(nrt: NodeTopology | None, pod: Pod, allocatable: Mapping[str, Decimal] | None) -> str:
    """Why the node would not take one copy even empty (its zones' and its own allocatable all
    free); "" when it would."""
    if allocatable is not None:
        limit, why = room_for(pod, allocatable)
        if limit == 0:
            return why
    if nrt is None or not nrt.zones:
        return ""
    verdict = predict(emptied(nrt), pod)
    return "" if verdict.admit else verdict.reason


def emptied(nrt: NodeTopology) -> NodeTopology:
    """The node with no pod on it: every zone's allocatable free, its cores whole, no memory pinned."""
    threads = nrt.threads_per_core or 1
    zones = tuple(
        replace(
            z,
            available=dict(z.allocatable),
            free_cores=None if z.free_cores is None else int(z.allocatable.get("cpu", Decimal(0))) // threads,
            memory_cells=None,
        )
        for z in nrt.zones
    )
    groups = {r: tuple(replace(g, available=g.allocatable) for g in gs) for r, gs in nrt.device_groups.items()}
    return replace(nrt, zones=zones, device_groups=groups, memory_groups=())
