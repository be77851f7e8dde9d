"""What keeps the extender's object store current: list-then-watch of the objects placement reads."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from toposched.apis.appgroup import AppGroup
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.kube import rest
from toposched.kube.watch import follow
from toposched.schedhook.extender.store import ObjectStore

Lister = Callable[..., Awaitable[Any]]


async def feed(store: ObjectStore, api: rest.Kube, synced: Callable[[], None] = lambda: None) -> None:
    """Follow nodes, bound pods, NRTs, AppGroups and NetworkTopologies into ``store`` until cancelled;
    ``synced`` runs once every kind has been listed, before the store says it is synced."""
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
    tasks = [asyncio.create_task(_follow(store, kind, lister, synced)) for kind, lister in sources.items()]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _follow(store: ObjectStore, kind: str, lister: Lister, synced: Callable[[], None]) -> None:
    def listed(items: list[dict[str, Any]]) -> None:
        store.listed(kind, items)
        if store.mark_synced(kind) and not store.synced.is_set():
            synced()
            store.synced.set()

    def changed(type_: str, obj: dict[str, Any]) -> None:
        store.event(kind, type_, obj)

    if kind == "pods":  # only bound pods: pending ones hold nothing on any node
        await follow(lister, listed, changed, kind, field_selector="spec.nodeName!=")
    else:
        await follow(lister, listed, changed, kind)
