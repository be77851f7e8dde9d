"""List, then watch, Kubernetes objects as plain dicts: how the operators and schedhook read the
objects they keep (one JSON parse per event; the client's generated models, with their date
parsing, cost more than anything either does with an event)."""

import asyncio
import logging
import time
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


RETRY_FIRST = 0.5
RETRY_MAX = 2.0
"""Seconds between attempts while the apiserver is away: a failed list costs little, and a
restarted apiserver should be followed again within a few seconds of being back."""


class WatchError(RuntimeError):
    """The apiserver ended a watch with an error."""

    def __init__(self, code: object, message: object) -> None:
        super().__init__(f"watch error {code}: {message}")
        self.expired = code == 410
        """The resourceVersion is too old: list again at once (not a failure)."""


async def follow(
    lister: Callable[..., Awaitable[Any]],
    listed: Callable[[Items], None],
    changed: Callable[[str, dict[str, Any]], None],
    what: str,
    **params: str,
) -> None:
    """``listed(items)`` once, then ``changed(type, object)`` per ADDED, MODIFIED or DELETED event.

    ``lister`` is a client list call (``CoreV1Api.list_node`` and the like). A watch that times
    out goes on from the last resourceVersion seen (bookmarks keep it fresh); an expired one
    (410 Gone) lists again at once; a failed one (the apiserver restarting) lists again after a
    short backoff, reset by the next good list. An error answer is never taken for data: the
    objects already given stay until a good list replaces them. One log line says a watch failed,
    one that it is back; the attempts between are debug.
    """
    backoff = RETRY_FIRST
    failing_since: float | None = None
    version: str | None = None  # None: list (again)
    while True:
        try:
            if version is None:
                items, version = await list_objects(lister, **params)
                listed(items)
                if failing_since is not None:
                    logger.info("following %s again after %.1fs", what, time.monotonic() - failing_since)
                failing_since, backoff = None, RETRY_FIRST
            response = await lister(
                watch=True,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=300,
                _preload_content=False,
                **params,
            )
            try:
                if not 200 <= response.status < 300:
                    body = orjson.loads(await response.read() or b"{}")
                    raise WatchError(response.status, body.get("message") if isinstance(body, dict) else body)
                async for line in response.content:
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise WatchError(status.get("code"), status.get("message"))
                    version = event["object"]["metadata"].get("resourceVersion") or version
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        changed(event["type"], event["object"])
            finally:
                response.release()
        except asyncio.CancelledError:
            raise
        except WatchError as exc:
            version = None
            if not exc.expired:
                backoff, failing_since = await _failed(what, exc, backoff, failing_since)
        except Exception as exc:  # the apiserver away, a connection reset, a body that is not JSON
            version = None
            backoff, failing_since = await _failed(what, exc, backoff, failing_since)


async def _failed(what: str, exc: Exception, backoff: float, failing_since: float | None) -> tuple[float, float]:
    """Log (once per outage) and wait; returns the next backoff and when the failures began."""
    reason = str(exc) or type(exc).__name__
    if failing_since is None:
        logger.warning("watch of %s failed (%s); retrying every %.1f-%.0fs", what, reason, backoff, RETRY_MAX)
        failing_since = time.monotonic()
    else:
        logger.debug("watch of %s still failing (%s)", what, reason)
    await asyncio.sleep(backoff)
    return min(RETRY_MAX, backoff * 2), failing_since
