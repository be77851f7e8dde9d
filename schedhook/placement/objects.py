"""Kubernetes objects (plain dicts, as the API returns them) -> the placement Snapshot. Pure."""

import json
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from apis.appgroup import AppGroup
from apis.constants import (
    APPGROUP_LABEL,
    NRT_ZONE_PREFIX,
    REGION_LABEL,
    WEIGHT_NETPERF,
    WEIGHT_USER_DEFINED,
    WORKLOAD_LABEL,
    ZONE_LABEL,
)
from apis.networktopology import NetworkTopology
from apis.noderesourcetopology import NodeResourceTopology
from apis.quantity import parse_quantity
from schedhook.placement.evaluate import Placed, Snapshot
from schedhook.placement.network import Link, Location
from schedhook.placement.numa import from_nrt

NUMA_ZONES_ANNOTATION = "toposched.io/numa-zones"
"""Set on bound pods: the NUMA zones the kubelet was predicted to use, e.g. ``["node-1"]``."""


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


def snapshot(
    nodes: Iterable[Mapping[str, Any]] = (),
    nrts: Iterable[Mapping[str, Any]] = (),
    appgroups: Iterable[Mapping[str, Any]] = (),
    networktopologies: Iterable[Mapping[str, Any]] = (),
    pods: Iterable[Mapping[str, Any]] = (),
    weights_name: str = WEIGHT_NETPERF,
) -> Snapshot:
    snap = Snapshot()
    allocatable: dict[str, dict[str, Any]] = {}
    for node in nodes:
        name = node["metadata"]["name"]
        snap.locations[name], allocatable[name] = node_view(node)
    for body in nrts:
        nrt = NodeResourceTopology.model_validate(body)
        snap.nrts[nrt.name] = from_nrt(nrt, allocatable.get(nrt.name))
    for body in appgroups:
        ag = AppGroup.model_validate(body)
        snap.appgroups[(ag.namespace or "default", ag.name)] = ag
    for body in networktopologies:
        snap.links.update(links_of(NetworkTopology.model_validate(body), weights_name))
    snap.placed = [p for pod in pods if (p := placed_pod(pod)) is not None]
    return snap
