"""Pinning a pod's DRA claims to the NUMA node its CPUs will be pinned on. Pure.

kube-scheduler's allocator takes the first device that fits, in a fixed order; on a node whose
free CPUs are on NUMA 1 it may pick a GPU on NUMA 0 while one on NUMA 1 is free, and toposched
must then pass over the node. A claim made for a pod that asks for it (or, by the cluster's
setting, every such claim) gets, at creation, a selector keeping its devices on one NUMA node k,
chosen as the node where most candidate nodes will pin the pod's CPUs and have such a device free;
the extender then passes only nodes whose predicted CPU zone is k. A claim's spec is immutable
after creation, so k is chosen before any node is: another k later means another pod.

The selector mirrors ``apis.resourceslice.device_numa``: the first attribute of ``NUMA_ATTRIBUTES``
a device has decides, each read only where present (an unknown field aborts the allocation).
"""

from collections.abc import Mapping
from typing import Any, Final

from toposched.apis.resourceslice import NO_NUMA_NODE, NUMA_ATTRIBUTES

PIN_ANNOTATION: Final = "toposched.io/dra-pin-numa"
"""On a pod: "true" pins its claims, "false" never (else the cluster's setting). On a claim: the
NUMA node its selector keeps it on."""
POD_CLAIM_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
"""Set by the resourceclaim controller on the claims it makes from a pod's templates."""
EXTENDED_RESOURCE_ANNOTATION: Final = "resource.kubernetes.io/extended-resource-name"
"""Set by kube-scheduler on the claims it makes for DRA-backed extended resources: never pinned."""


def numa_expression(k: int) -> str:
    """A CEL selector true of a device on NUMA node ``k`` (and of no device without one)."""
    expression = "false"
    for name in reversed(NUMA_ATTRIBUTES):
        domain, _, attribute = name.rpartition("/")
        where = f'device.attributes["{domain}"]'
        expression = f'("{attribute}" in {where} ? {where}.{attribute} == {k} : {expression})'
    return expression


def owner_pod(claim: Mapping[str, Any]) -> str | None:
    """The name of the pod a claim was made for from its template, None for any other claim."""
    meta = claim.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if POD_CLAIM_ANNOTATION not in annotations or EXTENDED_RESOURCE_ANNOTATION in annotations:
        return None
    owners = [o for o in meta.get("ownerReferences") or () if isinstance(o, dict) and o.get("kind") == "Pod"]
    return str(owners[0].get("name")) if owners and owners[0].get("controller") else None


def wants_pin(pod: Mapping[str, Any], default: bool) -> bool:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(PIN_ANNOTATION)
    return default if value not in ("true", "false") else value == "true"


def selector_targets(claim: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Where a claim's devices are selected: each request's ``exactly`` and each alternative of its
    ``firstAvailable`` list, with its JSON pointer (the objects themselves, not copies)."""
    found: list[tuple[str, dict[str, Any]]] = []
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    for i, request in enumerate(requests):
        if not isinstance(request, dict):
            continue
        targets = [(f"/spec/devices/requests/{i}/exactly", request.get("exactly"))]
        targets += [
            (f"/spec/devices/requests/{i}/firstAvailable/{j}", sub)
            for j, sub in enumerate(request.get("firstAvailable") or ())
        ]
        found += [(path, target) for path, target in targets if isinstance(target, dict)]
    return found


def pin_selector(k: int) -> dict[str, Any]:
    return {"cel": {"expression": numa_expression(k)}}


def pin_patch(claim: Mapping[str, Any], k: int) -> list[dict[str, Any]]:
    """JSON patch operations adding the NUMA-``k`` selector to every request of the claim (each
    alternative of a firstAvailable list too) and recording ``k`` in its annotations."""
    selector = pin_selector(k)
    ops = [
        {"op": "add", "path": f"{path}/selectors/-", "value": selector}
        if target.get("selectors")
        else {"op": "add", "path": f"{path}/selectors", "value": [selector]}
        for path, target in selector_targets(claim)
    ]
    return [*ops, *_annotate(claim, str(k))] if ops else []


def _annotate(claim: Mapping[str, Any], value: str) -> list[dict[str, Any]]:
    if (claim.get("metadata") or {}).get("annotations"):
        return [{"op": "add", "path": f"/metadata/annotations/{_escape(PIN_ANNOTATION)}", "value": value}]
    return [{"op": "add", "path": "/metadata/annotations", "value": {PIN_ANNOTATION: value}}]


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


UNPINNED: Final = "none"
"""The pin annotation of a claim left as written (its pod asked, and no NUMA node would do better)."""


def choose(fitting: Mapping[int | None, int], pending: Mapping[str, int]) -> int | None:
    """Where to keep a new claim: the NUMA node, or None (as written), with the most room left
    (``fitting``: how many pods of its shape the candidate nodes take aligned) once the claims
    decided the same way and not allocated yet (``pending``, by pin annotation) are taken off -- a
    burst of pods spreads over the NUMA nodes instead of crowding one. As written wins a tie, then
    the lowest node."""

    def left(option: int | None) -> tuple[int, int, int]:
        label = UNPINNED if option is None else str(option)
        return fitting[option] - pending.get(label, 0), option is None, -(option or 0)

    best = max(fitting, key=left, default=None)
    return best if best is not None and best != NO_NUMA_NODE and fitting[best] > 0 else None


def decision_patch(claim: Mapping[str, Any], k: int | None) -> list[dict[str, Any]]:
    """``pin_patch`` for a NUMA node; for None, only the annotation saying it was left as written."""
    if k is not None:
        return pin_patch(claim, k)
    return _annotate(claim, UNPINNED)
