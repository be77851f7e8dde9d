"""What the cluster's objects say of each node beyond its NRT: the room kube-scheduler's fit still
leaves (allocatable less the requests of the pods bound there), and whether its NUMA knowledge
can be trusted (the extender's rules: an NRT expected and missing, or one leaving out bound pods
for longer than ``stale_after``). Pure: the capacity count reads it, from files or a live list.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from toposched.apis.constants import TOPOLOGY_MANAGER_POLICY_LABEL
from toposched.schedhook.placement.freshness import left_out
from toposched.schedhook.placement.kubelet.claims import effective
from toposched.schedhook.placement.model import Pod
from toposched.schedhook.placement.parse import node_allocatable, pod_from_spec

PODS = "pods"


@dataclass(frozen=True)
class BoundPod:
    namespace: str
    name: str
    pod: Pod
    bound_at: float | None
    """When the pod was bound (its PodScheduled condition; None: not said)."""


@dataclass
class Occupancy:
    allocatable: dict[str, dict[str, Decimal]] = field(default_factory=dict)
    """Node -> its allocatable (``status.allocatable``)."""
    room: dict[str, dict[str, Decimal]] = field(default_factory=dict)
    """Node -> resource -> what kube-scheduler's fit leaves of its allocatable (``pods`` included)."""
    blind: dict[str, str] = field(default_factory=dict)
    """Node -> why its NUMA knowledge is missing or stale."""
    cordoned: set[str] = field(default_factory=set)
    """Nodes that take no new pods (``spec.unschedulable``)."""


def bound_pods(pods: Iterable[Mapping[str, Any]]) -> dict[str, list[BoundPod]]:
    """Node -> the pods bound to it that hold resources (not finished), oldest bind first."""
    out: dict[str, list[BoundPod]] = {}
    for body in pods:
        meta, spec, status = (body.get(k) or {} for k in ("metadata", "spec", "status"))
        node = spec.get("nodeName") if isinstance(spec, Mapping) else None
        if not isinstance(node, str) or not node or not isinstance(status, Mapping):
            continue
        if status.get("phase") in ("Succeeded", "Failed") or not isinstance(meta, Mapping):
            continue
        try:
            pod = pod_from_spec(spec)
        except ValueError:
            continue  # the apiserver would not have taken it: it holds nothing a count can say
        bound = BoundPod(str(meta.get("namespace") or "default"), str(meta.get("name") or ""), pod, _bound_at(status))
        out.setdefault(node, []).append(bound)
    for listed in out.values():
        listed.sort(key=lambda p: p.bound_at or 0.0)
    return out


def occupancy(
    nodes: Iterable[Mapping[str, Any]],
    nrt_attributes: Mapping[str, Mapping[str, str]],
    bound: Mapping[str, list[BoundPod]],
    now: float,
    stale_after: float = 30.0,
) -> Occupancy:
    """Each Node's room and each blind node (``nrt_attributes``: node -> its NRT's attributes)."""
    found = Occupancy()
    for body in nodes:
        meta = body.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str):
            continue
        try:
            allocatable = node_allocatable(body)
        except ValueError:
            continue  # the snapshot says why the node is unusable
        if not allocatable:
            continue  # a Node without its status (a manifest): its room is not known
        allocatable.setdefault(PODS, Decimal(110))  # the kubelet's default maxPods
        found.allocatable[name] = allocatable
        room = dict(allocatable)
        for p in bound.get(name, []):
            for resource, amount in effective(p.pod).items():
                room[resource] = room.get(resource, Decimal(0)) - amount
        room[PODS] -= len(bound.get(name, []))
        found.room[name] = room
        if (body.get("spec") or {}).get("unschedulable"):
            found.cordoned.add(name)
        labels = meta.get("labels") or {}
        policy = labels.get(TOPOLOGY_MANAGER_POLICY_LABEL) if isinstance(labels, Mapping) else None
        if name not in nrt_attributes and policy is not None and str(policy) != "none":
            found.blind[name] = f"NRT of {name} missing; the exporter on that node is not publishing"
    for name, attributes in nrt_attributes.items():
        why = _stale(name, attributes, bound.get(name, []), now, stale_after)
        if why:
            found.blind[name] = why
    return found


def _stale(name: str, attributes: Mapping[str, str], bound: list[BoundPod], now: float, after: float) -> str:
    missed = left_out(attributes, [(p.namespace, p.name, p.pod) for p in bound])
    if missed is None or not missed.pods:
        return ""
    at = {(p.namespace, p.name): p.bound_at or now for p in bound}
    # A few binds behind, as an NRT usually is: since the oldest it leaves out; matching no recent
    # set of the pods at all (one deleted, say): since the node's pods last changed.
    since = min if missed.matched else max
    if now - since(at.get(key, now) for key in missed.pods) <= after:
        return ""
    return (
        f"NRT of {name} is stale: {len(missed.pods)} pod(s) bound to the node are not in it; the exporter on that "
        "node is not keeping up"
    )


def _bound_at(status: Mapping[str, Any]) -> float | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "PodScheduled":
            when = condition.get("lastTransitionTime")
            try:
                return datetime.fromisoformat(str(when).replace("Z", "+00:00")).timestamp()
            except ValueError:
                return None
    return None
