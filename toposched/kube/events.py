"""core/v1 Events on the objects toposched acts on, as ``kubectl describe`` shows them."""

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client

logger = logging.getLogger(__name__)


async def post_event(
    api: client.ApiClient,
    involved: Mapping[str, Any],
    type_: str,
    reason: str,
    message: str,
    component: str,
    instance: str | None = None,
) -> None:
    """Record an Event on ``involved`` (an object as the API returns it: apiVersion, kind, metadata).

    An Event is a courtesy: losing one is logged and never fails the work that wanted to post it.
    """
    meta = involved.get("metadata") or {}
    name, namespace = meta.get("name", ""), meta.get("namespace") or "default"
    now = datetime.now(UTC)
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name=f"{name}.", namespace=namespace),
        involved_object=client.V1ObjectReference(
            api_version=involved.get("apiVersion"),
            kind=involved.get("kind"),
            name=name,
            namespace=namespace,
            uid=meta.get("uid"),
            resource_version=meta.get("resourceVersion"),
        ),
        type=type_,
        reason=reason,
        message=message[:1024],
        first_timestamp=now,
        last_timestamp=now,
        count=1,
        source=client.V1EventSource(component=component),
        reporting_component=component,
        reporting_instance=instance or component,
    )
    try:
        await client.CoreV1Api(api).create_namespaced_event(namespace, event)
    except client.ApiException as exc:
        logger.warning("could not post a %s event on %s/%s: %s", reason, namespace, name, exc.reason)
