"""Zone and region costs from node-pair latencies, and bandwidth bookkeeping. Pure.

- A TCP_RR latency is a round trip, so the samples of (a, b) and (b, a) describe one link.
- Costs: zone <-> zone within a region and region <-> region, each the median (an order-free
  statistic) of the node-pair samples between them, in whole milliseconds, at least 1.
- A pair with no sample is unknown, never 0: the user's own entry for it is used if there is
  one, otherwise it is left out and reported.
"""

import logging
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from toposched.apis.constants import NODE_BANDWIDTH_RESOURCE, REGION_LABEL, WEIGHT_NETPERF, ZONE_LABEL
from toposched.apis.limits import MAX_QUANTITY, check_bandwidth
from toposched.apis.netperf import Measurements
from toposched.apis.networktopology import CostInfo, OriginInfo, TopologyInfo, WeightInfo
from toposched.apis.quantity import parse_quantity

logger = logging.getLogger(__name__)

KEYS = (REGION_LABEL, ZONE_LABEL)  # sorted: the upstream plugin expects sorted topology lists


@dataclass(frozen=True)
class NodeInfo:
    name: str
    region: str | None
    zone: str | None
    bandwidth: Decimal | None = None
    """Bandwidth the node advertises (bits per second), if any."""


@dataclass(frozen=True)
class Placement:
    """One bound pod of an AppGroup workload."""

    node: str
    workload: str


@dataclass(frozen=True)
class Dependency:
    source: str
    target: str
    min_bandwidth: Decimal


@dataclass(frozen=True)
class UnknownPair:
    topology_key: str
    origin: str
    destination: str

    def to_dict(self) -> dict[str, str]:
        return {"topologyKey": self.topology_key, "origin": self.origin, "destination": self.destination}


@dataclass
class Computed:
    weight: WeightInfo
    unknown: list[UnknownPair] = field(default_factory=list)
    kept: list[UnknownPair] = field(default_factory=list)
    """Pairs without a usable measurement now whose last good cost was kept."""
    stale: list[tuple[str, str]] = field(default_factory=list)
    unlabeled_nodes: list[str] = field(default_factory=list)


Pair = tuple[str, str]


def node_info(
    name: str, labels: Mapping[str, str], capacity: Mapping[str, str], warn: Callable[[str], None] | None = None
) -> NodeInfo:
    """A node as the costs see it: its region and zone labels and the bandwidth it advertises
    (status.capacity of the extended resource network.aware.com/bandwidth); a bandwidth that is
    not one is ignored, and ``warn`` (else the log) told why."""
    bandwidth = None
    raw = capacity.get(NODE_BANDWIDTH_RESOURCE)
    if raw:
        try:
            bandwidth = check_bandwidth(parse_quantity(raw))
        except ValueError as exc:
            (warn or logger.warning)(f"node {name}: ignoring {NODE_BANDWIDTH_RESOURCE} ({exc})")
    return NodeInfo(name=name, region=labels.get(REGION_LABEL), zone=labels.get(ZONE_LABEL), bandwidth=bandwidth)


def _location(node: NodeInfo, key: str) -> str | None:
    return node.region if key == REGION_LABEL else node.zone


def _link(a: NodeInfo, b: NodeInfo) -> tuple[str, Pair] | None:
    """The level and the pair of topology values a node pair measures, or None within a zone."""
    if a.region != b.region:
        return REGION_LABEL, (a.region or "", b.region or "")
    if a.zone != b.zone:
        return ZONE_LABEL, (a.zone or "", b.zone or "")
    return None


