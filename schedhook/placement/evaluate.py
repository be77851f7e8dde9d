"""One pod against every candidate node: verdict, reason, predicted NUMA zones and scores. Pure.

Shared by the extender (filter and prioritize), ``toposched explain`` and the benchmarks.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from apis.appgroup import AppGroup
from apis.constants import APPGROUP_LABEL, NRT_ZONE_PREFIX, NUMA_TOPOLOGY_SPEC_ANNOTATION, WORKLOAD_LABEL
from apis.quantity import parse_quantity
from schedhook.placement import fast
from schedhook.placement.network import Edge, Link, Location, Settings, evaluate, normalize
from schedhook.placement.numa import NodeTopology, Pod, Verdict, container_request, pod_from_spec, predict
from schedhook.placement.podpolicy import PolicyError, effective_policy, exclusive_ok, numa_status, parse_annotation
from schedhook.placement.score import LEAST_ALLOCATED, node_score


@dataclass(frozen=True)
class Placed:
    """A bound pod as the placement logic needs it."""

    namespace: str
    node: str
    appgroup: str | None = None
    workload: str | None = None
    numa: tuple[int, ...] = ()


@dataclass
class Snapshot:
    locations: dict[str, Location] = field(default_factory=dict)
    nrts: dict[str, NodeTopology] = field(default_factory=dict)
    appgroups: dict[tuple[str, str], AppGroup] = field(default_factory=dict)
    links: dict[tuple[str, str, str], Link] = field(default_factory=dict)
    placed: list[Placed] = field(default_factory=list)


@dataclass
class Config:
    numa_strategy: str = LEAST_ALLOCATED
    resource_weights: dict[str, int] = field(default_factory=lambda: {"cpu": 1, "memory": 1})
    missing_nrt_fits: bool = True
    """Nodes without an NRT: pass with the lowest NUMA score (True) or fail."""
    network: Settings = field(default_factory=Settings)
    numa_weight: int = 1
    network_weight: int = 1


@dataclass
class NodeResult:
    node: str
    fit: bool
    reason: str = ""
    numa_zones: list[str] = field(default_factory=list)
    scores: dict[str, int] = field(default_factory=dict)
    score: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "fit": self.fit,
            "reason": self.reason,
            "numaZones": self.numa_zones,
            "scores": self.scores,
            "score": self.score,
        }


def shortfall(pod: Pod, node: NodeTopology) -> str:
    """Which request no single zone can hold: ``cpu 6 requested, best zone has 4 available``."""
    for c in [*pod.init_containers, *pod.containers]:
        for resource, amount in container_request(c).items():
            best = max((z.available.get(resource, Decimal(0)) for z in node.zones), default=Decimal(0))
            reported = any(resource in z.available for z in node.zones)
            if reported and amount > best:
                return f"{resource} {_show(amount)} requested, best zone has {_show(best)} available"
    return ""


def _show(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral_value() else str(value.normalize())


def _edges(appgroup: AppGroup) -> list[Edge]:
    return [
        Edge(
            source=item.workload.selector,
            target=dep.workload.selector,
            max_cost=dep.max_network_cost,
            min_bandwidth=parse_quantity(dep.min_bandwidth) if dep.min_bandwidth is not None else None,
        )
        for item in appgroup.spec.workloads
        for dep in item.dependencies or ()
    ]


def evaluate_pod(
    pod_body: Mapping[str, Any], candidates: Sequence[str], snapshot: Snapshot, config: Config | None = None
) -> list[NodeResult]:
    config = config or Config()
    meta = pod_body.get("metadata") or {}
    pod = pod_from_spec(pod_body.get("spec") or {})
    labels = meta.get("labels") or {}
    results: list[NodeResult] = []
    try:
        pod_policy = parse_annotation((meta.get("annotations") or {}).get(NUMA_TOPOLOGY_SPEC_ANNOTATION))
        policy_error = ""
    except PolicyError as exc:
        pod_policy, policy_error = parse_annotation(None), f"invalid {NUMA_TOPOLOGY_SPEC_ANNOTATION}: {exc}"

    hints: dict[tuple[object, ...], list[tuple[str, float, str]]] = {}
    for name in candidates:
        result = NodeResult(node=name, fit=True)
        results.append(result)
        nrt = snapshot.nrts.get(name)
        if policy_error:
            result.fit, result.reason = False, policy_error
            continue
        if nrt is None:
            result.fit = config.missing_nrt_fits
            result.reason = "" if result.fit else "no NodeResourceTopology for this node"
            result.scores["numa"] = 0
            continue
        try:
            policy = effective_policy(pod_policy, nrt.policy)
        except PolicyError as exc:
            result.fit, result.reason = False, str(exc)
            continue
        node = nrt if policy == nrt.policy else _with_policy(nrt, policy)
        if fast.applies(pod, node):
            key = fast.hint_key(pod, node)
            if key not in hints:
                hints[key] = fast.hinted(pod, node) or []
            admitted, chosen = fast.admit_zone(pod, node, hints[key])
            scope_key = "pod" if node.scope == "pod" else pod.containers[0].name
            verdict = Verdict(admitted, "" if admitted else f"cannot align {_what(node, pod)}", {scope_key: chosen})
        else:
            verdict = predict(node, pod)
        if not verdict.admit:
            detail = shortfall(pod, node)
            result.fit = False
            result.reason = f"{verdict.reason} on one NUMA zone" + (f": {detail}" if detail else "")
            continue
        zones = sorted({n for ids in verdict.numa.values() for n in ids})
        result.numa_zones = [f"{NRT_ZONE_PREFIX}{n}" for n in zones]
        numa_score = node_score(config.numa_strategy, node, pod, verdict.numa, config.resource_weights)
        if pod_policy.exclusive and zones:
            placements = [p.numa for p in snapshot.placed if p.node == name and p.numa]
            statuses = {n: numa_status(placements, n) for n in node.numa_ids}
            if not exclusive_ok(zones, statuses):
                if pod_policy.exclusive == "Required":
                    result.fit, result.reason = False, "NUMA zones not exclusive as singleNUMANodeExclusive requires"
                    continue
                numa_score = 0
        result.scores["numa"] = numa_score

    _network(pod_body, labels, results, snapshot, config)
    weight_of = {"numa": config.numa_weight, "network": config.network_weight}
    for r in results:
        # A weighted mean of the scores that apply (a pod outside AppGroups has no network score).
        weights = sum(weight_of[k] for k in r.scores)
        r.score = sum(v * weight_of[k] for k, v in r.scores.items()) // weights if weights else 0
    return results


def _what(node: NodeTopology, pod: Pod) -> str:
    return "pod" if node.scope == "pod" else f"container {pod.containers[0].name}"


def _with_policy(node: NodeTopology, policy: str) -> NodeTopology:
    return replace(node, policy=policy)


def _network(
    pod_body: Mapping[str, Any],
    labels: Mapping[str, str],
    results: list[NodeResult],
    snapshot: Snapshot,
    config: Config,
) -> None:
    namespace = (pod_body.get("metadata") or {}).get("namespace", "default")
    group, workload = labels.get(APPGROUP_LABEL), labels.get(WORKLOAD_LABEL)
    appgroup = snapshot.appgroups.get((namespace, group or ""))
    if appgroup is None or workload is None:
        return
    edges = _edges(appgroup)
    placed = [(p.workload, p.node) for p in snapshot.placed if p.namespace == namespace and p.appgroup == group]
    placed_pairs = [(w, n) for w, n in placed if w]
    raw: dict[str, int] = {}
    for r in results:
        if not r.fit:
            continue
        ev = evaluate(workload, r.node, snapshot.locations, edges, placed_pairs, snapshot.links, config.network)
        if not ev.fits:
            r.fit = False
            r.reason = "network requirements not met: " + "; ".join(ev.reasons or ["more violated than satisfied"])
            continue
        raw[r.node] = ev.cost
    for node, score in normalize(raw).items():
        next(r for r in results if r.node == node).scores["network"] = score
