"""Kubernetes objects (plain dicts, as the API returns them) -> the placement models. Pure.

Every parser here raises ValueError (pydantic's ValidationError is one) on input it cannot
read; the callers decide whether that skips one object or fails one request.
"""

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from toposched.apis.constants import (
    APPGROUP_LABEL,
    NRT_ATTR_CPU_MANAGER_POLICY,
    NRT_ATTR_MEMORY_MANAGER_POLICY,
    NRT_ATTR_MEMORY_NUMA_GROUPS,
    NRT_ATTR_TOPOLOGY_MANAGER_MAX_NUMA_NODES,
    NRT_ATTR_TOPOLOGY_MANAGER_POLICY,
    NRT_ATTR_TOPOLOGY_MANAGER_POLICY_OPTIONS,
    NRT_ATTR_TOPOLOGY_MANAGER_SCOPE,
    NRT_ZONE_PREFIX,
    NUMA_ZONES_ANNOTATION,
    PREFER_CLOSEST_NUMA_NODES,
    REGION_LABEL,
    WEIGHT_NETPERF,
    WEIGHT_USER_DEFINED,
    WORKLOAD_LABEL,
    ZONE_LABEL,
)
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.apis.quantity import parse_quantity
from toposched.schedhook.placement.model import Container, NodeTopology, NumaZone, Placed, Pod
from toposched.schedhook.placement.network import Link, Location
from toposched.schedhook.placement.topologymanager import NONE, POLICIES, SINGLE_NUMA_NODE, mask

LEGACY_POLICIES = {
    "SingleNUMANodeContainerLevel": (SINGLE_NUMA_NODE, "container"),
    "SingleNUMANodePodLevel": (SINGLE_NUMA_NODE, "pod"),
    "Restricted": ("restricted", "container"),
    "RestrictedContainerLevel": ("restricted", "container"),
    "RestrictedPodLevel": ("restricted", "pod"),
    "BestEffort": ("best-effort", "container"),
    "BestEffortContainerLevel": ("best-effort", "container"),
    "BestEffortPodLevel": ("best-effort", "pod"),
    "None": (NONE, "container"),
}


def from_nrt(nrt: NodeResourceTopology, node_allocatable: Mapping[str, Decimal] | None = None) -> NodeTopology:
    """The node as the predictor sees it; zones other than NUMA nodes, or with ids above 63, are ignored."""
    policy, scope = NONE, "container"
    if nrt.topology_policies:
        policy, scope = LEGACY_POLICIES.get(nrt.topology_policies[0], (policy, scope))
    attr_policy = nrt.attribute(NRT_ATTR_TOPOLOGY_MANAGER_POLICY)
    attr_scope = nrt.attribute(NRT_ATTR_TOPOLOGY_MANAGER_SCOPE)
    if attr_policy in POLICIES:
        policy = attr_policy
    if attr_scope in ("container", "pod"):
        scope = attr_scope
    zones = []
    distances: dict[int, dict[int, int]] = {}
    for z in nrt.zones:
        suffix = z.name.removeprefix(NRT_ZONE_PREFIX)
        if z.type != "Node" or not suffix.isdigit() or int(suffix) > 63:
            continue
        resources = z.resources or []
        distances[int(suffix)] = {
            int(c.name.removeprefix(NRT_ZONE_PREFIX)): c.value
            for c in z.costs or []
            if c.name.removeprefix(NRT_ZONE_PREFIX).isdigit()
        }
        zones.append(
            NumaZone(
                numa=int(suffix),
                capacity={r.name: parse_quantity(r.capacity) for r in resources},
                allocatable={r.name: parse_quantity(r.allocatable) for r in resources},
                available={r.name: parse_quantity(r.available) for r in resources},
            )
        )
    return NodeTopology(
        name=nrt.name,
        zones=tuple(sorted(zones, key=lambda z: z.numa)),
        policy=policy,
        scope=scope,
        cpu_manager=nrt.attribute(NRT_ATTR_CPU_MANAGER_POLICY),
        memory_manager=nrt.attribute(NRT_ATTR_MEMORY_MANAGER_POLICY),
        node_allocatable=dict(node_allocatable or {}),
        distances=distances,
        max_numa=_max_numa(nrt.attribute(NRT_ATTR_TOPOLOGY_MANAGER_MAX_NUMA_NODES)),
        prefer_closest=_options(nrt.attribute(NRT_ATTR_TOPOLOGY_MANAGER_POLICY_OPTIONS)).get(PREFER_CLOSEST_NUMA_NODES)
        == "true",
        memory_groups=_groups(nrt.attribute(NRT_ATTR_MEMORY_NUMA_GROUPS)),
    )


