"""The cluster as one placement call sees it (nodes' locations, NRT views, AppGroups, network
links, bound pods), and how to build it from API objects at once (explain, tests, benchmarks;
the extender's cache keeps one up to date event by event instead). Pure."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toposched.apis.appgroup import AppGroup
from toposched.apis.constants import WEIGHT_NETPERF
from toposched.apis.errors import describe
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.schedhook.placement.columnar import NodeTable
from toposched.schedhook.placement.model import NodeTopology, Placed
from toposched.schedhook.placement.network import Link, Location
from toposched.schedhook.placement.parse import from_nrt, links_of, node_allocatable, node_location, placed_pod


@dataclass
class Snapshot:
    locations: dict[str, Location] = field(default_factory=dict)
    nrts: dict[str, NodeTopology] = field(default_factory=dict)
    appgroups: dict[tuple[str, str], AppGroup] = field(default_factory=dict)
    links: dict[tuple[str, str, str], Link] = field(default_factory=dict)
    placed: list[Placed] = field(default_factory=list)
    invalid: dict[str, str] = field(default_factory=dict)
    """Node name -> why its NRT or Node object was skipped: such a node fails every pod with that reason."""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """(kind, which and why) of objects left out entirely (``snapshot`` fills it for the explain command)."""
    blind: dict[str, str] = field(default_factory=dict)
    """Node name -> why its NUMA knowledge is missing or stale: pods that need exclusive CPUs,
    pinned memory or devices fail there, saying why; other pods are judged as before."""
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
    """The cluster of these objects. One that cannot be read is skipped, never the others: a Node or
    NRT goes to ``invalid`` (its node then fails every pod, saying why), anything else to ``skipped``."""
    snap = Snapshot()
    allocatable: dict[str, dict[str, Any]] = {}
    for i, node in enumerate(nodes):
        name = object_name(node)
        if name is None:
            snap.skipped.append(("Node", f"#{i + 1}: metadata.name: expected a name"))
            continue
        snap.locations[name] = node_location(node)
        try:
            allocatable[name] = node_allocatable(node)
        except ValueError as exc:
            snap.invalid[name] = f"invalid Node {name}: {describe(exc)}"
    for i, body in enumerate(nrts):
        name = object_name(body)
        try:
            nrt = NodeResourceTopology.model_validate(body)
            view = from_nrt(nrt, allocatable.get(nrt.name))
        except ValueError as exc:
            if name is None:
                snap.skipped.append(("NodeResourceTopology", f"#{i + 1}: {describe(exc)}"))
            else:
                snap.invalid.setdefault(name, f"invalid NodeResourceTopology {name}: {describe(exc)}")
            continue
        snap.nrts[nrt.name] = view
    for i, body in enumerate(appgroups):
        try:
            ag = AppGroup.model_validate(body)
        except ValueError as exc:
            snap.skipped.append(("AppGroup", f"{object_name(body) or f'#{i + 1}'}: {describe(exc)}"))
            continue
        snap.appgroups[(ag.namespace or "default", ag.name)] = ag
    for i, body in enumerate(networktopologies):
        try:
            snap.links.update(links_of(NetworkTopology.model_validate(body), weights_name))
        except ValueError as exc:
            snap.skipped.append(("NetworkTopology", f"{object_name(body) or f'#{i + 1}'}: {describe(exc)}"))
    snap.placed = [p for pod in pods if (p := placed_pod(pod)) is not None]
    return snap


def object_name(body: object) -> str | None:
    """``metadata.name`` when it is a non-empty string."""
    meta = body.get("metadata") if isinstance(body, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) and name else None
