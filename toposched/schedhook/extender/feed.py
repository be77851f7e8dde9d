"""What keeps the extender's cache current: list-then-watch of the objects placement reads."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from toposched.apis.appgroup import AppGroup
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.kube import rest
from toposched.kube.watch import follow
from toposched.schedhook.extender.cache import ClusterCache

Lister = Callable[..., Awaitable[Any]]


async def feed(cache: ClusterCache, api: rest.Kube) -> None:
    """Follow nodes, bound pods, NRTs, AppGroups and NetworkTopologies into ``cache`` until cancelled."""
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
    tasks = [asyncio.create_task(_follow(cache, kind, lister)) for kind, lister in sources.items()]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _follow(cache: ClusterCache, kind: str, lister: Lister) -> None:
    def listed(items: list[dict[str, Any]]) -> None:
        cache.listed(kind, items)
        cache.mark_synced(kind)

    def changed(type_: str, obj: dict[str, Any]) -> None:
        cache.event(kind, type_, obj)

    if kind == "pods":  # only bound pods: pending ones hold nothing on any node
        await follow(lister, listed, changed, kind, field_selector="spec.nodeName!=")
    else:
        await follow(lister, listed, changed, kind)
