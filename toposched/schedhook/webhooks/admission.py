"""What the admission webhooks decide. Pure: AdmissionReview objects in, decisions out.

Mutating (pods): route pods to the toposched scheduler by the admin's rules, and gate pods of
an AppGroup (scheduling gate ``toposched.io/topology-order``) so they are released in topology
order. Pods that match no rule and belong to no AppGroup are never touched.
Validating: a malformed NUMA policy annotation on a pod or resources no machine has, an AppGroup
that does not parse (a selector that is not a label value, a minBandwidth beyond ``apis.limits``)
or whose dependencies cannot form a graph (unknown workload, duplicates, self-dependency).
"""

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from toposched.apis.appgroup import AppGroup
from toposched.apis.constants import APPGROUP_LABEL, NUMA_TOPOLOGY_SPEC_ANNOTATION, ORDER_GATE
from toposched.apis.errors import describe
from toposched.apis.graph import InvalidSpecError, build_graph
from toposched.schedhook.placement.parse import parse_pod
from toposched.schedhook.placement.podpolicy import PolicyError, parse_annotation

SCHEDULER_NAME = "toposched"


@dataclass(frozen=True)
class Rules:
    """Which pods are sent to the toposched scheduler."""

    namespaces: Sequence[str] = ()
    match_labels: Mapping[str, str] = field(default_factory=dict)
    gate_appgroup_pods: bool = True

    def routes(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.namespaces and namespace in self.namespaces:
            return True
        return bool(self.match_labels) and all(labels.get(k) == v for k, v in self.match_labels.items())


def mutate_pod(pod: Mapping[str, Any], namespace: str, rules: Rules) -> list[dict[str, Any]]:
    """JSON patch operations for a pod being created (empty when nothing changes)."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    labels = meta.get("labels") or {}
    ops: list[dict[str, Any]] = []
    scheduler = spec.get("schedulerName") or "default-scheduler"
    if scheduler == "default-scheduler" and rules.routes(namespace, labels):
        ops.append({"op": "add", "path": "/spec/schedulerName", "value": SCHEDULER_NAME})
        scheduler = SCHEDULER_NAME
    if (
        scheduler == SCHEDULER_NAME
        and APPGROUP_LABEL in labels
        and rules.gate_appgroup_pods
        and not spec.get("nodeName")
    ):
        gates = list(spec.get("schedulingGates") or [])
        if not any(g.get("name") == ORDER_GATE for g in gates):
            ops.append({"op": "add", "path": "/spec/schedulingGates", "value": [*gates, {"name": ORDER_GATE}]})
    return ops


def validate_pod(pod: Mapping[str, Any]) -> str | None:
    """None when valid, else what is wrong: a malformed NUMA policy annotation, or resources no
    machine has (the extender would fail the pod on every node)."""
    try:
        _, meta = parse_pod(pod)
        parse_annotation(meta.annotations.get(NUMA_TOPOLOGY_SPEC_ANNOTATION))
    except PolicyError as exc:
        return f"annotation {NUMA_TOPOLOGY_SPEC_ANNOTATION}: {exc}"
    except ValueError as exc:
        return f"invalid pod: {exc}"
    return None


def validate_appgroup(obj: Mapping[str, Any]) -> str | None:
    """None when valid, else every problem, each naming its field (quantities within ``apis.limits``)."""
    try:
        build_graph(AppGroup.model_validate(obj).spec)
    except ValidationError as exc:
        return f"invalid AppGroup: {describe(exc)}"
    except InvalidSpecError as exc:
        return f"invalid AppGroup dependencies: {exc}"
    return None


def review_response(
    request: Mapping[str, Any], message: str | None = None, patch: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """An AdmissionReview v1 response for ``request``."""
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": message is None}
    if message is not None:
        response["status"] = {"code": 422, "reason": "Invalid", "message": message}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