def expected_pairs(nodes: Iterable[NodeInfo]) -> dict[str, list[Pair]]:
    """Every ordered pair that should have a cost: regions among themselves, zones within a region."""
    regions = sorted({n.region for n in nodes if n.region and n.zone})
    zones_by_region: dict[str, set[str]] = defaultdict(set)
    for n in nodes:
        if n.region and n.zone:
            zones_by_region[n.region].add(n.zone)
    zone_pairs = [(a, b) for zs in zones_by_region.values() for a in sorted(zs) for b in sorted(zs) if a != b]
    return {
        REGION_LABEL: [(a, b) for a in regions for b in regions if a != b],
        ZONE_LABEL: sorted(zone_pairs),
    }


def _median_ms(samples: Sequence[int]) -> int:
    return max(1, int(Decimal(statistics.median(samples)).to_integral_value(rounding="ROUND_HALF_UP")))


def user_costs(weights: Iterable[WeightInfo]) -> dict[tuple[str, str, str], CostInfo]:
    """The user's entries by (topologyKey, origin, destination); the first weight that has a pair wins."""
    found: dict[tuple[str, str, str], CostInfo] = {}
    for weight in weights:
        if weight.name == WEIGHT_NETPERF:
            continue
        for topology in weight.topology_list:
            for origin in topology.origin_list:
                for cost in origin.cost_list or ():
                    found.setdefault((topology.topology_key, origin.origin, cost.destination), cost)
    return found


def advertised_bandwidth(nodes: Iterable[NodeInfo]) -> dict[tuple[str, str], Decimal]:
    """Summed advertised bandwidth per (topology key, value)."""
    total: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for n in nodes:
        if n.bandwidth is None:
            continue
        for key in KEYS:
            value = _location(n, key)
            if value:
                total[(key, value)] += n.bandwidth
    return dict(total)


def capacity_between(advertised: Mapping[tuple[str, str], Decimal], key: str, pair: Pair) -> Decimal | None:
    """What the nodes advertise for a link: the smaller of the two sides' summed bandwidth."""
    sides = [advertised.get((key, value)) for value in pair]
    return None if None in sides else min(s for s in sides if s is not None)


def allocated_bandwidth(
    nodes: Mapping[str, NodeInfo], placements: Sequence[Placement], dependencies: Sequence[Dependency]
) -> dict[tuple[str, str, str], Decimal]:
    """minBandwidth summed per (level, origin, destination) over placed pod pairs of each dependency.

    Recomputed from the current placements every time, so the same cluster state always gives
    the same numbers (no incremental double counting).
    """
    pods_by_workload: dict[str, list[NodeInfo]] = defaultdict(list)
    for p in placements:
        node = nodes.get(p.node)
        if node is not None:
            pods_by_workload[p.workload].append(node)
    total: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    for dep in dependencies:
        if dep.min_bandwidth <= 0:
            continue
        for a in pods_by_workload.get(dep.source, ()):
            for b in pods_by_workload.get(dep.target, ()):
                link = _link(a, b)
                if link is not None and all(link[1]):
                    key, (origin, destination) = link
                    total[(key, origin, destination)] += dep.min_bandwidth
    return dict(total)


def _quantity(value: Decimal) -> str | int:
    """As the NetworkTopology holds it; a sum beyond what the CRD takes saturates (it is more than
    any network carries either way, so no placement changes)."""
    value = min(value, Decimal(MAX_QUANTITY))
    return int(value) if value == value.to_integral_value() else str(value)


Triple = tuple[str, str, str]
"""(topology key, origin, destination): one ordered pair at one level."""


def _samples(nodes: Sequence[NodeInfo], measurements: Measurements) -> dict[Triple, list[int]]:
    """The latency samples of each pair of topology values, from the node pairs between them."""
    by_name = {n.name: n for n in nodes}
    samples: dict[Triple, list[int]] = defaultdict(list)
    for (origin, destination), ms in measurements.latency_ms.items():
        a, b = by_name.get(origin), by_name.get(destination)
        if a is None or b is None:
            continue
        link = _link(a, b)
        if link is None or not all(link[1]):
            continue
        key, (x, y) = link
        samples[(key, x, y)].append(ms)
        samples[(key, y, x)].append(ms)  # round trip: the same sample serves both directions
    return samples


