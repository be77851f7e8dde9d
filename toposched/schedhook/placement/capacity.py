"""How many more pods of a shape each node can take, on which NUMA zones, and why no more. Pure.

Copies of the shape are admitted one after another through the kubelet's own prediction
(``kubelet.admission.predict`` over one ``NodeState``), each keeping the CPUs, pinned memory and
devices it was given, until the kubelet would reject the next one or kube-scheduler's fit (the
node's allocatable less its pods' requests) has no room for it. A node whose NUMA knowledge is
missing, stale or unreadable has an unknown capacity: it is never counted as free.

Nodes with the same NRT view and the same room get the same answer: each distinct one is counted
once per shape (a large cluster has few distinct machines in few distinct states).
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
    out = []
    for shape in shapes:
        runs: dict[str, Admitted] = {}
        fits = []
        for name in candidates:
            fit = _unknown(name, snapshot, occupancy)
            if fit is None:
                fit = _counted(name, shape.pod, snapshot.nrts.get(name), occupancy.room.get(name), runs)
            fits.append(fit)
        out.append(ShapeCapacity(shape, tuple(fits)))
    return out


def _unknown(name: str, snapshot: Snapshot, occupancy: Occupancy) -> NodeFit | None:
    """The node's fit when nothing need be counted: unknown, or cordoned."""
    why = snapshot.invalid.get(name) or occupancy.blind.get(name) or snapshot.blind.get(name)
    if why:
        return NodeFit(name, None, reason=why, limit=UNKNOWN)
    if name in occupancy.cordoned:
        return NodeFit(name, 0, reason="node is cordoned (spec.unschedulable)", limit=CORDONED)
    return None


def _counted(
    name: str, pod: Pod, nrt: NodeTopology | None, room: Mapping[str, Decimal] | None, runs: dict[str, "Admitted"]
) -> NodeFit:
    strict = room is not None
    if room is None:  # no Node object: the NRT's zones are all that is known
        if nrt is None:
            return NodeFit(name, None, reason=f"nothing known of {name}: no NRT, no allocatable", limit=UNKNOWN)
        room = zone_sums(nrt)
    limit, why = room_for(pod, room, strict)
    if nrt is None or not nrt.zones:
        return NodeFit(name, limit, {}, why, SCHEDULER)
    key = repr(replace(nrt, name=""))
    run = runs.get(key)
    if run is None:
        run = runs[key] = Admitted(nrt, pod)
    return run.fit(name, limit, why)


def copies(nrt: NodeTopology | None, pod: Pod, room: Mapping[str, Decimal], strict: bool = True) -> NodeFit:
    """The copies of ``pod`` a node takes: kube-scheduler's fit bounds them, and the kubelet admits
    them one after another (``nrt`` None: the node publishes no NUMA zones, its fit alone counts).
    ``strict``: a resource ``room`` does not list is one the node does not have."""
    limit, why = room_for(pod, room, strict)
    if nrt is None or not nrt.zones:
        return NodeFit("", limit, {}, why, SCHEDULER)
    return Admitted(nrt, pod).fit("", limit, why)


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
        self.alike = nrt.knows_managers and not holds_exclusive(pod, nrt.cpu_manager, nrt.memory_manager)
        """The copies take nothing from the zones: each is admitted as the first is, on its zones."""

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
    best, why = MAX_COPIES, f"more than {MAX_COPIES} copies"
    wanted = {r: q for r, q in effective(pod).items() if q > 0}
    wanted[PODS] = Decimal(1)
    for resource, amount in sorted(wanted.items()):
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
