"""The extender's view of the cluster: the objects placement reads and the snapshots it evaluates.

``extender.feed`` lists and watches nodes, NodeResourceTopologies, AppGroups, NetworkTopologies
and bound pods into it (``listed`` and ``event``). Parsed objects are patched per watch event, and
snapshots share one columnar NodeTable refilled only for nodes whose NRT or reservations changed.
The cache owns the reservation ledger (``extender.reservations``) and tells it when a node's NRT or
pods change; a snapshot shows every NRT minus the reservations still held on it.
"""

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

from toposched.apis.appgroup import AppGroup
from toposched.apis.errors import describe
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.schedhook.extender.reservations import Ledger, Reservation
from toposched.schedhook.placement.columnar import NodeTable
from toposched.schedhook.placement.freshness import accounted
from toposched.schedhook.placement.model import NodeTopology, NumaZone, Placed, Pod
from toposched.schedhook.placement.parse import (
    from_nrt,
    links_of,
    node_allocatable,
    node_location,
    placed_pod,
    pod_from_spec,
)
from toposched.schedhook.placement.snapshot import Snapshot

logger = logging.getLogger(__name__)
BASE_KINDS = ("nodes", "nrts", "appgroups", "networktopologies")


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


BINDING_SECONDS = 30.0
"""How long a pod being bound counts as placed without the watch showing it so."""


