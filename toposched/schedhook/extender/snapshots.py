"""The cluster as one placement call sees it, built from the object store and the reservations. Pure.

Parsed objects are patched only where the store says they changed, a node's view minus its
reservations is kept until either changes, and only table rows of nodes whose view changed are
refilled: a filter call's cost follows the changes since the last call, not the size of the cluster.
An object that cannot be parsed is skipped (its node then fails every pod, saying why) and
collected for an Event, once per version.
"""

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from decimal import Decimal
from typing import Any

from toposched.apis.appgroup import AppGroup
from toposched.apis.errors import describe
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.schedhook.extender.ahead import ParsedAhead
from toposched.schedhook.extender.reservations import Reservation
from toposched.schedhook.extender.store import ObjectStore, key_name, store_key
from toposched.schedhook.placement.columnar import NodeTable
from toposched.schedhook.placement.model import NodeTopology, Placed
from toposched.schedhook.placement.parse import from_nrt, links_of, node_allocatable, node_location
from toposched.schedhook.placement.snapshot import Snapshot

logger = logging.getLogger(__name__)
BASE_KINDS = ("nodes", "nrts", "appgroups", "networktopologies")

Held = Callable[[str], tuple[Reservation, ...]]
"""node -> the reservations to take off its NRT."""


class SnapshotBuilder:
    def __init__(self, store: ObjectStore, weights_name: str) -> None:
        self.store = store
        self.weights_name = weights_name
        self._changes = store.changes(BASE_KINDS)
        self._parse_cache: dict[str, dict[str, tuple[Any, Any, str | None]]] = {}
        """kind -> key -> (version, parsed value or None, why it could not be parsed)."""
        self._invalid: dict[str, dict[str, str]] = {}
        """Node name -> kind (Node, NodeResourceTopology) -> why that object of the node was skipped."""
        self.rejected: list[tuple[dict[str, Any], str]] = []
        """Objects found unreadable, not yet reported (``take_rejected``)."""
        self._base: Snapshot | None = None
        self._allocatable: dict[str, dict[str, Decimal]] = {}
        self._appgroup_keys: dict[str, tuple[str, str]] = {}
        self._nrts: dict[str, NodeTopology] = {}
        """Every NRT view, minus the reservations held on its node."""
        self.table = NodeTable()
        self.ahead = ParsedAhead()
        """NRTs validated as the first lists arrive (``feed``), taken by the first parse."""
        self._unfilled: set[str] | None = set()
        """NRT views changed by a ``parse_all`` that no snapshot has taken yet (None: any may have)."""

    def snapshot(self, held: Held, reserved: Iterable[str], stale: Iterable[str], placed: list[Placed]) -> Snapshot:
        """The cluster with ``held`` reservations taken off the NRTs: ``reserved`` are the nodes with
        any, ``stale`` those whose reservations changed since the last call (or this call leaves
        one out). The snapshot shares the builder's dicts: use it before the next call."""
        base, changed = self._base_snapshot()
        everything = changed is None
        if changed is None:
            self._nrts = dict(base.nrts)
            changed = set(reserved)
        changed |= set(stale)
        for name in changed:
            nrt = base.nrts.get(name)
            if nrt is None:
                self._nrts.pop(name, None)
                continue
            on_node = held(name)
            self._nrts[name] = _minus(nrt, on_node) if on_node else nrt
        if everything:
            self.table.sync(self._nrts)
        else:
            self.table.update(self._nrts, changed)
        return Snapshot(
            locations=base.locations,
            nrts=self._nrts,
            appgroups=base.appgroups,
            links=base.links,
            placed=placed,
            invalid=base.invalid,
            table=self.table,
        )

    def parse_all(self) -> None:
        """Parse what changed (at start-up: everything) now; the next ``snapshot`` fills the table."""
        self._unfilled = self._base_snapshot()[1]

    def take_rejected(self) -> list[tuple[dict[str, Any], str]]:
        """Objects found unreadable since the last call, with why (each version once), for Events."""
        rejected, self.rejected = self.rejected, []
        return rejected

    def _base_snapshot(self) -> tuple[Snapshot, set[str] | None]:
        """Parsed nodes, NRTs, AppGroups and NetworkTopologies, patched where they changed; and
        the names of the NRTs whose view changed since the last call (None: any may have)."""
        dirty = self._changes.take()
        try:
            snap, changed = self._patch_base(dirty)
        except BaseException:  # half patched: start afresh next time rather than lose the rest
            self._base = None
            for kind in BASE_KINDS:
                self._changes.mark(kind, None)
            raise
        unfilled, self._unfilled = self._unfilled, set()
        return snap, None if changed is None or unfilled is None else unfilled | changed

    def _patch_base(self, dirty: dict[str, set[str] | None]) -> tuple[Snapshot, set[str] | None]:
        snap = self._base
        if snap is None or dirty["nodes"] is None or dirty["nrts"] is None:
            snap = self._base = Snapshot()
            self._allocatable, self._appgroup_keys, self._invalid = {}, {}, {}
            dirty = dict.fromkeys(BASE_KINDS)
        for kind, keys in dirty.items():
            if keys is None:  # listed afresh: forget the parses of objects deleted while no watch ran
                parsed = self._parse_cache.get(kind, {})
                for gone in [key for key in parsed if key not in self.store.objects[kind]]:
                    del parsed[gone]
        nrts = self._patch_nodes(snap, dirty["nodes"], dirty["nrts"])
        changed = self._patch_nrts(snap, nrts)
        self._patch_appgroups(snap, dirty["appgroups"])
        if dirty["networktopologies"] is None or dirty["networktopologies"]:
            snap.links = {}
            for key, body in self.store.objects["networktopologies"].items():
                snap.links.update(self._parsed("networktopologies", key, body, self._links) or {})
        return snap, changed

    def _patch_nodes(self, snap: Snapshot, keys: set[str] | None, nrts: set[str] | None) -> set[str] | None:
        """Locations and allocatable of the nodes ``keys`` (None: all); returns the NRTs to parse
        again, theirs included (an NRT's view holds its node's allocatable)."""
        objects = self.store.objects["nodes"]
        nrts = None if nrts is None else set(nrts)
        for key in objects if keys is None else keys:
            name = key_name(key)
            body = objects.get(key)
            if body is None:
                snap.locations.pop(name, None)
                self._allocatable.pop(name, None)
                self._forget("nodes", key)
            else:
                snap.locations[name] = node_location(body)
                self._allocatable[name] = self._parsed("nodes", key, body, node_allocatable) or {}
            self._mark(snap, "Node", name, None if body is None else self._error("nodes", key))
            if nrts is not None:
                nrts.add(store_key("", name))
        return nrts

    def _patch_nrts(self, snap: Snapshot, keys: set[str] | None) -> set[str] | None:
        """The views of the NRTs ``keys`` (None: all); returns the names of the nodes whose view
        changed (None: any may have)."""
        objects = self.store.objects["nrts"]
        for key in objects if keys is None else keys:
            name = key_name(key)
            body = objects.get(key)
            if body is None:
                snap.nrts.pop(name, None)
                self._forget("nrts", key)
            else:
                allocatable = self._allocatable.get(name, {})
                extra = tuple(sorted(allocatable.items()))
                view = self._parsed("nrts", key, body, _nrt_view(allocatable, self.ahead.nrt, key), extra=extra)
                if view is None:
                    snap.nrts.pop(name, None)  # unreadable: the node fails every pod, saying why
                else:
                    snap.nrts[name] = view
            self._mark(snap, "NodeResourceTopology", name, None if body is None else self._error("nrts", key))
        return None if keys is None else {key_name(key) for key in keys}

    def _patch_appgroups(self, snap: Snapshot, keys: set[str] | None) -> None:
        objects = self.store.objects["appgroups"]
        if keys is None:  # listed again: some may be gone without an event
            snap.appgroups, self._appgroup_keys = {}, {}
            keys = set(objects)
        for key in keys:
            body = objects.get(key)
            old = self._appgroup_keys.pop(key, None)
            if old is not None:
                snap.appgroups.pop(old, None)
            if body is None:
                self._forget("appgroups", key)
                continue
            ag = self._parsed("appgroups", key, body, AppGroup.model_validate)
            if ag is not None:
                self._appgroup_keys[key] = (ag.namespace or "default", ag.name)
                snap.appgroups[self._appgroup_keys[key]] = ag

    def _mark(self, snap: Snapshot, kind: str, name: str, error: str | None) -> None:
        """Keep ``snap.invalid`` in step: the node's NRT or Node object is (or no longer is) unreadable."""
        bad = self._invalid.setdefault(name, {})
        if error is None:
            bad.pop(kind, None)
        else:
            bad[kind] = f"invalid {kind} {name}: {error}"
        if not bad:
            self._invalid.pop(name, None)
            snap.invalid.pop(name, None)
        else:  # the NRT's problem first: it is what placement reads
            snap.invalid[name] = bad.get("NodeResourceTopology") or bad["Node"]

    def _error(self, kind: str, key: str) -> str | None:
        """Why the last parse of the object failed (None: it parsed)."""
        cached = self._parse_cache.get(kind, {}).get(key)
        return cached[2] if cached is not None else None

    def _forget(self, kind: str, key: str) -> None:
        self._parse_cache.get(kind, {}).pop(key, None)

    def _links(self, body: dict[str, Any]) -> dict[tuple[str, str, str], Any]:
        return links_of(NetworkTopology.model_validate(body), self.weights_name)

    def _parsed(self, kind: str, key: str, body: dict[str, Any], build: Callable[[Any], Any], extra: Any = None) -> Any:
        version = (body["metadata"].get("resourceVersion"), extra)
        cached = self._parse_cache.setdefault(kind, {}).get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        error = None
        try:
            value = build(body)
        except Exception as exc:  # one malformed object must not hide the others; said once per version
            value, error = None, describe(exc)
            if cached is None or cached[2] != error:
                logger.warning("ignoring %s %s (resourceVersion %s): %s", kind, key, version[0], error)
                if kind in ("nodes", "nrts"):  # the operators report on AppGroups and NetworkTopologies
                    self.rejected.append((body, error))
        self._parse_cache[kind][key] = (version, value, error)
        return value


