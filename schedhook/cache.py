"""The extender's watch-fed view of the cluster, plus reservations for NRTs that lag behind binds.

Nodes, NodeResourceTopologies, AppGroups, NetworkTopologies and bound pods are listed and then
watched; a failed watch lists again after a backoff. When the extender binds a pod it reserves
the pod's request on the NUMA zone(s) the kubelet is predicted to use, until that node's NRT is
updated after the bind or the reservation times out, so a burst of pods does not see the same
stale ``available`` and pile onto one zone.

Snapshots share one columnar NodeTable, refilled only for nodes whose NRT or reservations changed.
"""

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

import orjson
from kubernetes_asyncio import client

from apis.appgroup import AppGroup
from apis.networktopology import NetworkTopology
from apis.noderesourcetopology import NodeResourceTopology
from schedhook.placement.evaluate import Placed, Snapshot
from schedhook.placement.freshness import accounted
from schedhook.placement.numa import NodeTopology, Pod, Zone, from_nrt, pod_from_spec
from schedhook.placement.objects import links_of, node_view, placed_pod
from schedhook.placement.table import NodeTable

logger = logging.getLogger(__name__)


@dataclass
class Reservation:
    pod: str
    """The pod's uid."""
    node: str
    numa: tuple[int, ...]
    request: dict[str, Decimal]
    since: float = field(default_factory=time.monotonic)
    key: str = ""
    """namespace/name, to find the pod among the node's pods."""


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


