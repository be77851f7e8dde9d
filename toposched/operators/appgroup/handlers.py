"""Kopf glue for AppGroups: the indexes, and the events that reach the reconciler
(``appgroup.reconciler``) through the memo."""

from typing import Any

import kopf

from toposched.apis.constants import APPGROUP_GROUP, APPGROUP_LABEL, APPGROUP_PLURAL, APPGROUP_VERSION, WORKLOAD_LABEL
from toposched.operators import k8s
from toposched.operators.appgroup.status import PodView, pod_view
from toposched.operators.indexes import Key
from toposched.operators.memo import OperatorMemo

RESOURCE = (APPGROUP_GROUP, APPGROUP_VERSION, APPGROUP_PLURAL)


@kopf.index(*RESOURCE)
def appgroup_bodies(namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[Key, dict[str, Any]]:
    return {(namespace or "", name): k8s.kept_body(body)}


@kopf.index("pods", labels={APPGROUP_LABEL: kopf.PRESENT})
def appgroup_pods(
    namespace: str | None, labels: kopf.Labels, spec: kopf.Spec, status: kopf.Status, **_: Any
) -> dict[Key, PodView]:
    view = pod_view(status, node=spec.get("nodeName"), workload=labels.get(WORKLOAD_LABEL))
    return {(namespace or "", labels[APPGROUP_LABEL]): view}


@kopf.on.event(*RESOURCE)  # type: ignore[arg-type]
async def appgroup_event(
    event: kopf.RawEvent, namespace: str, name: str, uid: str, memo: OperatorMemo, **_: Any
) -> None:
    if event["type"] == "DELETED":
        memo.appgroups.forget(uid, (namespace, name))
        return
    await memo.appgroups.coalescer.run_now((namespace, name))


@kopf.on.event("pods", labels={APPGROUP_LABEL: kopf.PRESENT})
async def member_pod_event(namespace: str | None, labels: kopf.Labels, memo: OperatorMemo, **_: Any) -> None:
    memo.appgroups.coalescer.poke((namespace or "", labels[APPGROUP_LABEL]))
