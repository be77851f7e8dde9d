"""List, then watch, Kubernetes objects as plain dicts: how the operators and schedhook read the
objects they keep (one JSON parse per event; the client's generated models, with their date
parsing, cost more than anything either does with an event)."""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

logger = logging.getLogger(__name__)

Items = list[dict[str, Any]]


class ListError(RuntimeError):
    """The apiserver answered a list with an error (a Status object), not a list."""


async def list_objects(lister: Callable[..., Awaitable[Any]], **params: str) -> tuple[Items, str]:
    """The items of one list call and the list's resourceVersion.

    ``lister`` is a client list call (``CoreV1Api.list_node`` and the like). An error answer
    (403, 500, ...) raises ListError: it is never taken for an empty list.
    """
    response = await lister(_preload_content=False, **params)
    try:
        raw = await response.read()
    finally:
        response.release()
    body = orjson.loads(raw) if raw else {}
    if not 200 <= response.status < 300 or not isinstance(body, dict) or body.get("kind") == "Status":
        message = body.get("message") if isinstance(body, dict) else None
        raise ListError(f"HTTP {response.status}: {message or raw[:200]!r}")
    return list(body.get("items") or []), str((body.get("metadata") or {}).get("resourceVersion") or "")


async def follow(
    lister: Callable[..., Awaitable[Any]],
    listed: Callable[[Items], None],
    changed: Callable[[str, dict[str, Any]], None],
    what: str,
    **params: str,
) -> None:
    """``listed(items)`` once, then ``changed(type, object)`` per ADDED, MODIFIED or DELETED event.

    ``lister`` is a client list call (``CoreV1Api.list_node`` and the like). A watch that times
    out goes on from the last resourceVersion seen (bookmarks keep it fresh); a failed one (the
    apiserver restarting, 410 Gone) lists again after a backoff.
    """
    backoff = 1.0
    version: str | None = None  # None: list (again)
    while True:
        try:
            if version is None:
                items, version = await list_objects(lister, **params)
                listed(items)
            response = await lister(
                watch=True,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=300,
                _preload_content=False,
                **params,
            )
            try:
                async for line in response.content:
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise RuntimeError(f"watch error {status.get('code')}: {status.get('message')}")
                    version = event["object"]["metadata"].get("resourceVersion") or version
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        changed(event["type"], event["object"])
            finally:
                response.release()
            backoff = 1.0
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("watch of %s failed (%s); listing again in %.0fs", what, exc, backoff)
            version = None
            await asyncio.sleep(backoff)
            backoff = min(30.0, backoff * 2)
