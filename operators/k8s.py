"""The operators' one layer that talks to the Kubernetes API (besides Kopf's own watches)."""

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.config.config_exception import ConfigException

from apis.meta import KubeObject
from toposched.watch import follow

logger = logging.getLogger(__name__)

COMPONENT = "toposched-operator"


async def connect() -> client.ApiClient:
    """An API client from the in-cluster service account, else from the kubeconfig."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)
    except ConfigException:
        await config.load_kube_config(client_configuration=configuration)
    return client.ApiClient(configuration)


async def patch_status(
    api: client.ApiClient, kind: type[KubeObject], namespace: str, name: str, status: dict[str, Any]
) -> dict[str, Any]:
    """Merge-patch the status subresource (never the spec the user wrote)."""
    result: dict[str, Any] = await client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        kind.GROUP,
        kind.VERSION,
        namespace,
        kind.PLURAL,
        name,
        {"status": status},
        _content_type="application/merge-patch+json",
    )
    return result


async def post_event(
    api: client.ApiClient, body: dict[str, Any], type_: str, reason: str, message: str, identity: str
) -> None:
    """Record a core/v1 Event on the object, as ``kubectl describe`` shows them."""
    meta = body["metadata"]
    now = datetime.now(UTC)
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name=f"{meta['name']}.", namespace=meta["namespace"]),
        involved_object=client.V1ObjectReference(
            api_version=body["apiVersion"],
            kind=body["kind"],
            name=meta["name"],
            namespace=meta["namespace"],
            uid=meta.get("uid"),
            resource_version=meta.get("resourceVersion"),
        ),
        type=type_,
        reason=reason,
        message=message[:1024],
        first_timestamp=now,
        last_timestamp=now,
        count=1,
        source=client.V1EventSource(component=COMPONENT),
        reporting_component=COMPONENT,
        reporting_instance=identity,
    )
    try:
        await client.CoreV1Api(api).create_namespaced_event(meta["namespace"], event)
    except client.ApiException as exc:
        # An event is a courtesy: losing one must not fail the reconcile that wrote the status.
        logger.warning("could not post %s event on %s/%s: %s", reason, meta["namespace"], meta["name"], exc.reason)


async def read_configmap_data(api: client.ApiClient, namespace: str, name: str) -> dict[str, str] | None:
    """The ConfigMap's data, or None when it does not exist."""
    try:
        cm = await client.CoreV1Api(api).read_namespaced_config_map(name, namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return dict(cm.data or {})


async def patch_spec_field(
    api: client.ApiClient,
    kind: type[KubeObject],
    namespace: str,
    name: str,
    resource_version: str,
    spec: dict[str, Any],
) -> dict[str, Any]:
    """Merge-patch part of the spec, only if the object is still at ``resource_version``.

    A concurrent edit by the user makes this fail with 409 Conflict instead of being overwritten.
    """
    result: dict[str, Any] = await client.CustomObjectsApi(api).patch_namespaced_custom_object(
        kind.GROUP,
        kind.VERSION,
        namespace,
        kind.PLURAL,
        name,
        {"metadata": {"resourceVersion": resource_version}, "spec": spec},
        _content_type="application/merge-patch+json",
    )
    return result


async def follow_nodes(
    api: client.ApiClient,
    listed: Callable[[list[dict[str, Any]]], None],
    changed: Callable[[str, dict[str, Any]], None],
) -> None:
    """Every Node, listed and then watched: not through Kopf, which runs a worker and a full
    handler cycle per object; with thousands of nodes their status heartbeats alone kept it from
    reaching any other handler."""
    await follow(client.CoreV1Api(api).list_node, listed, changed, "nodes")
