"""Which node pairs to measure and how to read netperf's answer. Pure.

By default one representative pair per pair of zones: the first node (by name) of each zone,
measured from the zone that sorts first. Every prober computes the same plan from the same
node list and measures only the pairs that start at its own node, so a DaemonSet needs no
election and no two probers measure the same pair.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class NodeAddress:
    name: str
    address: str | None
    zone: str | None


@dataclass(frozen=True)
class Probe:
    origin: str
    destination: str
    address: str


@dataclass(frozen=True)
class Latency:
    """TCP_RR round-trip latency percentiles in microseconds."""

    p50_us: float
    p90_us: float
    p99_us: float

    def milliseconds(self) -> dict[str, int]:
        """Whole milliseconds per percentile, the ConfigMap's unit: truncated, at least 1, as the
        reference netperf script writes them, so both probers give the same figures."""
        return {pct: max(1, math.floor(us / 1000)) for pct, us in self._by_name().items()}

    def _by_name(self) -> dict[str, float]:
        return {"p50": self.p50_us, "p90": self.p90_us, "p99": self.p99_us}


def plan(nodes: Sequence[NodeAddress], me: str, all_pairs: bool = False) -> list[Probe]:
    """The probes that start at node ``me``."""
    usable = sorted((n for n in nodes if n.address), key=lambda n: n.name)
    if all_pairs:
        return [Probe(me, n.name, n.address) for n in usable if n.name != me and n.address]
    representative: dict[str, NodeAddress] = {}
    for n in usable:
        if n.zone:
            representative.setdefault(n.zone, n)
    zones = sorted(representative)
    probes = []
    for i, a in enumerate(zones):
        if representative[a].name != me:
            continue
        for b in zones[i + 1 :]:
            target = representative[b]
            if target.address:
                probes.append(Probe(me, target.name, target.address))
    return probes


def parse_output(text: str) -> Latency:
    """Read ``netperf -t TCP_RR -- -o P50_LATENCY,P90_LATENCY,P99_LATENCY`` output (CSV, microseconds)."""
    for line in reversed(text.strip().splitlines()):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3:
            try:
                p50, p90, p99 = (float(f) for f in fields)
            except ValueError:
                continue
            if min(p50, p90, p99) < 0:
                break
            return Latency(p50, p90, p99)
    raise ValueError(f"no latency line in netperf output: {text.strip()[-200:]!r}")
