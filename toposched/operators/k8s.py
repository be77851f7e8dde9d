"""The operators' one layer that talks to the Kubernetes API (besides Kopf's own watches and the
shared toposched.kube helpers)."""

import copy
import hashlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from toposched.apis.meta import KubeObject
from toposched.kube import rest
from toposched.kube.watch import Slim, follow

logger = logging.getLogger(__name__)


def _path(kind: type[KubeObject], namespace: str, name: str) -> str:
    return rest.path(kind.GROUP, kind.VERSION, kind.PLURAL, namespace, name)


async def patch_status(
    api: rest.Kube, kind: type[KubeObject], namespace: str, name: str, status: dict[str, Any]
) -> dict[str, Any]:
    """Merge-patch the status subresource (never the spec the user wrote)."""
    result: dict[str, Any] = await api.patch(_path(kind, namespace, name) + "/status", {"status": status})
    return result


async def read_object(api: rest.Kube, kind: type[KubeObject], namespace: str, name: str) -> dict[str, Any] | None:
    """The object as the apiserver has it now, or None when it is gone."""
    try:
        found: dict[str, Any] = await api.get(_path(kind, namespace, name))
    except rest.ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return found


async def read_configmap_data(api: rest.Kube, namespace: str, name: str) -> dict[str, str] | None:
    """The ConfigMap's data, or None when it does not exist."""
    try:
        cm = await api.get(rest.path("", "v1", "configmaps", namespace, name))
    except rest.ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return dict(cm.get("data") or {})


async def patch_spec_field(
    api: rest.Kube,
    kind: type[KubeObject],
    namespace: str,
    name: str,
    resource_version: str,
    spec: dict[str, Any],
) -> dict[str, Any]:
    """Merge-patch part of the spec, only if the object is still at ``resource_version``.

    A concurrent edit by the user makes this fail with 409 Conflict instead of being overwritten.
    """
    result: dict[str, Any] = await api.patch(
        _path(kind, namespace, name), {"metadata": {"resourceVersion": resource_version}, "spec": spec}
    )
    return result


async def follow_nodes(
    api: rest.Kube,
    listed: Callable[[list[dict[str, Any]]], None],
    changed: Callable[[str, dict[str, Any]], None],
    slim: Slim | None = None,
) -> None:
    """Every Node, listed and then watched: not through Kopf, which runs a worker and a full
    handler cycle per object; with thousands of nodes their status heartbeats alone kept it from
    reaching any other handler. ``slim`` keeps what the caller needs of each node."""
    await follow(api.lister(rest.path("", "v1", "nodes")), listed, changed, "nodes", slim)


def kept_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an object for an index, without what no handler reads: ``managedFields`` and
    kubectl's last-applied copy of the whole object (per object, often the larger part)."""
    kept = {key: copy.deepcopy(value) for key, value in body.items() if key != "metadata"}
    metadata = body.get("metadata")
    if isinstance(metadata, Mapping):  # dropped before copying: they are the bulk of a big object
        kept["metadata"] = {k: copy.deepcopy(v) for k, v in metadata.items() if k != "managedFields"}
        annotations = kept["metadata"].get("annotations")
        if isinstance(annotations, dict):
            annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    return kept


def digest(obj: Any) -> bytes:
    """A short fingerprint of a JSON-able object (a status as last written), to compare with."""
    return hashlib.blake2b(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()
