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
        self.failing = False
        """Campaigning fails (said once per outage)."""

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
            self.failing = False
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
                if self.leading.is_set():
                    await self._release(api, namespace, name, identity)
                raise
            except Exception as exc:  # the apiserver may be restarting: keep campaigning
                # One line per outage (the apiserver may be away for a while), no traceback.
                if not self.failing:
                    logger.warning("leader election failed (%s); retrying every 2s", str(exc) or type(exc).__name__)
                else:
                    logger.debug("leader election still failing: %s", exc)
                self.failing = True
                self.leading.clear()
            await asyncio.sleep(2)

    async def _release(self, api: client.ApiClient, namespace: str, name: str, identity: str) -> None:
        """On a clean shutdown hand the Lease back, so a successor need not wait for it to expire."""
        self.leading.clear()
        coordination = client.CoordinationV1Api(api)
        try:
            async with asyncio.timeout(3):
                lease = await coordination.read_namespaced_lease(name, namespace)
                if lease.spec.holder_identity == identity:
                    await coordination.patch_namespaced_lease(
                        name, namespace, {"spec": {"holderIdentity": None, "leaseDurationSeconds": 1}}
                    )
                    logger.info("released the lease %s/%s", namespace, name)
        except Exception as exc:  # best effort: the lease expires anyway
            logger.warning("could not release the lease %s/%s: %s", namespace, name, exc)