def _options(raw: str | None) -> dict[str, str]:
    """``name=value`` pairs joined by commas; anything else is ignored."""
    pairs = (item.partition("=") for item in (raw or "").split(","))
    return {k.strip(): v.strip().lower() for k, sep, v in pairs if sep and k.strip()}


def _groups(raw: str | None) -> tuple[int, ...]:
    """NUMA masks from ``0-1;2,3``; a malformed group is dropped (the prediction is then looser)."""
    groups = []
    for part in (raw or "").split(";"):
        try:
            ids = [i for piece in part.split(",") if piece.strip() for i in _span(piece)]
        except ValueError:
            continue
        if len(ids) > 1 and all(0 <= i <= 63 for i in ids):
            groups.append(mask(*ids))
    return tuple(groups)


def _span(piece: str) -> range:
    low, _, high = piece.strip().partition("-")
    return range(int(low), int(high or low) + 1)


def _max_numa(raw: str | None) -> int:
    """Valid values are 2..1024 (as upstream); anything else means the kubelet default, 8."""
    if raw is not None and raw.isdigit() and 1 < int(raw) <= 1024:
        return int(raw)
    return 8


def quantities(raw: Mapping[str, str | int] | None) -> dict[str, Decimal]:
    return {k: parse_quantity(v) for k, v in (raw or {}).items()}


def pod_from_spec(spec: Mapping[str, object]) -> Pod:
    """A Pod from a core/v1 pod spec (dict), for the extender and the explain command."""

    def containers(key: str) -> tuple[Container, ...]:
        out = []
        for c in spec.get(key) or []:  # type: ignore[attr-defined]
            resources = c.get("resources") or {}
            out.append(
                Container(
                    name=c.get("name", ""),
                    requests=quantities(resources.get("requests")),
                    limits=quantities(resources.get("limits")),
                    sidecar=c.get("restartPolicy") == "Always",
                )
            )
        return tuple(out)

    return Pod(containers=containers("containers"), init_containers=containers("initContainers"))


def links_of(nt: NetworkTopology, weights_name: str) -> dict[tuple[str, str, str], Link]:
    """Costs of the named weight; NetperfCosts falls back to UserDefined when absent."""
    weights = {w.name: w for w in nt.spec.weights}
    weight = weights.get(weights_name) or (weights.get(WEIGHT_USER_DEFINED) if weights_name == WEIGHT_NETPERF else None)
    links: dict[tuple[str, str, str], Link] = {}
    for topology in weight.topology_list if weight else []:
        for origin in topology.origin_list:
            for cost in origin.cost_list or []:
                links[(topology.topology_key, origin.origin, cost.destination)] = Link(
                    cost=cost.network_cost,
                    capacity=parse_quantity(cost.bandwidth_capacity) if cost.bandwidth_capacity is not None else None,
                    allocated=parse_quantity(cost.bandwidth_allocated)
                    if cost.bandwidth_allocated is not None
                    else Decimal(0),
                )
    return links


def node_view(node: Mapping[str, Any]) -> tuple[Location, dict[str, Decimal]]:
    """A Node's region/zone and its allocatable resources."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    raw = (node.get("status") or {}).get("allocatable") or {}
    return Location(labels.get(REGION_LABEL), labels.get(ZONE_LABEL)), {k: parse_quantity(v) for k, v in raw.items()}


def placed_pod(pod: Mapping[str, Any]) -> Placed | None:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    node = spec.get("nodeName")
    if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return None
    labels = meta.get("labels") or {}
    numa: tuple[int, ...] = ()
    raw = (meta.get("annotations") or {}).get(NUMA_ZONES_ANNOTATION)
    if raw:
        try:
            numa = tuple(int(z.removeprefix(NRT_ZONE_PREFIX)) for z in json.loads(raw))
        except (ValueError, TypeError, AttributeError):
            numa = ()
    return Placed(meta.get("namespace", "default"), node, labels.get(APPGROUP_LABEL), labels.get(WORKLOAD_LABEL), numa)
