"""The capacity count as Prometheus gauges, for the shapes the chart configures (``capacity.shapes``).

Labels are bounded by the configuration, never by the nodes: per shape the copies cluster-wide,
per shape and failure-domain zone (``topology.kubernetes.io/zone``) the copies there, per shape
the nodes whose capacity is unknown, and one figure of fragmentation -- free CPUs on NUMA zones
where no configured shape can place a single copy. With S shapes and Z zone labels that is
3S + SZ + 3 series, whatever the number of nodes.
"""

from decimal import Decimal

from prometheus_client import Gauge

from toposched.schedhook.capacityreport import NO_ZONE, Result

CLUSTER = Gauge("toposched_capacity_pods_total", "Copies of a configured shape the cluster can still take.", ["shape"])
BY_ZONE = Gauge(
    "toposched_capacity_pods",
    "Copies of a configured shape the nodes of a failure-domain zone can still take (zone '-': unlabelled nodes).",
    ["shape", "zone"],
)
UNKNOWN = Gauge(
    "toposched_capacity_unknown_nodes",
    "Nodes whose capacity for the shape is unknown (NUMA knowledge missing, stale or unreadable).",
    ["shape"],
)
STRANDED = Gauge(
    "toposched_capacity_stranded_cpus",
    "Free CPUs on NUMA zones of known nodes where no configured shape can place a single copy.",
)
LAST_SUCCESS = Gauge("toposched_capacity_last_success_timestamp_seconds", "When the capacity was last counted.")
DURATION = Gauge("toposched_capacity_count_seconds", "How long the last count took (listing included).")


def stranded_cpus(result: Result) -> Decimal:
    """Free CPUs on zones no shape uses, on nodes known to every shape's count."""
    unknown = {f.node for c in result.shapes for f in c.unknown}
    used: dict[str, set[int]] = {}
    for c in result.shapes:
        for f in c.nodes:
            used.setdefault(f.node, set()).update(n for n, k in f.zones.items() if k)
    total = Decimal(0)
    for name, nrt in result.snapshot.nrts.items():
        if name in unknown or name not in used:
            continue
        total += sum((z.available.get("cpu", Decimal(0)) for z in nrt.zones if z.numa not in used[name]), Decimal(0))
    return total


def publish(result: Result, seconds: float, now: float) -> None:
    BY_ZONE.clear()  # a zone label gone from the cluster goes from the metrics too
    for c in result.shapes:
        name = c.shape.name
        CLUSTER.labels(name).set(c.total)
        UNKNOWN.labels(name).set(len(c.unknown))
        zones = {result.zone_of(n) for n in result.nodes} or {NO_ZONE}
        for zone in zones:
            BY_ZONE.labels(name, zone).set(sum(f.fits or 0 for f in c.nodes if result.zone_of(f.node) == zone))
    STRANDED.set(float(stranded_cpus(result)))
    DURATION.set(seconds)
    LAST_SUCCESS.set(now)