@dataclass(frozen=True)
class _Sources:
    """What a pair's entry may come from, in ``compute``'s order of preference."""

    samples: Mapping[Triple, Sequence[int]]
    user: Mapping[Triple, CostInfo]
    last_good: Mapping[Triple, CostInfo]
    advertised: Mapping[tuple[str, str], Decimal]
    allocated: Mapping[Triple, Decimal]

    def cost(self, pair: Triple) -> tuple[int, bool] | None:
        """The pair's cost and whether it is the last good one, kept; None when it is unknown."""
        found = self.samples.get(pair)
        if found:
            return _median_ms(found), False
        before = self.last_good.get(pair)
        if before is not None:
            return before.network_cost, True
        mine = self.user.get(pair)
        return None if mine is None else (mine.network_cost, False)

    def entry(self, pair: Triple, cost: int) -> CostInfo:
        key, origin, destination = pair
        entry = CostInfo(destination=destination, network_cost=cost)
        mine = self.user.get(pair)
        if mine is not None and mine.bandwidth_capacity is not None:
            entry.bandwidth_capacity = mine.bandwidth_capacity  # the user's value, as they wrote it
        else:
            capacity = capacity_between(self.advertised, key, (origin, destination))
            if capacity is not None:
                entry.bandwidth_capacity = _quantity(capacity)
        entry.bandwidth_allocated = _quantity(self.allocated.get(pair, Decimal(0)))
        return entry


def _stale(measurements: Measurements, now: datetime | None, max_age: timedelta | None) -> list[tuple[str, str]]:
    """The measured node pairs whose measurement is older than ``max_age``."""
    if now is None or max_age is None:
        return []
    return sorted(
        pair
        for pair in measurements.latency_ms
        if pair in measurements.measured_at and now - measurements.measured_at[pair] > max_age
    )


def compute(
    nodes: Sequence[NodeInfo],
    measurements: Measurements,
    user_weights: Sequence[WeightInfo],
    allocated: Mapping[tuple[str, str, str], Decimal] | None = None,
    now: datetime | None = None,
    max_age: timedelta | None = None,
    previous: WeightInfo | None = None,
) -> Computed:
    """The NetperfCosts weight for these nodes and measurements.

    A pair is costed from its samples, else from ``previous`` (the last good NetperfCosts, so a
    broken ConfigMap does not erase what was measured before), else from the user's entry.
    """
    sources = _Sources(
        samples=_samples(nodes, measurements),
        user=user_costs(user_weights),
        last_good=user_costs([previous.model_copy(update={"name": "previous"})]) if previous else {},
        advertised=advertised_bandwidth(nodes),
        allocated=allocated or {},
    )
    unknown: list[UnknownPair] = []
    kept: list[UnknownPair] = []
    topology_list: list[TopologyInfo] = []
    for key, pairs in expected_pairs(nodes).items():
        by_origin: dict[str, list[CostInfo]] = defaultdict(list)
        for origin, destination in pairs:
            pair = (key, origin, destination)
            found = sources.cost(pair)
            if found is None:
                unknown.append(UnknownPair(*pair))
                continue
            cost, was_kept = found
            if was_kept:
                kept.append(UnknownPair(*pair))
            by_origin[origin].append(sources.entry(pair, cost))
        if by_origin:
            origin_list = [
                OriginInfo(origin=o, cost_list=sorted(cs, key=lambda c: c.destination))
                for o, cs in sorted(by_origin.items())
            ]
            topology_list.append(TopologyInfo(topology_key=key, origin_list=origin_list))
    return Computed(
        weight=WeightInfo(name=WEIGHT_NETPERF, topology_list=topology_list),
        unknown=unknown,
        kept=kept,
        stale=_stale(measurements, now, max_age),
        unlabeled_nodes=sorted(n.name for n in nodes if not (n.region and n.zone)),
    )
