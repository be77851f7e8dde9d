"""What keeps the extender's object store current: list-then-watch of the objects placement reads."""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson

from toposched.apis.appgroup import AppGroup
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.apis.resourceslice import RESOURCE_GROUP, RESOURCE_VERSION
from toposched.kube import rest
from toposched.kube.watch import ListStats, follow
from toposched.schedhook.extender.startup import StartUp
from toposched.schedhook.extender.store import DRA_KINDS, ObjectStore

logger = logging.getLogger(__name__)

Lister = Callable[..., Awaitable[Any]]
Arrived = Callable[[str, dict[str, Any]], None]


async def feed(
    store: ObjectStore,
    api: rest.Kube,
    synced: Callable[[], None] = lambda: None,
    start: StartUp | None = None,
    arrived: Arrived = lambda kind, obj: None,
) -> None:
    """Follow nodes, bound pods, NRTs, AppGroups, NetworkTopologies and, where the cluster serves
    them, DRA's slices, device classes and claims into ``store`` until cancelled; ``synced`` runs
    once every kind but DRA's has been listed, before the store says it is synced. ``start``
    records how the first lists went; ``arrived(kind, object)`` sees each object of them as it
    arrives (to parse it while the rest streams in)."""
    start = start or StartUp()
    sources: dict[str, Lister] = {
        "nodes": api.lister(rest.path("", "v1", "nodes")),
        "pods": api.lister(rest.path("", "v1", "pods")),
    }
    for kind, model in (
        ("nrts", NodeResourceTopology),
        ("appgroups", AppGroup),
        ("networktopologies", NetworkTopology),
    ):
        sources[kind] = api.lister(rest.path(model.GROUP, model.VERSION, model.PLURAL))
    start.begin_lists()
    tasks = [
        asyncio.create_task(_follow(store, kind, lister, synced, start, arrived)) for kind, lister in sources.items()
    ]
    try:  # DRA's kinds are never waited for: asked about while the others list
        if await serves_dra(api):
            for kind in DRA_KINDS:
                lister = api.lister(rest.path(RESOURCE_GROUP, RESOURCE_VERSION, kind))
                tasks.append(asyncio.create_task(_follow(store, kind, lister, synced, start, arrived)))
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _follow(
    store: ObjectStore, kind: str, lister: Lister, synced: Callable[[], None], start: StartUp, arrived: Arrived
) -> None:
    def listed(items: list[dict[str, Any]]) -> None:
        began = time.perf_counter()
        store.listed(kind, items)
        start.stored(kind, time.perf_counter() - began)
        if store.mark_synced(kind) and not store.synced.is_set():
            start.all_listed()
            synced()
            store.synced.set()
            start.ready()

    def changed(type_: str, obj: dict[str, Any]) -> None:
        store.event(kind, type_, obj)

    def measured(stats: ListStats) -> None:
        start.listed(kind, stats)

    def slim(obj: dict[str, Any]) -> dict[str, Any]:
        obj = without_managed_fields(obj)
        if not store.synced.is_set():
            arrived(kind, obj)
        return obj

    selector = {"field_selector": "spec.nodeName!="} if kind == "pods" else {}  # pending pods hold nothing
    await follow(lister, listed, changed, kind, slim, measured, stream=True, **selector)


def without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without ``metadata.managedFields``, which nothing here reads: about half of the
    bytes of a kwok Node or an NRT, kept for every object of the cluster and walked by the
    collector at every full collection."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


async def serves_dra(api: rest.Kube) -> bool:
    """Does the cluster serve resource.k8s.io/v1? Asked once: a cluster gains it only by an upgrade,
    which restarts the apiserver and, with it, nothing of ours; without it no pod has claims."""
    try:
        await api.get(f"/apis/{RESOURCE_GROUP}/{RESOURCE_VERSION}")
    except rest.ApiError as exc:
        logger.info("%s/%s not served (%s): DRA devices not followed", RESOURCE_GROUP, RESOURCE_VERSION, exc.status)
        return False
    except (aiohttp.ClientError, OSError, TimeoutError, orjson.JSONDecodeError) as exc:
        logger.warning("cannot ask whether %s is served (%s); following it", RESOURCE_GROUP, exc)
    return True
