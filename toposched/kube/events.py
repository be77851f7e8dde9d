"""core/v1 Events on the objects toposched acts on, as ``kubectl describe`` shows them."""

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import aiohttp

from toposched.kube import rest

logger = logging.getLogger(__name__)


def event_body(
    involved: Mapping[str, Any],
    type_: str,
    reason: str,
    message: str,
    component: str,
    instance: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """An Event on ``involved`` (an object as the API returns it: apiVersion, kind, metadata)."""
    meta = involved.get("metadata") or {}
    name, namespace = meta.get("name", ""), meta.get("namespace") or "default"
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    reference = {
        "apiVersion": involved.get("apiVersion"),
        "kind": involved.get("kind"),
        "name": name,
        "namespace": namespace,
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{name}.", "namespace": namespace},
        "involvedObject": {k: v for k, v in reference.items() if v is not None},
        "type": type_,
        "reason": reason,
        "message": message[:1024],
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": instance or component,
    }


async def post_event(
    api: rest.Kube,
    involved: Mapping[str, Any],
    type_: str,
    reason: str,
    message: str,
    component: str,
    instance: str | None = None,
) -> None:
    """Record an Event on ``involved``. An Event is a courtesy: losing one is logged and never
    fails the work that wanted to post it."""
    body = event_body(involved, type_, reason, message, component, instance)
    namespace = body["metadata"]["namespace"]
    try:
        await api.create(rest.path("", "v1", "events", namespace), body)
    except (rest.ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
        name = body["involvedObject"].get("name")
        logger.warning("could not post a %s event on %s/%s: %s", reason, namespace, name, exc)