class ClusterCache:
    def __init__(self, api: client.ApiClient, weights_name: str, reservation_timeout: float = 60.0) -> None:
        self.api = api
        self.weights_name = weights_name
        self.reservation_timeout = reservation_timeout
        self.objects: dict[str, dict[str, dict[str, Any]]] = {
            k: {} for k in ("nodes", "nrts", "appgroups", "networktopologies", "pods")
        }
        self.nrt_updated: dict[str, float] = {}
        self.reservations: dict[str, Reservation] = {}
        """By pod uid, oldest first."""
        self.settle = 1.0
        """Without a fingerprint on the NRT: an update received this long after a bind releases it."""
        self._pods_on: dict[str, dict[str, tuple[str, str, Pod]]] = {}
        """node -> pod key -> (namespace, name, pod) of the pods bound to it."""
        self._pod_node: dict[str, str] = {}
        self._pods_version: dict[str, int] = {}
        self._accounted: dict[str, tuple[tuple[Any, int], frozenset[tuple[str, str]] | None]] = {}
        self.synced = asyncio.Event()
        self._synced_kinds: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._parse_cache: dict[str, dict[str, tuple[Any, Any]]] = {}
        self._versions: dict[str, int] = {}
        self._placed: dict[str, Placed | None] = {}
        self._base: tuple[tuple[int, ...], Snapshot] | None = None
        self._views: dict[str, tuple[NodeTopology, tuple[Reservation, ...], NodeTopology]] = {}
        """node -> (NRT view, the reservations held on it, the view minus them)."""
        self.table = NodeTable()
        self._synced: tuple[int, tuple[tuple[str, int], ...]] | None = None
        self._base_builds = 0

    def start(self) -> None:
        core, custom = client.CoreV1Api(self.api), client.CustomObjectsApi(self.api)
        sources: dict[str, Callable[..., Awaitable[Any]]] = {
            "nodes": core.list_node,
            "pods": core.list_pod_for_all_namespaces,
        }
        for kind, model in (
            ("nrts", NodeResourceTopology),
            ("appgroups", AppGroup),
            ("networktopologies", NetworkTopology),
        ):
            sources[kind] = _custom_lister(custom, model)
        for kind, lister in sources.items():
            self._tasks.append(asyncio.create_task(self._follow(kind, lister)))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _follow(self, kind: str, lister: Callable[..., Awaitable[Any]]) -> None:
        store = self.objects[kind]
        extra = {"field_selector": "spec.nodeName!="} if kind == "pods" else {}
        backoff = 1.0
        while True:
            try:
                listed = await lister(_preload_content=False, **extra)
                body = orjson.loads(await listed.read())
                store.clear()
                for item in body.get("items", []):
                    store[_key(item)] = item
                self._changed(kind)
                if kind == "pods":
                    self._placed = {k: placed_pod(v) for k, v in store.items()}
                    self._pods_on, self._pod_node = {}, {}
                    for k, v in store.items():
                        self._track_pod(k, v, self._placed[k])
                self._mark_synced(kind)
                version = body["metadata"]["resourceVersion"]
                async for event in _watch(lister, version, extra):
                    obj = event["object"]
                    key = _key(obj)
                    if event["type"] == "DELETED":
                        store.pop(key, None)
                        if kind == "pods":
                            self._placed.pop(key, None)
                            self._track_pod(key, None, None)
                    elif event["type"] in ("ADDED", "MODIFIED"):
                        old = store.get(key)
                        store[key] = obj
                        if kind == "nodes" and old is not None and _node_signature(old) == _node_signature(obj):
                            continue  # a heartbeat: nothing placement reads has changed
                        if kind == "nrts":
                            self.nrt_updated[obj["metadata"]["name"]] = time.monotonic()
                        if kind == "pods":
                            placed = self._placed[key] = placed_pod(obj)
                            self._track_pod(key, obj, placed)
                    self._changed(kind)
                backoff = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the apiserver restarting, an expired resourceVersion...
                logger.warning("watch of %s failed (%s); listing again in %.0fs", kind, exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(30.0, backoff * 2)

    def _track_pod(self, key: str, pod: dict[str, Any] | None, placed: Placed | None) -> None:
        """Keep the node -> pods index (for fingerprints) in step; a pod's spec is parsed once."""
        node = placed.node if placed is not None else None
        before = self._pod_node.get(key)
        if before == node:
            return
        if before is not None:
            self._pods_on.get(before, {}).pop(key, None)
            self._pods_version[before] = self._pods_version.get(before, 0) + 1
            del self._pod_node[key]
        if node is not None and pod is not None:
            meta = pod["metadata"]
            entry = (meta.get("namespace", ""), meta["name"], pod_from_spec(pod.get("spec") or {}))
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

    def _changed(self, kind: str) -> None:
        self._versions[kind] = self._versions.get(kind, 0) + 1

    def _mark_synced(self, kind: str) -> None:
        self._synced_kinds.add(kind)
        if len(self._synced_kinds) == len(self.objects):
            self.synced.set()

    def reserve(self, reservation: Reservation) -> None:
        """Hold a bound pod's request (replacing an earlier one of the same pod)."""
        self.reservations.pop(reservation.pod, None)
        self.reservations[reservation.pod] = reservation

    def release(self, pod_uid: str) -> None:
        self.reservations.pop(pod_uid, None)

    def _live_reservations(self) -> list[Reservation]:
        """Drop reservations the NRT now accounts for: by the pods fingerprint when the NRT has one,
        else by an update received ``settle`` seconds after the bind; or after the timeout."""
        now = time.monotonic()
        for uid, r in list(self.reservations.items()):
            if now - r.since >= self.reservation_timeout:
                del self.reservations[uid]
                continue
            matched = self._nrt_accounts(r.node, r.key)
            if matched is None:
                matched = self.nrt_updated.get(r.node, 0) >= r.since + self.settle
            if matched:
                del self.reservations[uid]
        return list(self.reservations.values())

    def snapshot(self, exclude: str = "") -> Snapshot:
        """The cluster with live reservations taken off the NRTs (except those of pod ``exclude``).

        Nodes, NRTs, AppGroups and NetworkTopologies are assembled again only after one of
        them changed (parsed objects are cached by resourceVersion); bound pods are kept
        parsed as their events arrive; a node's view minus its reservations is kept until
        either changes. A filter call then costs a few dict copies and a table sync.
        """
        base = self._base_snapshot()
        nrts = dict(base.nrts)
        by_node: dict[str, list[Reservation]] = {}
        for r in self._live_reservations():
            if r.pod != exclude and r.node in nrts:
                by_node.setdefault(r.node, []).append(r)
        views: dict[str, tuple[NodeTopology, tuple[Reservation, ...], NodeTopology]] = {}
        for node_name, held in by_node.items():
            cached = self._views.get(node_name)
            if cached is None or cached[0] is not nrts[node_name] or cached[1] != tuple(held):
                cached = (nrts[node_name], tuple(held), _minus(nrts[node_name], held))
            views[node_name] = cached
            nrts[node_name] = cached[2]
        self._views = views
        # The views are alive in self._views, so their ids cannot be reused while compared.
        synced = (self._base_builds, tuple((n, id(v[2])) for n, v in views.items()))
        if synced != self._synced:  # else the table already holds exactly these objects
            self.table.sync(nrts)
            self._synced = synced
        return Snapshot(
            locations=base.locations,
            nrts=nrts,
            appgroups=base.appgroups,
            links=base.links,
            placed=[p for p in self._placed.values() if p is not None],
            table=self.table,
        )

    def _base_snapshot(self) -> Snapshot:
        key = tuple(self._versions.get(k, 0) for k in ("nodes", "nrts", "appgroups", "networktopologies"))
        if self._base is not None and self._base[0] == key:
            return self._base[1]
        snap = Snapshot()
        allocatable: dict[str, dict[str, Decimal]] = {}
        for node_key, node_body in self.objects["nodes"].items():
            name = node_body["metadata"]["name"]
            location, node_allocatable = self._parsed("nodes", node_key, node_body, node_view)
            snap.locations[name] = location
            allocatable[name] = node_allocatable
        for nrt_key, body in self.objects["nrts"].items():
            name = body["metadata"]["name"]
            node_allocatable = allocatable.get(name, {})
            extra = tuple(sorted(node_allocatable.items()))
            snap.nrts[name] = self._parsed("nrts", nrt_key, body, _nrt_view(node_allocatable), extra=extra)
        for ag_key, body in self.objects["appgroups"].items():
            ag = self._parsed("appgroups", ag_key, body, AppGroup.model_validate)
            snap.appgroups[(ag.namespace or "default", ag.name)] = ag
        for nt_key, body in self.objects["networktopologies"].items():
            snap.links.update(self._parsed("networktopologies", nt_key, body, self._links))
        self._base = (key, snap)
        self._base_builds += 1
        return snap

    def _links(self, body: dict[str, Any]) -> dict[tuple[str, str, str], Any]:
        return links_of(NetworkTopology.model_validate(body), self.weights_name)

    def _parsed(self, kind: str, key: str, body: dict[str, Any], build: Callable[[Any], Any], extra: Any = None) -> Any:
        version = (body["metadata"].get("resourceVersion"), extra)
        cached = self._parse_cache.setdefault(kind, {}).get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        value = build(body)
        self._parse_cache[kind][key] = (version, value)
        return value


async def _watch(
    lister: Callable[..., Awaitable[Any]], version: str, extra: dict[str, str]
) -> AsyncIterator[dict[str, Any]]:
    """Watch events as plain dicts, one orjson parse each: the client's generated models (and
    their date parsing) cost more than everything else the extender does per event."""
    response = await lister(watch=True, resource_version=version, timeout_seconds=300, _preload_content=False, **extra)
    try:
        async for line in response.content:
            if not line.strip():
                continue
            event = orjson.loads(line)
            if event.get("type") == "ERROR":  # e.g. 410 Gone: the caller lists again
                status = event.get("object") or {}
                raise RuntimeError(f"watch error {status.get('code')}: {status.get('message')}")
            if event.get("type") != "BOOKMARK":
                yield event
    finally:
        response.release()


def _node_signature(node: dict[str, Any]) -> tuple[Any, Any]:
    return (node.get("metadata") or {}).get("labels"), (node.get("status") or {}).get("allocatable")


def _nrt_view(node_allocatable: dict[str, Decimal]) -> Callable[[dict[str, Any]], NodeTopology]:
    def build(body: dict[str, Any]) -> NodeTopology:
        return from_nrt(NodeResourceTopology.model_validate(body), node_allocatable)

    return build


def _minus(node: NodeTopology, held: list[Reservation]) -> NodeTopology:
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
    zones = tuple(Zone(z.numa, z.capacity, z.allocatable, available[z.numa]) for z in node.zones)
    return replace(node, zones=zones)


def _custom_lister(custom: client.CustomObjectsApi, model: Any) -> Callable[..., Awaitable[Any]]:
    """Lists (and, through watch.Watch, watches) a custom resource in every namespace."""

    async def list_all(**kwargs: Any) -> Any:
        return await custom.list_cluster_custom_object(model.GROUP, model.VERSION, model.PLURAL, **kwargs)

    return list_all