def _nrt_view(
    node_allocatable: dict[str, Decimal], model: Callable[[str, dict[str, Any]], NodeResourceTopology], key: str
) -> Callable[[dict[str, Any]], NodeTopology]:
    def build(body: dict[str, Any]) -> NodeTopology:
        return from_nrt(model(key, body), node_allocatable)

    return build


def _minus(node: NodeTopology, held: tuple[Reservation, ...]) -> NodeTopology:
    """The node with its reservations taken from their zones (lowest NUMA id first), in one copy.
    A negative request (``credits``: a pod ended that the NRT still counts) is given back to its
    zone, up to what the zone has allocatable."""
    available = {z.numa: dict(z.available) for z in node.zones}
    allocatable = {z.numa: z.allocatable for z in node.zones}
    for r in held:
        if any(amount < 0 for amount in r.request.values()):
            for numa in r.numa:
                zone = available.get(numa)
                for resource, amount in r.request.items():
                    if zone is not None and resource in zone and amount < 0:
                        ceiling = allocatable[numa].get(resource, zone[resource] - amount)
                        zone[resource] = min(ceiling, zone[resource] - amount)
            continue
        left = dict(r.request)
        for numa in sorted(r.numa):
            zone = available.get(numa)
            if zone is None:
                continue
            for resource, amount in list(left.items()):
                if resource in zone and amount > 0:
                    used = min(zone[resource], amount)
                    zone[resource] -= used
                    left[resource] = amount - used
    return replace(node, zones=tuple(replace(z, available=available[z.numa]) for z in node.zones))
