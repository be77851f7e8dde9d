"""List, then watch, Kubernetes objects as plain dicts: how the operators and schedhook read the
objects they keep (one JSON parse per event; the client's generated models, with their date
parsing, cost more than anything either does with an event)."""

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from toposched.kube.outage import Outage

logger = logging.getLogger(__name__)

Items = list[dict[str, Any]]


LIST_TIMEOUT = aiohttp.ClientTimeout(total=120, sock_connect=5, sock_read=15)
"""A list that stalls (a half-open connection, an apiserver still starting) is retried rather
than awaited for ever; the apiserver sends a list's first bytes at once."""
WATCH_SECONDS = 300
WATCH_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=WATCH_SECONDS + 30)


class ListError(RuntimeError):
    """The apiserver answered a list with an error (a Status object), not a list."""


PAGE = 500
"""Objects per list page (client-go's pager uses the same): thousands of nodes never arrive as
one body of tens of megabytes, parsed all at once."""

Slim = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class ListStats:
    """How one list went, for a start-up's breakdown."""

    seconds: float = 0.0
    """From the first request to the last page parsed (wall clock)."""
    parse_seconds: float = 0.0
    """Of which parsing pages (JSON, and ``slim``)."""
    began: float = field(default_factory=time.perf_counter)
    """When the first request went out (``time.perf_counter``)."""
    pages: int = 0
    """Requests answered (one for a streaming list)."""
    bytes: int = 0
    """As sent: pages, or the stream's events up to its end."""
    objects: int = 0


async def list_objects(
    lister: Callable[..., Awaitable[Any]], slim: Slim | None = None, stats: ListStats | None = None, **params: str
) -> tuple[Items, str]:
    """The items of a list, page by page, and the list's resourceVersion.

    ``lister`` is a client list call (``CoreV1Api.list_node`` and the like); ``slim`` keeps what
    the caller needs of each item as each page arrives; ``stats``, when given, is filled with how
    the list went. An error answer (403, 500, an expired continue token, ...) raises ListError:
    it is never taken for an empty or partial list.
    """
    stats = stats if stats is not None else ListStats()
    stats.began = time.perf_counter()
    items: Items = []
    token = ""
    while True:
        page: dict[str, Any] = {"limit": PAGE, "_continue": token} if token else {"limit": PAGE}
        response = await lister(_preload_content=False, _request_timeout=LIST_TIMEOUT, **params, **page)
        try:
            raw = await response.read()
        finally:
            response.release()
        parsing = time.perf_counter()
        body = orjson.loads(raw) if raw else {}
        if not 200 <= response.status < 300 or not isinstance(body, dict) or body.get("kind") == "Status":
            message = body.get("message") if isinstance(body, dict) else None
            raise ListError(f"HTTP {response.status}: {message or raw[:200]!r}")
        stats.pages, stats.bytes = stats.pages + 1, stats.bytes + len(raw)
        del raw
        found = body.get("items") or []
        items.extend(map(slim, found) if slim else found)
        stats.parse_seconds += time.perf_counter() - parsing
        metadata = body.get("metadata") or {}
        token = str(metadata.get("continue") or "")
        if not token:
            stats.objects, stats.seconds = len(items), time.perf_counter() - stats.began
            return items, str(metadata.get("resourceVersion") or "")


MAX_EVENT = 16 * 2**20
"""The longest watch event read (bytes): an object the apiserver accepts is at most about 1.5 MiB
in etcd and 3 MiB in a request, so anything longer is not a Kubernetes object."""
CHUNK = 2**20


async def event_lines(content: aiohttp.StreamReader, limit: int = MAX_EVENT) -> AsyncIterator[bytes]:
    """The non-empty lines of a watch stream, however long. (aiohttp's own line iteration gives up
    on a line above 512 KiB, and an NRT of 128 zones is longer: one such object would break the
    watch, and force a relist, for every other object.) Raises ValueError past ``limit``."""
    pending = bytearray()
    searched = 0  # bytes of ``pending`` known to hold no newline
    async for chunk in content.iter_chunked(CHUNK):
        pending += chunk
        start = 0
        while (end := pending.find(b"\n", max(start, searched))) >= 0:
            line = bytes(pending[start:end])
            if line.strip():
                yield line
            start = end + 1
        del pending[:start]
        searched = len(pending)
        if searched > limit:
            raise ValueError(f"a watch event longer than {limit} bytes")
    if pending.strip():
        yield bytes(pending)


RETRY_FIRST = 0.5
RETRY_MAX = 2.0
"""Seconds between attempts while the apiserver is away: a failed list costs little, and a
restarted apiserver should be followed again within a few seconds of being back."""


class WatchError(RuntimeError):
    """The apiserver ended a watch with an error."""

    def __init__(self, code: object, message: object) -> None:
        super().__init__(f"watch error {code}: {message}")
        self.code = code
        self.expired = code == 410
        """The resourceVersion is too old: list again at once (not a failure)."""


INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""The annotation of the bookmark that ends a streaming list's objects."""
STREAM_REFUSED = (400, 422)
"""How an apiserver without streaming lists (WatchList) answers a watch with sendInitialEvents."""


