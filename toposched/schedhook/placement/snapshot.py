"""The cluster as one placement call sees it (nodes' locations, NRT views, AppGroups, network
links, bound pods), and how to build it from API objects at once (explain, tests, benchmarks;
the extender's cache keeps one up to date event by event instead). Pure."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toposched.apis.appgroup import AppGroup
from toposched.apis.constants import WEIGHT_NETPERF
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.schedhook.placement.columnar import NodeTable
from toposched.schedhook.placement.model import NodeTopology, Placed
from toposched.schedhook.placement.network import Link, Location
from toposched.schedhook.placement.parse import from_nrt, links_of, node_view, placed_pod


@dataclass
class Snapshot:
    locations: dict[str, Location] = field(default_factory=dict)
    nrts: dict[str, NodeTopology] = field(default_factory=dict)
    appgroups: dict[tuple[str, str], AppGroup] = field(default_factory=dict)
    links: dict[tuple[str, str, str], Link] = field(default_factory=dict)
    placed: list[Placed] = field(default_factory=list)
    table: NodeTable | None = None
    """The NRTs in columns; built on first use, or kept in step with ``nrts`` by the extender's cache."""


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
