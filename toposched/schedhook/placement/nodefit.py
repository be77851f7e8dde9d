"""Which nodes kube-scheduler's own filters leave a pod, as far as the node's labels and taints say:
``nodeSelector``, required node affinity and NoSchedule/NoExecute taints. Pure.

The extender is asked about the nodes these filters passed; a choice made before scheduling (the
claim webhook's NUMA node) must look at the same nodes. Resources, ports and pod affinity are not
judged here.
"""

from collections.abc import Mapping
from typing import Any


def selects(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Would kube-scheduler's NodeAffinity and TaintToleration filters pass the node for the pod?"""
    spec = pod.get("spec") or {}
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if affinity is not None:
        terms = affinity.get("nodeSelectorTerms") or []
        if not any(_term(t, labels, str(meta.get("name", ""))) for t in terms):
            return False
    tolerations = spec.get("tolerations") or []
    return all(
        _tolerated(taint, tolerations)
        for taint in (node.get("spec") or {}).get("taints") or ()
        if taint.get("effect") in ("NoSchedule", "NoExecute")
    )


def _term(term: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    """A node selector term: every expression holds (an empty term selects nothing)."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    return all(_holds(e, labels) for e in expressions) and all(_holds(f, {"metadata.name": name}) for f in fields)


def _holds(expression: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key, operator = expression.get("key", ""), expression.get("operator")
    wanted = [str(v) for v in expression.get("values") or ()]
    value = values.get(key)
    if operator == "In":
        return value in wanted
    if operator == "NotIn":
        return value not in wanted
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(wanted) == 1:
        try:
            number, bound = int(value), int(wanted[0])
        except ValueError:
            return False
        return number > bound if operator == "Gt" else number < bound
    return False


def _tolerated(taint: Mapping[str, Any], tolerations: list[Mapping[str, Any]]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") not in (None, "", taint.get("effect")):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration.get("key") == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", ""):
            return True
    return False
