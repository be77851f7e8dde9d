"""The capacity count over the cluster's objects, and its table and JSON. Pure.

The JSON carries per shape the total, the nodes that take some (per NUMA zone), those whose
capacity is unknown and those that take none counted by reason, and per node its zones' free
figures (what ``--plot`` draws).
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from toposched.apis.constants import NRT_ZONE_PREFIX
from toposched.schedhook.extender.store import attributes_of
from toposched.schedhook.placement.capacity import NodeFit, ShapeCapacity, capacity, never_fits
from toposched.schedhook.placement.occupancy import Occupancy, bound_pods, occupancy
from toposched.schedhook.placement.shapes import Shape, unknown_resources
from toposched.schedhook.placement.snapshot import Snapshot, object_name, snapshot

NO_ZONE = "-"
"""The failure-domain zone of a node without a ``topology.kubernetes.io/zone`` label."""


class CapacityInputError(ValueError):
    """Input the count cannot use (the message is the whole line)."""


@dataclass
class Objects:
    nodes: list[dict[str, Any]]
    nrts: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    source: dict[str, Path | None]
    """Kind -> the file it came from (None: the live cluster)."""


@dataclass
class Result:
    shapes: list[ShapeCapacity]
    snapshot: Snapshot
    occupancy: Occupancy
    nodes: list[str]
    warnings: list[str] = field(default_factory=list)

    def zone_of(self, node: str) -> str:
        location = self.snapshot.locations.get(node)
        return (location.zone if location is not None else None) or NO_ZONE


def count(objects: Objects, shapes: Sequence[Shape], stale_after: float, now: float) -> Result:
    """Each shape's capacity over these objects. CapacityInputError for a shape no node could ever take."""
    snap = snapshot(nodes=objects.nodes, nrts=objects.nrts, pods=())
    attributes = {name: attributes_of(body) for body in objects.nrts if (name := object_name(body))}
    found = occupancy(objects.nodes, attributes, bound_pods(objects.pods), now, stale_after)
    named = [name for n in objects.nodes if (name := object_name(n)) is not None]
    nodes = named or sorted({*snap.nrts, *snap.invalid})
    warnings = [f"{objects.source.get(kind) or 'cluster'}: skipped {kind} {message}" for kind, message in snap.skipped]
    if not nodes:
        raise CapacityInputError("no node to count on: no Node or NodeResourceTopology found")
    check(shapes, snap, found, nodes)
    return Result(capacity(snap, shapes, found, nodes), snap, found, nodes, warnings)


def check(shapes: Sequence[Shape], snap: Snapshot, found: Occupancy, nodes: Sequence[str]) -> None:
    """Refuse a shape asking for a resource no node has, or one no node could take even empty."""
    known = {r for room in found.room.values() for r in room}
    known |= {r for nrt in snap.nrts.values() for z in nrt.zones for r in z.allocatable}
    known |= {r for nrt in snap.nrts.values() for r in nrt.device_groups}
    for shape in shapes:
        missing = unknown_resources(shape, known)
        if missing:
            raise CapacityInputError(f"shape {shape.name}: no node has {', '.join(missing)} (unknown resource)")
        why = ""
        for n in nodes:
            why = never_fits(snap.nrts.get(n), shape.pod, found.allocatable.get(n))
            if not why:
                break
            why = f"{n}: {why}"
        if why:
            raise CapacityInputError(f"shape {shape.name}: no node could take it, even empty ({why})")


def to_dict(result: Result) -> dict[str, Any]:
    return {
        "shapes": [_shape_dict(result, c) for c in result.shapes],
        "nodes": [_node_dict(result, name) for name in result.nodes],
    }


def _shape_dict(result: Result, c: ShapeCapacity) -> dict[str, Any]:
    by_zone: dict[str, int] = {}
    for f in c.nodes:
        if f.fits:
            by_zone[result.zone_of(f.node)] = by_zone.get(result.zone_of(f.node), 0) + f.fits
    return {
        "name": c.shape.name,
        "requests": {r: _text(q) for r, q in sorted(c.shape.requests.items())},
        "fits": c.total,
        "nodesFitting": sum(1 for f in c.nodes if f.fits),
        "nodesUnknown": len(c.unknown),
        "byZoneLabel": dict(sorted(by_zone.items())),
        "noneByReason": c.none_by_reason(),
        "nodes": [_fit_dict(f) for f in c.nodes],
    }


def _fit_dict(f: NodeFit) -> dict[str, Any]:
    return {
        "node": f.node,
        "fits": f.fits,
        "numaZones": {f"{NRT_ZONE_PREFIX}{n}": k for n, k in sorted(f.zones.items())},
        "limitedBy": f.limit,
        "reason": f.reason,
    }


def _node_dict(result: Result, name: str) -> dict[str, Any]:
    nrt = result.snapshot.nrts.get(name)
    zones = [] if nrt is None else nrt.zones
    blind = result.snapshot.invalid.get(name) or result.occupancy.blind.get(name)
    return {
        "node": name,
        "zone": result.zone_of(name),
        "blind": blind or None,
        "numaZones": [
            {"name": f"{NRT_ZONE_PREFIX}{z.numa}", "available": {r: _text(q) for r, q in sorted(z.available.items())}}
            for z in zones
        ],
    }


def _text(q: Decimal) -> str:
    return str(int(q)) if q == q.to_integral_value() else str(q.normalize())


def render(result: Result, output: str) -> str:
    if output == "json":
        return json.dumps(to_dict(result), indent=2)
    return "\n".join(table(result))


def table(result: Result) -> list[str]:
    """A summary row per shape, then per shape the nodes that take some (most first), the unknown
    ones, and the others counted by reason."""
    lines = _columns([("SHAPE", "FITS", "NODES", "UNKNOWN", "NONE")] + [
        (c.shape.name, str(c.total), str(sum(1 for f in c.nodes if f.fits)), str(len(c.unknown)),
         str(sum(1 for f in c.nodes if f.fits == 0)))
        for c in result.shapes
    ])  # fmt: skip
    for c in result.shapes:
        lines += ["", f"{c.shape.name}: nodes that take some"]
        fitting = sorted((f for f in c.nodes if f.fits), key=lambda f: (-(f.fits or 0), f.node))
        rows = [("NODE", "FITS", "NUMA ZONES", "THEN")]
        rows += [(f.node, str(f.fits), _zones(f), f.reason) for f in fitting]
        lines += _columns(rows) if fitting else ["  (none)"]
        if c.unknown:
            lines += ["", f"{c.shape.name}: nodes whose capacity is unknown"]
            lines += [f"  {f.node}  {f.reason}" for f in c.unknown]
        reasons = c.none_by_reason()
        if reasons:
            lines += ["", f"{c.shape.name}: nodes that take none, by reason"]
            lines += [f"  {k:>5}  {reason}" for reason, k in reasons.items()]
    return lines


def _zones(f: NodeFit) -> str:
    return ",".join(f"{NRT_ZONE_PREFIX}{n}={k}" for n, k in sorted(f.zones.items())) or "-"


def _columns(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([*(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])), row[-1]]).rstrip() for row in rows]
