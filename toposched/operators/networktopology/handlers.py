"""Kopf glue for NetworkTopologies: the index, and the events that reach the reconciler
(``networktopology.reconciler``) through the memo."""

from typing import Any

import kopf

from toposched.apis.constants import (
    APPGROUP_LABEL,
    NETWORKTOPOLOGY_GROUP,
    NETWORKTOPOLOGY_PLURAL,
    NETWORKTOPOLOGY_VERSION,
)
from toposched.operators import k8s
from toposched.operators.indexes import Key
from toposched.operators.memo import OperatorMemo

RESOURCE = (NETWORKTOPOLOGY_GROUP, NETWORKTOPOLOGY_VERSION, NETWORKTOPOLOGY_PLURAL)


@kopf.index(*RESOURCE)
def networktopology_bodies(namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[Key, dict[str, Any]]:
    return {(namespace or "", name): k8s.kept_body(body)}


@kopf.on.event(*RESOURCE)
async def networktopology_event(
    event: kopf.RawEvent, namespace: str | None, name: str, memo: OperatorMemo, **_: Any
) -> None:
    if event["type"] == "DELETED":
        return
    await memo.networktopologies.coalescer.run_now((namespace or "", name))


@kopf.on.event("configmaps")
async def configmap_event(namespace: str | None, name: str, memo: OperatorMemo, **_: Any) -> None:
    memo.networktopologies.poke_configmap(namespace or "", name)


@kopf.on.event("pods", labels={APPGROUP_LABEL: kopf.PRESENT})
async def placement_event(event: kopf.RawEvent, uid: str, spec: kopf.Spec, memo: OperatorMemo, **_: Any) -> None:
    """bandwidthAllocated follows placements: poke when a member pod is bound, moved or gone."""
    memo.networktopologies.placement_changed(uid, None if event["type"] == "DELETED" else spec.get("nodeName"))
