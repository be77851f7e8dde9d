"""The objects placement reads, as the watches deliver them: nodes, NRTs, AppGroups, NetworkTopologies
and bound pods, as plain dicts, with what changed since each reader last looked.

``extender.feed`` fills it (``listed`` after a list, ``event`` per watch event). Readers -- the
snapshot builder, the node knowledge, the cluster view -- take the keys changed since their last
look from a ``Changes`` of their own, and the pods bound to each node from ``BoundPods``, an index
kept in step here. Objects are keyed ``namespace/name`` (``store_key``).
"""

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

from toposched.schedhook.placement.model import Placed, Pod
from toposched.schedhook.placement.parse import placed_pod, pod_from_spec

logger = logging.getLogger(__name__)
DRA_KINDS = ("resourceslices", "deviceclasses", "resourceclaims")
"""Followed where the cluster serves resource.k8s.io; never waited for (``mark_synced``)."""
KINDS = ("nodes", "nrts", "appgroups", "networktopologies", "pods", *DRA_KINDS)


def store_key(namespace: str, name: str) -> str:
    """The key of an object in the store: ``namespace/name``, ``/name`` for a cluster-scoped one."""
    return f"{namespace}/{name}"


def key_name(key: str) -> str:
    """The name in a store key (a node's, for nodes and NRTs)."""
    return key.partition("/")[2]


def object_key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return store_key(meta.get("namespace", ""), meta["name"])