async def follow(
    lister: Callable[..., Awaitable[Any]],
    listed: Callable[[Items], None],
    changed: Callable[[str, dict[str, Any]], None],
    what: str,
    slim: Slim | None = None,
    measured: Callable[[ListStats], None] | None = None,
    stream: bool = False,
    **params: str,
) -> None:
    """``listed(items)`` once, then ``changed(type, object)`` per ADDED, MODIFIED or DELETED event;
    with ``slim``, of what it keeps of each object; ``measured(stats)`` before each ``listed``.

    ``lister`` is a client list call (``CoreV1Api.list_node`` and the like). A watch that times
    out goes on from the last resourceVersion seen (bookmarks keep it fresh); an expired one
    (410 Gone) lists again at once; a failed one (the apiserver restarting) lists again after a
    short backoff, reset by the next good list. An error answer is never taken for data: the
    objects already given stay until a good list replaces them. One log line says a watch failed,
    one that it is back; the attempts between are debug.

    With ``stream``, each list is a streaming list: a watch that first sends every object as of
    now (``sendInitialEvents``, served from the apiserver's watch cache, as fresh as a list's),
    then a bookmark, and goes on as the watch. Objects are parsed as they arrive, no page waits for
    the one before, and, a watch being long-running, a large list is not cut off by the apiserver's
    request timeout. An apiserver that does not serve streaming lists gets paginated lists.
    """
    await _Follower(lister, listed, changed, what, slim, measured, stream, params).run()


class _Follower:
    def __init__(
        self,
        lister: Callable[..., Awaitable[Any]],
        listed: Callable[[Items], None],
        changed: Callable[[str, dict[str, Any]], None],
        what: str,
        slim: Slim | None,
        measured: Callable[[ListStats], None] | None,
        stream: bool,
        params: dict[str, str],
    ) -> None:
        self.lister, self.listed, self.changed, self.what = lister, listed, changed, what
        self.slim, self.measured, self.stream, self.params = slim, measured, stream, params
        self.outage = Outage(logger, f"watch of {what}")
        self.backoff = RETRY_FIRST
        self.version: str | None = None  # None: list (again)
        self.initial: tuple[Items, ListStats] | None = None
        """A streaming list under way: its objects so far, and its figures."""

    async def run(self) -> None:
        while True:
            try:
                self.initial = None
                if self.version is None and not self.stream:
                    stats = ListStats()
                    items, self.version = await list_objects(self.lister, self.slim, stats, **self.params)
                    self._listed(items, stats)
                elif self.version is None:
                    self.initial = ([], ListStats(pages=1))
                await self._watch()
                if self.initial is not None:  # the stream ended before all its objects came: again
                    self.version = None
            except asyncio.CancelledError:
                raise
            except WatchError as exc:
                self.version = None
                if self.initial is not None and exc.code in STREAM_REFUSED:
                    logger.info("%s: no streaming lists here (%s); listing page by page", self.what, exc)
                    self.stream = False
                elif not exc.expired:
                    self.backoff = await _failed(self.outage, exc, self.backoff)
            except Exception as exc:  # the apiserver away, a connection reset, a body that is not JSON
                self.version = None
                self.backoff = await _failed(self.outage, exc, self.backoff)

    def _listed(self, items: Items, stats: ListStats) -> None:
        if self.measured is not None:
            self.measured(stats)
        self.listed(items)
        self.outage.ok()
        self.backoff = RETRY_FIRST

    async def _watch(self) -> None:
        """One watch (a streaming list's when no version is known) until it ends."""
        if self.initial is None:
            start: dict[str, Any] = {"resource_version": self.version}
        else:
            start = {"send_initial_events": "true", "resource_version_match": "NotOlderThan"}
        response = await self.lister(
            watch=True,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
            _request_timeout=WATCH_TIMEOUT,
            **start,
            **self.params,
        )
        try:
            if not 200 <= response.status < 300:
                body = orjson.loads(await response.read() or b"{}")
                raise WatchError(response.status, body.get("message") if isinstance(body, dict) else body)
            async for line in event_lines(response.content):
                parsing = time.perf_counter()
                event = orjson.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise WatchError(status.get("code"), status.get("message"))
                self.version = event["object"]["metadata"].get("resourceVersion") or self.version
                if self.initial is not None:
                    self._initial_event(event, len(line), parsing)
                elif event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    self.changed(event["type"], self.slim(event["object"]) if self.slim else event["object"])
        finally:
            response.release()

    def _initial_event(self, event: dict[str, Any], size: int, parsing: float) -> None:
        """One event of a streaming list: an object, or the bookmark that says they have all come."""
        assert self.initial is not None
        items, stats = self.initial
        kind, obj = event.get("type"), event["object"]
        if kind == "ADDED":
            items.append(self.slim(obj) if self.slim else obj)
        stats.bytes += size
        stats.parse_seconds += time.perf_counter() - parsing
        if kind == "BOOKMARK" and (obj["metadata"].get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
            stats.objects, stats.seconds = len(items), time.perf_counter() - stats.began
            self.initial = None
            self._listed(items, stats)


async def _failed(outage: Outage, exc: Exception, backoff: float) -> float:
    """Say it (once per outage) and wait; returns the next backoff."""
    outage.failed(exc, f"retrying every {RETRY_FIRST}-{RETRY_MAX:.0f}s")
    await asyncio.sleep(backoff)
    return min(RETRY_MAX, backoff * 2)
