"""Network-aware filter and score (the upstream NetworkOverhead semantics, with fixes). Pure.

For a candidate node and each placed pod of a workload the pod depends on:
- same node: satisfied, cost 0; same zone: satisfied, cost 1;
- same region, other zone: the zone pair's cost; other region: the region pair's cost;
  satisfied when cost <= maxNetworkCost;
- a dependency node without region and zone labels: violated, cost 100.
The filter rejects a node with more violated than satisfied dependencies; the score is the
summed cost, normalised so the cheapest node gets 100.

Where toposched differs (each a setting):
- a pair with no known cost is neither free nor a flat 100: it costs ``unknown_cost`` (default:
  the largest known cost of that level) and counts neither way in the filter;
- pods that depend on this pod count too (``count_dependents``);
- ``minBandwidth`` must fit in ``bandwidthCapacity - bandwidthAllocated`` of a crossed pair;
- a dependency without ``maxNetworkCost`` has no cost limit (upstream: 0);
- the AppGroup keeps together (``cohesion``): the mean cost to every placed pod of the AppGroup
  counts as one more dependency. Without it the workloads placed first (those without
  dependencies, in topology order) have nothing to be near and scatter over regions, and every
  workload that depends on them later pays for that;
- scores are normalised on a logarithmic scale of the cost above the cheapest node
  (``log_scale``): the step from "on its neighbours' node" to "in their zone" then weighs about
  as much as the one from a near region to a far one, so packing next to its neighbours shows
  through kube-scheduler's own preference for emptier nodes.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TypeVar

from toposched.apis.constants import REGION_LABEL, ZONE_LABEL

K = TypeVar("K")
SAME_NODE, SAME_ZONE, UNLABELED = 0, 1, 100
MAX_SCORE = 100


@dataclass(frozen=True)
class Location:
    region: str | None
    zone: str | None


@dataclass(frozen=True)
class Link:
    cost: int
    capacity: Decimal | None = None
    allocated: Decimal = Decimal(0)


@dataclass(frozen=True)
class Edge:
    """A dependency between two workloads of an AppGroup."""

    source: str
    target: str
    max_cost: int | None = None
    min_bandwidth: Decimal | None = None


@dataclass
class NetworkSettings:
    unknown_cost: int | None = None
    """None: the largest known cost of the same level."""
    count_dependents: bool = True
    cohesion: bool = True
    log_scale: bool = True


@dataclass
class Evaluation:
    satisfied: int = 0
    violated: int = 0
    cost: int = 0
    reasons: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.violated <= self.satisfied and not any(r.startswith("bandwidth") for r in self.reasons)


def _pair_cost(
    level: str, a: str, b: str, links: Mapping[tuple[str, str, str], Link], settings: NetworkSettings
) -> tuple[int | None, Link | None]:
    link = links.get((level, a, b))
    if link is not None:
        return link.cost, link
    if settings.unknown_cost is not None:
        return settings.unknown_cost, None
    known = [lk.cost for (lv, _, _), lk in links.items() if lv == level]
    return (max(known) if known else None), None


def evaluate(
    workload: str,
    candidate: str,
    locations: Mapping[str, Location],
    edges: Sequence[Edge],
    placed: Sequence[tuple[str, str]],
    links: Mapping[tuple[str, str, str], Link],
    settings: NetworkSettings | None = None,
) -> Evaluation:
    """Dependencies of ``workload`` if its pod ran on ``candidate``; ``placed`` is (workload, node) of bound pods."""
    settings = settings or NetworkSettings()
    here = locations.get(candidate, Location(None, None))
    out = Evaluation()
    related: list[tuple[Edge, str]] = [(e, e.target) for e in edges if e.source == workload]
    if settings.count_dependents:
        related += [(e, e.source) for e in edges if e.target == workload and e.source != workload]
    for edge, other in related:
        for other_workload, node in placed:
            if other_workload != other:
                continue
            there = locations.get(node, Location(None, None))
            if node == candidate:
                out.satisfied += 1
                out.cost += SAME_NODE
                continue
            if there.region is None and there.zone is None:
                out.violated += 1
                out.cost += UNLABELED
                out.reasons.append(f"node {node} of {other} has no region or zone label")
                continue
            if here.region == there.region and here.zone == there.zone:
                out.satisfied += 1
                out.cost += SAME_ZONE
                continue
            if here.region == there.region:
                level, a, b = ZONE_LABEL, here.zone or "", there.zone or ""
            else:
                level, a, b = REGION_LABEL, here.region or "", there.region or ""
            cost, link = _pair_cost(level, a, b, links, settings)
            if cost is None:
                out.reasons.append(f"no known cost from {a} to {b}")
                continue
            out.cost += cost
            if link is None:
                out.reasons.append(f"no known cost from {a} to {b}; counted as {cost}")
            elif edge.max_cost is None or cost <= edge.max_cost:
                out.satisfied += 1
            else:
                out.violated += 1
                out.reasons.append(f"{a} -> {b} costs {cost}, {workload} allows {edge.max_cost} towards {other}")
            if link is not None and edge.min_bandwidth and link.capacity is not None:
                free = link.capacity - link.allocated
                if edge.min_bandwidth > free:
                    out.reasons.append(f"bandwidth {a} -> {b}: {edge.min_bandwidth} needed, {free} free")
    return out


def pair_cost(
    a: str,
    b: str,
    locations: Mapping[str, Location],
    links: Mapping[tuple[str, str, str], Link],
    settings: NetworkSettings | None = None,
) -> int:
    """What a pod on ``a`` and one on ``b`` cost each other, as ``evaluate`` counts it (an unknown
    pair: ``unknown_cost`` or the largest known of its level, else UNLABELED)."""
    settings = settings or NetworkSettings()
    if a == b:
        return SAME_NODE
    here, there = locations.get(a, Location(None, None)), locations.get(b, Location(None, None))
    if (here.region is None and here.zone is None) or (there.region is None and there.zone is None):
        return UNLABELED
    if here.region == there.region and here.zone == there.zone:
        return SAME_ZONE
    if here.region == there.region:
        level, x, y = ZONE_LABEL, here.zone or "", there.zone or ""
    else:
        level, x, y = REGION_LABEL, here.region or "", there.region or ""
    cost, _ = _pair_cost(level, x, y, links, settings)
    return UNLABELED if cost is None else cost


def with_cohesion(cost: int, candidate: str, members: Sequence[str], costs: Mapping[tuple[str, str], int]) -> int:
    """``cost`` plus the mean cost from ``candidate`` to the AppGroup's placed ``members``, in
    units of 1/len(members) so it stays an integer (normalize sees only differences from the cheapest,
    so the common factor changes nothing but the log scale's curvature)."""
    if not members:
        return cost
    return cost * len(members) + sum(costs[(candidate, m)] for m in members)


def normalize(raw: Mapping[K, int], log_scale: bool = False) -> dict[K, int]:
    """Upstream NormalizeScore: the cheapest node 100, the dearest 0, linear in between; or, with
    ``log_scale``, on a logarithmic scale of the cost above the cheapest."""
    if not raw:
        return {}
    low, high = min(raw.values()), max(raw.values())
    if low == high:
        return {n: (0 if low == 0 else MAX_SCORE) for n in raw}
    if log_scale:
        span = math.log1p(high - low)
        return {n: MAX_SCORE - int(MAX_SCORE * math.log1p(s - low) / span) for n, s in raw.items()}
    return {n: MAX_SCORE - int(MAX_SCORE * (s - low) / (high - low)) for n, s in raw.items()}