class Changes:
    """The keys of some kinds changed since the last ``take`` (None: the kind was listed afresh)."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self._changed: dict[str, set[str] | None] = dict.fromkeys(kinds)

    def mark(self, kind: str, key: str | None) -> None:
        """``key`` of ``kind`` changed (None: any may have)."""
        if kind not in self._changed:
            return
        if key is None:
            self._changed[kind] = None
        elif (changed := self._changed[kind]) is not None:
            changed.add(key)

    def take(self) -> dict[str, set[str] | None]:
        taken, self._changed = self._changed, {kind: set() for kind in self._changed}
        return taken


GONE_SECONDS = 5.0
"""How long a pod gone from its node may still be counted by the node's NRT (written at most once
a second, after a second look at the kubelet): it may be in the set the fingerprint is of."""
GONE_TRIED = 3
"""Pods gone lately, the most recent first, that may be in that set; older ones are taken as let go
(forced into every set tried, they would make none match)."""


class BoundPods:
    """The pods bound to each node, oldest bind first, as placement and the fingerprints count them."""

    def __init__(self) -> None:
        self.placed: dict[str, Placed] = {}
        """Pod key -> where it runs (pods holding something on a node)."""
        self.on: dict[str, dict[str, tuple[str, str, Pod]]] = {}
        """Node -> pod key -> (namespace, name, requests), in bind order."""
        self.version: dict[str, int] = {}
        """Node -> bumped whenever its pods change."""
        self._node_of: dict[str, str] = {}
        self.ended: set[str] = set()
        """Keys of pods deleted or finished since the cluster view last took them."""
        self.bound_at: dict[str, float] = {}
        """Pod key -> when the watch first showed it bound (wall clock)."""
        self.terminating: set[str] = set()
        """Keys of bound pods being deleted: their kubelet may already have let go of them."""
        self.gone: dict[str, dict[str, tuple[float, tuple[str, str, Pod]]]] = {}
        """Node -> pod key -> (when it left, monotonic; its entry in ``on``): pods gone from the node
        in the last ``GONE_SECONDS``, which its NRT may count still."""
        self._moved: list[set[str] | None] = []
        """Per reader, the nodes whose pods changed since it last took them (None: any may have)."""

    def reader(self) -> int:
        """A reader of its own of the nodes whose pods change (``take_moved``)."""
        self._moved.append(set())
        return len(self._moved) - 1

    def take_moved(self, reader: int) -> set[str] | None:
        moved, self._moved[reader] = self._moved[reader], set()
        return moved

    def terminating_on(self, node: str) -> set[tuple[str, str]]:
        """The pods (namespace, name) bound to ``node`` that are being deleted."""
        on = self.on.get(node, {})
        return {(entry[0], entry[1]) for key, entry in on.items() if key in self.terminating}

    def gone_lately(self, node: str) -> list[tuple[str, str, Pod]]:
        """The last ``GONE_TRIED`` pods gone from the node within ``GONE_SECONDS``, oldest first."""
        gone = self.gone.get(node, {})
        now = time.monotonic()
        for key in [key for key, (left, _) in gone.items() if now - left > GONE_SECONDS]:
            del gone[key]
        if not gone:
            self.gone.pop(node, None)
        return [entry for _, entry in list(gone.values())[-GONE_TRIED:]]

    def leaving_on(self, node: str) -> tuple[list[tuple[str, str, Pod]], set[tuple[str, str]]]:
        """The node's pods as its NRT may count them: those gone lately (first) and those bound, in
        bind order; and which of them may be counted or not (being deleted, or gone)."""
        recent = self.gone_lately(node)
        return [*recent, *self.on.get(node, {}).values()], {(e[0], e[1]) for e in recent} | self.terminating_on(node)

    def clear(self) -> None:
        for node in self.on:
            self.version[node] = self.version.get(node, 0) + 1
        self.placed, self.on, self._node_of, self.terminating, self.gone = {}, {}, {}, set(), {}
        self._moved = [None for _ in self._moved]

    def apply(self, key: str, pod: dict[str, Any] | None) -> None:
        """The pod ``key`` is now ``pod`` (None: deleted)."""
        placed = placed_pod(pod) if pod is not None else None
        was_terminating = key in self.terminating
        self.terminating.discard(key)
        if placed is None:  # deleted or finished: it holds nothing any more
            self.placed.pop(key, None)
            self.bound_at.pop(key, None)
            self.ended.add(key)
        else:
            self.placed[key] = placed
            self.bound_at.setdefault(key, time.time())
            if pod is not None and (pod.get("metadata") or {}).get("deletionTimestamp"):
                self.terminating.add(key)
        node = placed.node if placed is not None else None
        before = self._node_of.get(key)
        if before == node:
            if node is not None and was_terminating != (key in self.terminating):
                self._mark_moved((node,))
                self.version[node] = self.version.get(node, 0) + 1  # what its NRT may leave out changed
            return
        self._mark_moved((before, node))
        if before is not None:
            entry = self.on.get(before, {}).pop(key, None)
            if entry is not None:
                self.gone.setdefault(before, {})[key] = (time.monotonic(), entry)
            self.version[before] = self.version.get(before, 0) + 1
            del self._node_of[key]
        if node is not None and pod is not None:
            meta = pod["metadata"]
            try:
                requests = pod_from_spec(pod.get("spec") or {})
            except ValueError as exc:  # bound anyway (by someone else): it only counts less exactly
                logger.warning("pod %s: %s; counted without its requests", key, exc)
                requests = Pod(())
            self.gone.get(node, {}).pop(key, None)
            self.on.setdefault(node, {})[key] = (meta.get("namespace", ""), meta["name"], requests)
            self._node_of[key] = node
            self.version[node] = self.version.get(node, 0) + 1

    def _mark_moved(self, nodes: Iterable[str | None]) -> None:
        for changed in nodes:
            for moved in self._moved:
                if changed is not None and moved is not None:
                    moved.add(changed)

    def take_ended(self) -> set[str]:
        ended, self.ended = self.ended, set()
        return ended


class ObjectStore:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in KINDS}
        self.pods = BoundPods()
        self.nrt_updated: dict[str, float] = {}
        """Node -> when a watch event last changed its NRT (monotonic clock; a list says nothing of when)."""
        self.synced = asyncio.Event()
        """Every kind has been listed once: the store shows the whole cluster."""
        self._synced_kinds: set[str] = set()
        self._readers: list[Changes] = []

    def changes(self, kinds: Iterable[str]) -> Changes:
        """A reader's own record of the keys of ``kinds`` changed from now on."""
        reader = Changes(kinds)
        self._readers.append(reader)
        return reader

    def listed(self, kind: str, items: list[dict[str, Any]]) -> None:
        """Replace every object of ``kind`` (a list, on start and after a failed watch)."""
        store = self.objects[kind]
        store.clear()
        for item in items:
            store[object_key(item)] = item
        if kind == "pods":
            gone = set(self.pods.placed)
            self.pods.clear()
            for key, pod in store.items():
                self.pods.apply(key, pod)
            self.pods.ended |= gone - set(self.pods.placed)
        for reader in self._readers:
            reader.mark(kind, None)

    def event(self, kind: str, type_: str, obj: dict[str, Any]) -> None:
        """Apply one watch event (ADDED, MODIFIED or DELETED)."""
        store = self.objects[kind]
        key = object_key(obj)
        if type_ == "DELETED":
            store.pop(key, None)
            if kind == "pods":
                self.pods.apply(key, None)
        elif type_ in ("ADDED", "MODIFIED"):
            old = store.get(key)
            store[key] = obj
            if kind == "nodes" and old is not None and _node_signature(old) == _node_signature(obj):
                return  # a heartbeat: nothing placement reads has changed
            if kind == "pods":
                self.pods.apply(key, obj)
        else:
            return
        if kind == "nrts":
            self.nrt_updated[key_name(key)] = time.monotonic()
        for reader in self._readers:
            reader.mark(kind, key)

    def mark_synced(self, kind: str) -> bool:
        """The first list of ``kind`` is in; True once every kind's is."""
        self._synced_kinds.add(kind)
        return self._synced_kinds.issuperset(k for k in self.objects if k not in DRA_KINDS)

    def has_listed(self, kind: str) -> bool:
        return kind in self._synced_kinds

    def node(self, name: str) -> dict[str, Any] | None:
        return self.objects["nodes"].get(store_key("", name))

    def nrt(self, node: str) -> dict[str, Any] | None:
        return self.objects["nrts"].get(store_key("", node))

    def topology_order(self, namespace: str, name: str) -> dict[str, int] | None:
        """Workload selector -> index in the AppGroup's status.topologyOrder (None: no AppGroup or no order)."""
        body = self.objects["appgroups"].get(store_key(namespace, name)) or {}
        entries = (body.get("status") or {}).get("topologyOrder") or []
        try:
            return {e["workload"]["selector"]: int(e["index"]) for e in entries} or None
        except (KeyError, TypeError, ValueError):
            return None


def attributes_of(nrt: dict[str, Any]) -> dict[str, str]:
    """An NRT body's top-level attributes as read before any validation (a garbled entry is skipped)."""
    found = nrt.get("attributes")
    items = found if isinstance(found, list) else []
    return {
        a["name"]: a["value"]
        for a in items
        if isinstance(a, dict) and isinstance(a.get("name"), str) and isinstance(a.get("value"), str)
    }


def _node_signature(node: dict[str, Any]) -> tuple[Any, Any]:
    return (node.get("metadata") or {}).get("labels"), (node.get("status") or {}).get("allocatable")
