"""The controller that lifts topology-order gates: pure decision in ``order_gates``, I/O here."""

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from toposched.apis.constants import APPGROUP_LABEL, ORDER_GATE, SCHEDHOOK_COMPONENT, WORKLOAD_LABEL
from toposched.kube import rest
from toposched.kube.events import post_event
from toposched.kube.outage import Outage, every
from toposched.kube.watch import list_objects
from toposched.schedhook.controllers.order_gates import GatedPod, to_release

logger = logging.getLogger(__name__)

OrderLookup = Callable[[str, str], Mapping[str, int] | None]
"""(namespace, AppGroup name) -> workload selector -> index in status.topologyOrder, or None."""


async def release_gates_forever(
    api: rest.Kube,
    order_of: OrderLookup,
    wait: timedelta,
    period: float = 1.0,
    settle: timedelta = timedelta(seconds=2),
) -> None:
    """Every ``period``: lift the topology-order gate of the pods whose turn has come."""
    pods_of_all = api.lister(rest.path("", "v1", "pods"))

    async def step() -> None:
        pods, _ = await list_objects(pods_of_all, label_selector=APPGROUP_LABEL)
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for pod in pods:
            meta = pod["metadata"]
            groups.setdefault((meta["namespace"], meta["labels"][APPGROUP_LABEL]), []).append(pod)
        for (namespace, group), members in groups.items():
            if any(_gated(p) for p in members):
                await _release(api, namespace, members, order_of(namespace, group), wait, settle)

    await every(period, Outage(logger, "releasing gated pods"), step)


async def _release(
    api: rest.Kube,
    namespace: str,
    members: list[dict[str, Any]],
    order: Mapping[str, int] | None,
    wait: timedelta,
    settle: timedelta,
) -> None:
    views = [
        GatedPod(
            p["metadata"]["name"],
            (p["metadata"].get("labels") or {}).get(WORKLOAD_LABEL),
            _created(p),
            _gated(p),
            bool((p.get("spec") or {}).get("nodeName")),
        )
        for p in members
    ]
    by_name = {p["metadata"]["name"]: p for p in members}
    for release in to_release(views, order, datetime.now(UTC), wait, settle):
        # Remove only our gate; other gates are someone else's business.
        await api.patch(
            rest.path("", "v1", "pods", namespace, release.pod),
            {"spec": {"schedulingGates": [{"name": ORDER_GATE, "$patch": "delete"}]}},
            rest.STRATEGIC_MERGE_PATCH,
        )
        if release.reason == "timeout":
            message = f"released after waiting {wait.total_seconds():.0f}s for earlier workloads"
            pod = {"apiVersion": "v1", "kind": "Pod", **by_name[release.pod]}
            await post_event(api, pod, "Warning", "TopologyOrderTimeout", message, SCHEDHOOK_COMPONENT)


def _created(pod: Mapping[str, Any]) -> datetime:
    stamp = pod["metadata"].get("creationTimestamp")
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return datetime.now(UTC)


def _gated(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == ORDER_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or [])
