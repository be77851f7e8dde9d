"""Lease-based leader election: of several operator replicas only the holder writes.

Followers keep their watches and indexes warm, so a new leader takes over with a full view
and reconciles everything once.

The rules are client-go's (coordination.k8s.io/v1 Lease): a Lease is free when nobody holds it
or when its record has not changed for ``leaseDurationSeconds`` as measured by *this* replica's
clock since it last saw it change (never by comparing ``renewTime`` with our clock: the clocks
of two machines differ). Every write carries the resourceVersion it read, so of two replicas
that both find the Lease free only one wins. A leader that cannot renew within
``RENEW_DEADLINE`` stops acting before another replica may take over.
"""

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from toposched.kube import rest

logger = logging.getLogger(__name__)

LEASE_DURATION = 15
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0


@dataclass
class Observed:
    """The Lease record last seen, and when (monotonic, this replica's clock)."""

    record: tuple[Any, ...] | None = None
    at: float = 0.0


def record_of(lease: dict[str, Any]) -> tuple[Any, ...]:
    spec = lease.get("spec") or {}
    return (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"))


def may_take(lease: dict[str, Any], identity: str, observed: Observed, now: float) -> bool:
    """Whether ``identity`` may write itself into ``lease`` now (updates ``observed``)."""
    record = record_of(lease)
    if record != observed.record:
        observed.record, observed.at = record, now
    holder, _, duration = record
    if not holder or holder == identity:
        return True
    return now >= observed.at + float(duration or LEASE_DURATION)


def claimed(lease: dict[str, Any] | None, identity: str, stamp: str) -> dict[str, Any]:
    """The Lease with ``identity`` as holder, renewed at ``stamp`` (a new one when ``lease`` is None)."""
    spec = dict((lease or {}).get("spec") or {})
    if spec.get("holderIdentity") != identity:
        spec["acquireTime"] = stamp
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if lease else 0)
    spec.update(holderIdentity=identity, leaseDurationSeconds=LEASE_DURATION, renewTime=stamp)
    return {**(lease or {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}), "spec": spec}


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Leadership:
    def __init__(self) -> None:
        self.leading = asyncio.Event()
        self.failing = False
        """Campaigning fails (said once per outage)."""

    def grant_unconditionally(self) -> None:
        """Single-replica mode (leader election off)."""
        self.leading.set()

    async def run(
        self,
        api: rest.Kube,
        namespace: str,
        name: str,
        identity: str,
        on_elected: Callable[[], Awaitable[None]],
    ) -> None:
        """Campaign forever: hold the Lease while possible, campaign again when it is lost."""
        observed = Observed()
        renewed = time.monotonic()
        try:
            while True:
                try:
                    held = await self._try(api, namespace, name, identity, observed)
                    if self.failing:
                        logger.info("leader election works again")
                    self.failing = False
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the apiserver may be restarting: keep campaigning
                    # One line per outage (the apiserver may be away for a while), no traceback.
                    if not self.failing:
                        logger.warning("leader election failed (%s); retrying every 2s", str(exc) or type(exc).__name__)
                    else:
                        logger.debug("leader election still failing: %s", exc)
                    self.failing = True
                    held = False
                now = time.monotonic()
                if held:
                    renewed = now
                    if not self.leading.is_set():
                        logger.info("leading as %s (lease %s/%s)", identity, namespace, name)
                        self.leading.set()
                        await on_elected()
                elif self.leading.is_set() and now - renewed >= RENEW_DEADLINE:
                    logger.warning("lost the lease %s/%s; following", namespace, name)
                    self.leading.clear()
                await asyncio.sleep(RETRY_PERIOD * (1 + (0 if self.leading.is_set() else 0.2 * random.random())))
        except asyncio.CancelledError:
            if self.leading.is_set():
                await self._release(api, namespace, name, identity)
            raise

    async def _try(self, api: rest.Kube, namespace: str, name: str, identity: str, observed: Observed) -> bool:
        """One attempt to acquire or renew; False when another replica holds the Lease."""
        url = rest.path("coordination.k8s.io", "v1", "leases", namespace, name)
        try:
            lease = await api.get(url)
        except rest.ApiError as exc:
            if exc.status != 404:
                raise
            body = claimed(None, identity, _stamp())
            body["metadata"] = {"name": name, "namespace": namespace}
            try:
                await api.create(rest.path("coordination.k8s.io", "v1", "leases", namespace), body)
            except rest.ApiError as conflict:
                if conflict.status == 409:  # another replica created it first
                    return False
                raise
            return True
        if not may_take(lease, identity, observed, time.monotonic()):
            return False
        try:
            # The resourceVersion read above travels in metadata: a write by another replica
            # since then makes this one fail with 409.
            await api.replace(url, claimed(lease, identity, _stamp()))
        except rest.ApiError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def _release(self, api: rest.Kube, namespace: str, name: str, identity: str) -> None:
        """On a clean shutdown hand the Lease back, so a successor need not wait for it to expire."""
        self.leading.clear()
        url = rest.path("coordination.k8s.io", "v1", "leases", namespace, name)
        try:
            async with asyncio.timeout(3):
                lease = await api.get(url)
                if (lease.get("spec") or {}).get("holderIdentity") == identity:
                    await api.patch(url, {"spec": {"holderIdentity": None, "leaseDurationSeconds": 1}})
                    logger.info("released the lease %s/%s", namespace, name)
        except Exception as exc:  # best effort: the lease expires anyway
            logger.warning("could not release the lease %s/%s: %s", namespace, name, exc)
