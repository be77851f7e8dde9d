"""Waking the pods the filter refused, once room may have freed in the extender's view.

Every ``TICK`` seconds (what changed within one tick counts once) the room watch says whether room
may have freed; the pods refused before that are then due (``wakeups``: each at most once per its
own wait, within a budget a second) and each is woken by a JSON merge patch of one annotation
(``REQUEUED_AT_ANNOTATION``). The update is an event kube-scheduler watches, so it tries the pod
again within its backoff (1-10 s) instead of at its 5-minute retry of unschedulable pods.

The patch changes nothing the user wrote, and carries the pod's uid, so a pod deleted and created
again under the same name is left alone (422). A pod gone (404), changed under us (409) or
refused (422) is skipped and forgotten; an apiserver that does not answer drops the round (said
once per outage; kube-scheduler's own retry still comes). Only the acting replica wakes.

When this replica starts acting (the process started, or its scheduler took the Lease over), it
first lists the unbound pods and adopts those kube-scheduler holds as refused by the extender
(``wakeups.refused_earlier``): the process that refused them, and what it knew, may be gone, and
kube-scheduler watches none of what frees their room. A failed list is tried again next tick.
"""

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime

from prometheus_client import Counter

from toposched.apis.constants import REQUEUED_AT_ANNOTATION
from toposched.kube import rest
from toposched.kube.outage import Outage, every
from toposched.schedhook.extender.acting import Acting
from toposched.schedhook.extender.roomwatch import RoomWatch
from toposched.schedhook.extender.store import ObjectStore, store_key
from toposched.schedhook.extender.wakeups import Refused, Wakeups, refused_earlier

logger = logging.getLogger(__name__)
WOKEN = Counter(
    "toposched_extender_pods_woken_total",
    "Pods the extender refused, woken (an annotation patched) once room may have freed in its view, "
    "for kube-scheduler to try them again.",
)
TICK = 0.5
"""Seconds between two looks at the room: the changes within one are one trigger."""
SKIPPED = (404, 409, 422)
"""Answers that concern the pod alone: it is skipped, not the round."""
PAGE = 500
"""Pods per page of the unbound pods' list when starting to act."""
UNBOUND = {"fieldSelector": "spec.nodeName="}


@dataclass
class Requeue:
    wakeups: Wakeups
    watch: RoomWatch
    store: ObjectStore
    api: rest.Kube
    acting: Acting | None = None
    """Who acts (None: this replica always does)."""
    _swept: bool = field(default=False, init=False)
    """The pods refused before this replica acted are adopted (reset when it stops acting)."""

    async def round(self) -> int:
        """Look at the room, and wake the pods due; how many were woken."""
        freed = self.watch.freed()
        if freed:
            logger.debug("room may have freed: %s", ", ".join(freed))
            self.wakeups.freed()
        if self.acting is not None and self.acting.why_not():
            self._swept = False
            return 0  # the standby: its scheduler does not call it, so it refused no pod anyway
        if not self._swept:
            await self._sweep()
        due = self.wakeups.due(self._bound)
        woken: list[str] = []
        for uid, pod in due:
            try:
                await self._patch(uid, pod)
            except rest.ApiError as exc:
                if exc.status not in SKIPPED:
                    raise
                logger.debug("not waking pod %s/%s: %s", pod.namespace, pod.name, exc)
                self.wakeups.forget(uid)
                continue
            WOKEN.inc()
            woken.append(f"{pod.namespace}/{pod.name} ")
        if woken:
            logger.debug("woke refused pods for kube-scheduler to try again (room may have freed): %s", "".join(woken))
        return len(woken)

    async def _sweep(self) -> None:
        """Adopt the pods kube-scheduler holds as refused by the extender (before this replica acted)."""
        found = []
        params = {**UNBOUND, "limit": str(PAGE)}
        while True:
            page = await self.api.get(rest.path("", "v1", "pods"), **params)
            found += [pod for item in page.get("items") or [] if (pod := refused_earlier(item))]
            params["continue"] = str((page.get("metadata") or {}).get("continue") or "")
            if not params["continue"]:
                break
        self._swept = True
        adopted = self.wakeups.adopt(found)
        if adopted:
            logger.info("acting: %d pod(s) refused before will be tried again (room may have freed meanwhile)", adopted)

    def _bound(self, uid: str, pod: Refused) -> bool:
        """Bound since, by any binder: the store holds bound pods only."""
        body = self.store.objects["pods"].get(store_key(pod.namespace, pod.name)) or {}
        return (body.get("metadata") or {}).get("uid") == uid

    async def _patch(self, uid: str, pod: Refused) -> None:
        at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        body = {"metadata": {"uid": uid, "annotations": {REQUEUED_AT_ANNOTATION: at}}}
        await self.api.patch(rest.path("", "v1", "pods", pod.namespace, pod.name), body)


async def wake_forever(requeue: Requeue, tick: float = TICK) -> None:
    """A round every ``tick`` seconds, from once the store has synced, until cancelled."""
    await requeue.store.synced.wait()

    async def step() -> None:
        await requeue.round()

    await every(tick, Outage(logger, "waking the pods the extender refused"), step)
