"""Pods the kubelet rejected with TopologyAffinityError: hand them back to their controller.

A failed pod is never rescheduled; its controller only replaces it once it is deleted. Pods
owned by a ReplicaSet, StatefulSet or Job are deleted, at most once per backoff period per
owner (doubling while the owner keeps failing), so the new pod gets a fresh, NUMA-aware
placement. Standalone pods get an Event only: deleting them would lose them.
"""

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client import Counter

from toposched.apis.constants import SCHEDHOOK_COMPONENT
from toposched.kube import rest
from toposched.kube.events import post_event
from toposched.kube.outage import Outage, every
from toposched.kube.watch import list_objects

logger = logging.getLogger(__name__)

TOPOLOGY_AFFINITY_ERRORS = Counter(
    "toposched_topology_affinity_errors_total",
    "Pods the kubelet rejected with TopologyAffinityError, each counted once when the remediation controller first "
    "sees it, by what it did (deleted for its controller to recreate, or reported: no controller).",
    ["action"],
)
for _action in ("deleted", "reported"):  # at 0 from the start: an increase over no series is none
    TOPOLOGY_AFFINITY_ERRORS.labels(_action)
REASON = "TopologyAffinityError"
EVENT_REASON = "TopologyAffinityRemediation"
CONTROLLERS = ("ReplicaSet", "StatefulSet", "Job")


@dataclass
class Backoff:
    initial: float = 10.0
    maximum: float = 300.0
    next_allowed: dict[str, float] = field(default_factory=dict)
    delay: dict[str, float] = field(default_factory=dict)

    def allow(self, owner: str, now: float) -> bool:
        if now < self.next_allowed.get(owner, 0.0):
            return False
        delay = min(self.maximum, self.delay.get(owner, self.initial / 2) * 2)
        self.delay[owner] = delay
        self.next_allowed[owner] = now + delay
        return True


def decide(phase: str | None, reason: str | None, owners: list[Mapping[str, object]]) -> tuple[str, str | None]:
    """("delete", owner key) | ("event", None) | ("ignore", None) for one pod."""
    if phase != "Failed" or reason != REASON:
        return "ignore", None
    controller = next((o for o in owners if o.get("controller") and o.get("kind") in CONTROLLERS), None)
    if controller is None:
        return "event", None
    return "delete", f"{controller['kind']}/{controller['name']}"


async def remediate_forever(api: rest.Kube, period: float = 5.0, backoff: Backoff | None = None) -> None:
    failed_pods = api.lister(rest.path("", "v1", "pods"))
    backoff = backoff or Backoff()
    reported: set[str] = set()
    counted: set[str] = set()
    """The failed pods already counted in the metric (while they are listed)."""

    async def step() -> None:
        pods, _ = await list_objects(failed_pods, field_selector="status.phase=Failed")
        failed = set()
        for pod in pods:
            meta, status = pod["metadata"], pod.get("status") or {}
            action, owner = decide(status.get("phase"), status.get("reason"), meta.get("ownerReferences") or [])
            key = f"{meta['namespace']}/{meta['name']}/{meta.get('uid')}"
            if action != "ignore":
                failed.add(key)
                if key not in counted:
                    TOPOLOGY_AFFINITY_ERRORS.labels("deleted" if action == "delete" else "reported").inc()
            body = {"apiVersion": "v1", "kind": "Pod", **pod}
            if action == "delete" and owner is not None:
                if backoff.allow(f"{meta['namespace']}/{owner}", time.monotonic()):
                    message = f"deleted so that {owner} recreates it on a node that can align it"
                    await post_event(api, body, "Warning", EVENT_REASON, message, SCHEDHOOK_COMPONENT)
                    try:
                        await api.delete(rest.path("", "v1", "pods", meta["namespace"], meta["name"]))
                    except rest.ApiError as exc:
                        if exc.status != 404:  # already gone: what the deletion wanted
                            raise
                    logger.info("deleted %s (TopologyAffinityError, owner %s)", key, owner)
            elif action == "event" and key not in reported:
                reported.add(key)
                message = "failed with TopologyAffinityError; not deleted (it has no controller)"
                await post_event(api, body, "Warning", EVENT_REASON, message, SCHEDHOOK_COMPONENT)

        counted.intersection_update(failed)  # the pods gone need not be remembered
        counted.update(failed)

    await every(period, Outage(logger, "remediation"), step)
