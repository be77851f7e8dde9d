"""Which replica acts: the one whose kube-scheduler holds the scheduler's Lease, as the apiserver says.

Run beside each kube-scheduler replica (a sidecar reached over loopback), the extender is called
only by its own scheduler, and kube-scheduler calls extenders only while it leads. This guard makes
sure of it anyway: a standby that is called (a scheduler that lost its Lease and does not know it
yet, a stray caller) refuses filter, prioritize and bind, so two replicas never both bind.

The Lease is read from the apiserver every ``poll`` seconds. Like client-go's leader election, no
clock is compared with another machine's: a Lease record (its resourceVersion changes at every
renewal) counts from when this process first saw it, on its own monotonic clock. Another replica
can take the Lease over only ``leaseDurationSeconds`` after it saw the last renewal, so this one
stops acting well before: ``duration - 2 * poll - margin`` after it first saw that renewal (it may
have seen it up to a poll late, and a bind takes a moment). A replica that cannot read the Lease
(the apiserver away, a partition) sees no renewal and so stops acting too.

A call that finds this replica standing by reads the Lease again at once (at most every
``REREAD`` seconds): its kube-scheduler calls only once it leads, so it may have taken the Lease
since the last poll. A new leader's extender so acts from its first call, not up to a poll later
(each refused pod would wait out kube-scheduler's backoff). The rule is the same; only the record
is newer.
"""

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import Gauge

from toposched.kube import rest
from toposched.kube.outage import Outage, every
from toposched.schedhook.extender.clientauth import OPEN_PATHS, Handler

logger = logging.getLogger(__name__)
ACTING = Gauge(
    "toposched_extender_acting",
    "1 while this extender acts (its kube-scheduler holds the Lease, as last read from the apiserver), else 0.",
)
POLL = 1.0
"""Seconds between reads of the Lease."""
MARGIN = 2.0
"""Seconds kept in hand for a bind under way and a slow read."""
REREAD = 0.1
"""Seconds between two reads of the Lease that refused calls ask for."""


@dataclass(frozen=True)
class LeaseRecord:
    holder: str
    version: str
    """resourceVersion: it changes at every renewal."""
    duration: float
    """leaseDurationSeconds."""


def record_of(lease: dict[str, Any]) -> LeaseRecord:
    spec = lease.get("spec") or {}
    version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
    return LeaseRecord(str(spec.get("holderIdentity") or ""), version, float(spec.get("leaseDurationSeconds") or 15))


def holds(holder: str, identity: str) -> bool:
    """Is ``holder`` the kube-scheduler of this pod? client-go names it ``<hostname>_<uuid>``."""
    return bool(identity) and (holder == identity or holder.startswith(identity + "_"))


def default_identity() -> str:
    """The pod's hostname: kube-scheduler's Lease identity starts with it (a sidecar shares it)."""
    return socket.gethostname()


class Acting:
    def __init__(
        self, identity: str, poll: float = POLL, margin: float = MARGIN, now: Callable[[], float] = time.monotonic
    ) -> None:
        self.identity = identity
        self.poll = poll
        self.margin = margin
        self.now = now
        self._record: LeaseRecord | None = None
        self._since = 0.0
        """When this process first saw the current record (its own monotonic clock)."""
        self._read_at = -REREAD
        self._read: Callable[[], Awaitable[None]] | None = None
        self._reading = asyncio.Lock()

    def observed(self, lease: dict[str, Any]) -> None:
        """The Lease as the apiserver just gave it."""
        record = record_of(lease)
        self._read_at = self.now()
        if record != self._record:
            self._record, self._since = record, self.now()

    def reads_with(self, read: Callable[[], Awaitable[None]]) -> None:
        """How to read the Lease into this object (``reread`` uses it)."""
        self._read = read

    async def reread(self) -> None:
        """Read the Lease again now, unless it was read less than ``REREAD`` seconds ago (callers
        at the same moment share one read). A failed read changes nothing: the poll says it."""
        if self._read is None:
            return
        async with self._reading:
            if self.now() - self._read_at < REREAD:
                return
            try:
                await self._read()
            except Exception as exc:  # the apiserver away: this replica keeps refusing
                logger.debug("reading the scheduler's Lease again failed: %s", exc)

    def why_not(self) -> str:
        """Why this replica must not act now; "" when it may."""
        record = self._record
        if record is None:
            return "this extender has not read its kube-scheduler's Lease yet"
        if not holds(record.holder, self.identity):
            holder = record.holder or "no one"
            return f"this extender is a standby: {holder} holds the scheduler's Lease, not {self.identity}"
        seen = self.now() - self._since
        if seen >= record.duration - 2 * self.poll - self.margin:
            return (
                f"the scheduler's Lease was last seen renewed {seen:.0f} s ago (it lasts {record.duration:.0f} s): "
                "another replica may be taking over"
            )
        return ""


async def follow_lease(api: rest.Kube, namespace: str, name: str, acting: Acting) -> None:
    """Read the Lease every ``acting.poll`` seconds into ``acting`` until cancelled (a failed read
    is said once per outage; meanwhile no renewal is seen)."""
    path = rest.path("coordination.k8s.io", "v1", "leases", namespace, name)
    ACTING.set_function(lambda: 0 if acting.why_not() else 1)

    async def read() -> None:
        acting.observed(await api.get(path))

    acting.reads_with(read)
    await every(acting.poll, Outage(logger, f"reading the scheduler's Lease {namespace}/{name}"), read)


def acting_only(acting: Acting) -> Middleware:
    """aiohttp middleware: the extender's verbs answer 503 with why while this replica must not act,
    as read again at the call (kube-scheduler then retries the pod); the probes always answer."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        why = acting.why_not()
        if why:
            await acting.reread()
            why = acting.why_not()
        if why:
            return web.json_response({"Error": f"toposched: {why}"}, status=503)
        return await handler(request)

    return guard