class ClusterCache:
    def __init__(self, weights_name: str, reservation_timeout: float = 60.0) -> None:
        self.weights_name = weights_name
        self.objects: dict[str, dict[str, dict[str, Any]]] = {
            k: {} for k in ("nodes", "nrts", "appgroups", "networktopologies", "pods")
        }
        self.nrt_updated: dict[str, float] = {}
        self.reservations = Ledger(reservation_timeout)
        self._pods_on: dict[str, dict[str, tuple[str, str, Pod]]] = {}
        """node -> pod key -> (namespace, name, pod) of the pods bound to it."""
        self._pod_node: dict[str, str] = {}
        self._pods_version: dict[str, int] = {}
        self._accounted: dict[str, tuple[tuple[Any, int], frozenset[tuple[str, str]] | None]] = {}
        self.synced = asyncio.Event()
        self._synced_kinds: set[str] = set()
        self._parse_cache: dict[str, dict[str, tuple[Any, Any, str | None]]] = {}
        """kind -> key -> (version, parsed value or None, why it could not be parsed)."""
        self._invalid: dict[str, dict[str, str]] = {}
        """Node name -> kind (Node, NodeResourceTopology) -> why that object of the node was skipped."""
        self.rejected: list[tuple[dict[str, Any], str]] = []
        """Objects found unreadable, not yet reported (``take_rejected``)."""
        self._dirty: dict[str, set[str] | None] = {kind: None for kind in BASE_KINDS}
        """Per kind, the keys changed since the base snapshot was last brought up to date (None: all)."""
        self._placed: dict[str, Placed] = {}
        self._binding: dict[str, tuple[Placed, float]] = {}
        """Pods the extender is binding (namespace/name -> where, since when) until the watch shows
        them bound: the next pod of their AppGroup is placed near them, not as if they were not there."""
        self._base: Snapshot | None = None
        self._allocatable: dict[str, dict[str, Decimal]] = {}
        self._appgroup_keys: dict[str, tuple[str, str]] = {}
        self._nrts: dict[str, NodeTopology] = {}
        """Every NRT view, minus the reservations held on its node."""
        self.table = NodeTable()

    def listed(self, kind: str, items: list[dict[str, Any]]) -> None:
        """Replace every object of ``kind`` (a list, on start and after a failed watch)."""
        store = self.objects[kind]
        store.clear()
        for item in items:
            store[_key(item)] = item
        parsed = self._parse_cache.get(kind, {})
        for gone in [key for key in parsed if key not in store]:  # deleted while no watch ran
            del parsed[gone]
        if kind in BASE_KINDS:
            self._dirty[kind] = None
        if kind == "pods":
            self._placed, self._pods_on, self._pod_node = {}, {}, {}
            for k, v in store.items():
                self._place(k, v)
        if kind in ("nrts", "pods"):
            self.reservations.check_all()

    def event(self, kind: str, type_: str, obj: dict[str, Any]) -> None:
        """Apply one watch event (ADDED, MODIFIED or DELETED) to the cache."""
        store = self.objects[kind]
        key = _key(obj)
        if type_ == "DELETED":
            store.pop(key, None)
            self._parse_cache.get(kind, {}).pop(key, None)
            if kind == "pods":
                self._place(key, None)
        elif type_ in ("ADDED", "MODIFIED"):
            old = store.get(key)
            store[key] = obj
            if kind == "nodes" and old is not None and _node_signature(old) == _node_signature(obj):
                return  # a heartbeat: nothing placement reads has changed
            if kind == "nrts":
                self.nrt_updated[obj["metadata"]["name"]] = time.monotonic()
                self.reservations.check_again(obj["metadata"]["name"])
            if kind == "pods":
                self._place(key, obj)
        else:
            return
        if kind == "pods" and key not in self._placed:  # deleted or finished: nothing left to hold
            self.release(obj["metadata"].get("uid", ""))
        dirty = self._dirty.get(kind)
        if dirty is not None:
            dirty.add(key)

    def binding(self, key: str, placed: Placed) -> None:
        if key not in self._placed:
            self._binding[key] = (placed, time.monotonic())

    def not_binding(self, key: str) -> None:
        self._binding.pop(key, None)

    def _in_flight(self) -> list[Placed]:
        now = time.monotonic()
        for key, (_, since) in list(self._binding.items()):
            if now - since > BINDING_SECONDS:  # never seen bound: deleted while pending, or lost
                del self._binding[key]
        return [p for p, _ in self._binding.values()]

    def _place(self, key: str, pod: dict[str, Any] | None) -> None:
        """Keep the bound pods and the node -> pods index (for fingerprints) in step."""
        self._binding.pop(key, None)
        placed = placed_pod(pod) if pod is not None else None
        if placed is None:
            self._placed.pop(key, None)
        else:
            self._placed[key] = placed
        node = placed.node if placed is not None else None
        before = self._pod_node.get(key)
        if before == node:
            return
        for changed in (before, node):
            if changed is not None:
                self.reservations.check_again(changed)
        if before is not None:
            self._pods_on.get(before, {}).pop(key, None)
            self._pods_version[before] = self._pods_version.get(before, 0) + 1
            del self._pod_node[key]
        if node is not None and pod is not None:
            meta = pod["metadata"]
            try:
                requests = pod_from_spec(pod.get("spec") or {})
            except ValueError as exc:  # bound anyway (by someone else): it only counts less exactly
                logger.warning("pod %s: %s; counted without its requests", key, exc)
                requests = Pod(())
            entry = (meta.get("namespace", ""), meta["name"], requests)
            self._pods_on.setdefault(node, {})[key] = entry
            self._pod_node[key] = node
            self._pods_version[node] = self._pods_version.get(node, 0) + 1

    def _nrt_accounts(self, node: str, key: str) -> bool | None:
        """Whether the node's NRT accounts for pod ``key`` by its fingerprint; None: it has none."""
        body = self.objects["nrts"].get(f"/{node}")
        if body is None:
            return None
        pods = self._pods_on.get(node, {})
        version = (body["metadata"].get("resourceVersion"), self._pods_version.get(node, 0))
        cached = self._accounted.get(node)
        if cached is None or cached[0] != version:
            attributes = {a.get("name"): a.get("value") for a in body.get("attributes") or []}
            cached = (version, accounted(attributes, list(pods.values())))  # dict order = bind order
            self._accounted[node] = cached
        if cached[1] is None:
            return None
        entry = pods.get(key)  # absent: our own view has not seen the bind yet
        return entry is not None and (entry[0], entry[1]) in cached[1]

    def mark_synced(self, kind: str) -> None:
        """The first list of ``kind`` is in; once every kind's is, the cache is ``synced``."""
        self._synced_kinds.add(kind)
        if len(self._synced_kinds) == len(self.objects) and not self.synced.is_set():
            # Parse everything and fill the table now (about a second at 5,000 nodes), not in
            # the first filter call, where the pods behind it would wait for it.
            self.snapshot()
            self.synced.set()

    def reserve(self, reservation: Reservation) -> None:
        self.reservations.reserve(reservation)

    def release(self, pod_uid: str) -> None:
        self.reservations.release(pod_uid)

    def live_reservations(self) -> list[Reservation]:
        """The reservations still held, after dropping those the NRTs now account for."""
        return self.reservations.live(self._nrt_accounts, lambda node: self.nrt_updated.get(node, 0.0))

    def topology_order(self, namespace: str, name: str) -> dict[str, int] | None:
        """Workload selector -> index in the AppGroup's status.topologyOrder (None: no AppGroup or no order)."""
        body = self.objects["appgroups"].get(f"{namespace}/{name}") or {}
        entries = (body.get("status") or {}).get("topologyOrder") or []
        try:
            return {e["workload"]["selector"]: int(e["index"]) for e in entries} or None
        except (KeyError, TypeError, ValueError):
            return None

    def snapshot(self, exclude: str = "") -> Snapshot:
        """The cluster with live reservations taken off the NRTs (except those of pod ``exclude``).

        The parsed objects are patched only where watch events changed them, a node's view
        minus its reservations is kept until either changes, and only table rows of nodes
        whose view changed are refilled: a filter call's cost follows the changes since the
        last call, not the size of the cluster.
        """
        base, changed = self._base_snapshot()
        self.live_reservations()
        everything = changed is None
        if changed is None:
            self._nrts = dict(base.nrts)
            changed = set(self.reservations.by_node)
        changed |= self.reservations.take_stale()
        mine = self.reservations.by_pod.get(exclude) if exclude else None
        if mine is not None:  # this call only: the next one puts the pod's reservation back
            changed.add(mine.node)
            self.reservations.touch(mine.node)
        for name in changed:
            nrt = base.nrts.get(name)
            held = tuple(r for r in self.reservations.by_node.get(name, {}).values() if not exclude or r.pod != exclude)
            if nrt is None:
                self._nrts.pop(name, None)
            else:
                self._nrts[name] = _minus(nrt, held) if held else nrt
        if everything:
            self.table.sync(self._nrts)
        else:
            self.table.update(self._nrts, changed)
        return Snapshot(  # shares the cache's dicts: use it before the next await
            locations=base.locations,
            nrts=self._nrts,
            appgroups=base.appgroups,
            links=base.links,
            placed=[*self._placed.values(), *self._in_flight()],
            invalid=base.invalid,
            table=self.table,
        )

    def _base_snapshot(self) -> tuple[Snapshot, set[str] | None]:
        """Parsed nodes, NRTs, AppGroups and NetworkTopologies, patched where they changed; and
        the names of the NRTs whose view changed (None: any may have)."""
        dirty, self._dirty = self._dirty, {kind: set() for kind in BASE_KINDS}
        try:
            return self._patch_base(dirty)
        except BaseException:  # half patched: start afresh next time rather than lose the rest
            self._base, self._dirty = None, dict.fromkeys(BASE_KINDS)
            raise

    def _patch_base(self, dirty: dict[str, set[str] | None]) -> tuple[Snapshot, set[str] | None]:
        snap = self._base
        if snap is None or dirty["nodes"] is None or dirty["nrts"] is None:
            snap = self._base = Snapshot()
            self._allocatable, self._appgroup_keys, self._invalid = {}, {}, {}
            dirty = dict.fromkeys(BASE_KINDS)
            nodes: set[str] | None = None
            nrts: set[str] | None = None
            changed: set[str] | None = None
        else:
            nodes, nrts, changed = dirty["nodes"], set(dirty["nrts"]), set()
        for key in self.objects["nodes"] if nodes is None else nodes:
            name = key.partition("/")[2]
            body = self.objects["nodes"].get(key)
            if body is None:
                snap.locations.pop(name, None)
                self._allocatable.pop(name, None)
            else:
                snap.locations[name] = node_location(body)
                self._allocatable[name] = self._parsed("nodes", key, body, node_allocatable) or {}
            self._mark(snap, "Node", name, None if body is None else self._error("nodes", key))
            if nrts is not None:
                nrts.add(f"/{name}")  # an NRT's view includes its node's allocatable
        for key in self.objects["nrts"] if nrts is None else nrts:
            name = key.partition("/")[2]
            body = self.objects["nrts"].get(key)
            if body is None:
                snap.nrts.pop(name, None)
            else:
                allocatable = self._allocatable.get(name, {})
                extra = tuple(sorted(allocatable.items()))
                view = self._parsed("nrts", key, body, _nrt_view(allocatable), extra=extra)
                if view is None:
                    snap.nrts.pop(name, None)  # unreadable: the node fails every pod, saying why
                else:
                    snap.nrts[name] = view
            self._mark(snap, "NodeResourceTopology", name, None if body is None else self._error("nrts", key))
            if changed is not None:
                changed.add(name)
        appgroups = dirty["appgroups"]
        if appgroups is None:  # listed again: some may be gone without an event
            snap.appgroups, self._appgroup_keys = {}, {}
            appgroups = set(self.objects["appgroups"])
        for key in appgroups:
            body = self.objects["appgroups"].get(key)
            old = self._appgroup_keys.pop(key, None)
            if old is not None:
                snap.appgroups.pop(old, None)
            ag = self._parsed("appgroups", key, body, AppGroup.model_validate) if body is not None else None
            if ag is not None:
                self._appgroup_keys[key] = (ag.namespace or "default", ag.name)
                snap.appgroups[self._appgroup_keys[key]] = ag
        if dirty["networktopologies"] is None or dirty["networktopologies"]:
            snap.links = {}
            for nt_key, body in self.objects["networktopologies"].items():
                snap.links.update(self._parsed("networktopologies", nt_key, body, self._links) or {})
        return snap, changed

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

    def take_rejected(self) -> list[tuple[dict[str, Any], str]]:
        """Objects found unreadable since the last call, with why (each version once), for Events."""
        rejected, self.rejected = self.rejected, []
        return rejected

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


def _node_signature(node: dict[str, Any]) -> tuple[Any, Any]:
    return (node.get("metadata") or {}).get("labels"), (node.get("status") or {}).get("allocatable")


def _nrt_view(node_allocatable: dict[str, Decimal]) -> Callable[[dict[str, Any]], NodeTopology]:
    def build(body: dict[str, Any]) -> NodeTopology:
        return from_nrt(NodeResourceTopology.model_validate(body), node_allocatable)

    return build


def _minus(node: NodeTopology, held: tuple[Reservation, ...]) -> NodeTopology:
    """The node with its reservations taken from their zones (lowest NUMA id first), in one copy."""
    available = {z.numa: dict(z.available) for z in node.zones}
    for r in held:
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
    zones = tuple(NumaZone(z.numa, z.capacity, z.allocatable, available[z.numa]) for z in node.zones)
    return replace(node, zones=zones)
