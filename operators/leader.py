"""Lease-based leader election: of several operator replicas only the holder writes.

Followers keep their watches and indexes warm, so a new leader takes over with a full view
and reconciles everything once.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kubernetes_asyncio import client
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

logger = logging.getLogger(__name__)


class Leadership:
    def __init__(self) -> None:
        self.leading = asyncio.Event()

    def grant_unconditionally(self) -> None:
        """Single-replica mode (leader election off)."""
        self.leading.set()

    async def run(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        identity: str,
        on_elected: Callable[[], Awaitable[None]],
    ) -> None:
        """Campaign forever: hold the Lease while possible, campaign again when it is lost."""
        lock = LeaseLock(name, namespace, identity, api)

        async def started() -> None:
            logger.info("leading as %s (lease %s/%s)", identity, namespace, name)
            self.leading.set()
            await on_elected()

        async def stopped() -> None:
            logger.warning("lost the lease %s/%s; following", namespace, name)
            self.leading.clear()

        cfg = electionconfig.Config(
            lock,
            lease_duration=15,
            renew_deadline=10,
            retry_period=2,
            onstarted_leading=started,
            onstopped_leading=stopped,
        )
        while True:
            try:
                await leaderelection.LeaderElection(cfg).run()
            except asyncio.CancelledError:
                raise
            except Exception:  # the apiserver may be restarting: keep campaigning
                logger.exception("leader election failed; retrying")
                self.leading.clear()
            await asyncio.sleep(2)
