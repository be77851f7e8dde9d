"""What keeps the extender's cache current: list-then-watch of the objects placement reads."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client

from toposched.apis.appgroup import AppGroup
from toposched.apis.meta import KubeObject
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.kube.watch import follow
from toposched.schedhook.extender.cache import ClusterCache

Lister = Callable[..., Awaitable[Any]]


async def feed(cache: ClusterCache, api: client.ApiClient) -> None:
    """Follow nodes, bound pods, NRTs, AppGroups and NetworkTopologies into ``cache`` until cancelled."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    sources: dict[str, Lister] = {"nodes": core.list_node, "pods": core.list_pod_for_all_namespaces}
    for kind, model in (
        ("nrts", NodeResourceTopology),
        ("appgroups", AppGroup),
        ("networktopologies", NetworkTopology),
    ):
        sources[kind] = _custom_lister(custom, model)
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


def _custom_lister(custom: client.CustomObjectsApi, model: type[KubeObject]) -> Lister:
    """Lists (and, with ``watch=True``, watches) a custom resource in every namespace."""

    async def list_all(**kwargs: Any) -> Any:
        return await custom.list_cluster_custom_object(model.GROUP, model.VERSION, model.PLURAL, **kwargs)

    return list_all
