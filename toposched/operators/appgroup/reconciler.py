"""The AppGroup reconciler: writes the status an AppGroup should have when it differs.

Level-triggered: every AppGroup event and every member-pod event leads to "compute the status
the object should have; write it if it differs". Nothing is stored on the user's object
(no Kopf annotations, no finalizers, no spec writes), and a restart simply recomputes.
"""

import logging
import time
from collections import Counter
from datetime import UTC, datetime

from pydantic import ValidationError

from toposched.apis.appgroup import AppGroup
from toposched.apis.errors import describe
from toposched.operators import k8s, metrics
from toposched.operators.appgroup.status import reconcile
from toposched.operators.coalescer import Coalescer
from toposched.operators.indexes import Bodies, Key, PodViews
from toposched.operators.invalid import report_invalid
from toposched.operators.runtime import Runtime

logger = logging.getLogger(__name__)


class AppGroupReconciler:
    """Writes the status of one AppGroup at a time; shared by every AppGroup handler."""

    def __init__(self, runtime: Runtime, bodies: Bodies, pods: PodViews) -> None:
        self.runtime = runtime
        self.bodies = bodies
        self.pods = pods
        self.coalescer: Coalescer[Key] = Coalescer(self._reconcile, delay=runtime.settings.coalesce_seconds)
        # Last status written per object uid: an index may lag our own write by one event.
        self.last_written: dict[str, bytes] = {}
        self.ready: dict[str, tuple[str, str]] = {}
        self.invalid: dict[str, str] = {}
        """uid -> the InvalidSpec message last reported for an AppGroup that cannot be read."""

    async def reconcile_all(self) -> None:
        for key in list(self.bodies):
            self.coalescer.poke(key)

    async def _reconcile(self, key: Key) -> None:
        if not self.runtime.leadership.leading.is_set():
            return
        found = list(self.bodies.get(key, []))
        if not found:
            return  # deleted meanwhile
        body = found[-1]
        started = time.perf_counter()
        try:
            appgroup = AppGroup.from_dict(body)
        except ValidationError as exc:
            await report_invalid(self.runtime, AppGroup, key, body, describe(exc), self.invalid)
            return
        now = datetime.now(UTC).replace(microsecond=0)
        result = reconcile(appgroup, self.pods.get(key, []), now)
        desired = result.status.to_dict()
        current = appgroup.status.to_dict() if appgroup.status else {}
        uid = str(appgroup.metadata.get("uid"))
        written = k8s.digest(desired)
        if desired != current and written != self.last_written.get(uid):
            try:
                await k8s.patch_status(self.runtime.api, AppGroup, key[0], key[1], desired)
            except Exception as exc:
                metrics.RECONCILE_ERRORS.labels("AppGroup", type(exc).__name__).inc()
                raise
            self.last_written[uid] = written
            metrics.STATUS_WRITES.labels("AppGroup").inc()
            for warning in result.warnings:
                logger.warning("AppGroup %s/%s: %s", key[0], key[1], warning.message)
                await self.runtime.post_warning(body, warning.reason, warning.message)
        metrics.RECONCILE_SECONDS.labels("AppGroup").observe(time.perf_counter() - started)
        ready = next((c for c in result.status.conditions or [] if c.type == "Ready"), None)
        if ready is not None:
            self.ready[uid] = (ready.status, ready.reason or "")
            self._publish_gauge()

    def forget(self, uid: str, key: Key) -> None:
        self.last_written.pop(uid, None)
        self.ready.pop(uid, None)
        self.invalid.pop(uid, None)
        self.coalescer.forget(key)
        self._publish_gauge()

    def _publish_gauge(self) -> None:
        metrics.APPGROUPS.clear()
        for (status, reason), count in Counter(self.ready.values()).items():
            metrics.APPGROUPS.labels(status, reason).set(count)
