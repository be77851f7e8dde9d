"""Node scores from NUMA zones, with the upstream NodeResourceTopologyMatch formulas. Pure.

LeastAllocated, MostAllocated and BalancedAllocation score a zone from the request ``r`` and
the zone's available ``a`` (integer math, 0..100) and weight the requested resources
(default 1 each). Upstream scores the worst zone; toposched scores the zone(s) the kubelet is
predicted to use when a prediction exists (``zones_for``), and the worst zone otherwise.
LeastNUMANodes rewards pods that fit in few, close NUMA nodes.
"""

import itertools
import statistics
from collections.abc import Mapping, Sequence
from decimal import Decimal

import numpy as np
import numpy.typing as npt

from toposched.apis.kubelet import POD_SCOPE
from toposched.schedhook.placement.kubelet.claims import GUARANTEED, effective, numa_affine, qos
from toposched.schedhook.placement.kubelet.hints import milli, milli_request
from toposched.schedhook.placement.model import HOST_LEVEL, POD, NodeTopology, NumaZone, Pod

Ints = npt.NDArray[np.int64]

MAX_SCORE = 100
LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
BALANCED_ALLOCATION = "BalancedAllocation"
LEAST_NUMA_NODES = "LeastNUMANodes"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, BALANCED_ALLOCATION, LEAST_NUMA_NODES)
MISSING_DISTANCE = 255
EXACT = np.iinfo(np.int64).max // MAX_SCORE
"""Free amounts (in thousandths) above this make ``share * MAX_SCORE`` overflow 64 bits: zones
with tens of TiB of memory, which the bounds (``apis.limits``) allow; scored with Python ints."""


def flat_score(pod: Pod) -> int | None:
    """The score of every node for a pod that is not Guaranteed (None for one that is): its
    requests are not held to any zone, so no node's zones are better than another's."""
    return None if qos(pod) == GUARANTEED else MAX_SCORE


def _scored(request: Mapping[str, Decimal]) -> dict[str, Decimal]:
    return {r: q for r, q in request.items() if q > 0 and r not in HOST_LEVEL}


def zone_score(
    strategy: str, request: Mapping[str, Decimal], available: Mapping[str, Decimal], weights: Mapping[str, int]
) -> int:
    """One zone's (or merged zones') score for ``request``."""
    scored = _scored(request)
    if not scored:
        return 0
    if strategy == BALANCED_ALLOCATION:
        fractions = []
        for r, q in scored.items():
            a = available.get(r, Decimal(0))
            f = Decimal(1) if a == 0 else q / a
            if f > 1:
                return 0
            fractions.append(float(f))
        if len(fractions) < 2:
            return MAX_SCORE  # one fraction has no variance
        return int((1 - statistics.variance(fractions)) * MAX_SCORE)
    wanted = np.array([milli_request(q) for q in scored.values()], dtype=np.int64)
    free = np.array([[milli(available.get(r, Decimal(0)))] for r in scored], dtype=np.int64)
    weighting = np.array([weights.get(r, 1) for r in scored], dtype=np.int64)
    return int(allocation_score(strategy, wanted, free, weighting, bool(free.max() > EXACT))[0])


def allocation_score(strategy: str, wanted: Ints, free: Ints, weights: Ints, large: bool) -> Ints:
    """LeastAllocated or MostAllocated of requests ``wanted`` ([resource], thousandths) given what is
    ``free`` ([resource, ...]: one zone set, or many nodes' at once): each resource scores how much
    of its free amount the request takes (MostAllocated) or leaves (LeastAllocated), 0 when it
    does not fit, and counts with its weight (at least 1). ``large``: some free amount may be above
    ``EXACT``, where 64-bit products overflow."""
    want = wanted.reshape(wanted.shape + (1,) * (free.ndim - 1))
    usable = (free > 0) & (want <= free)
    safe = np.where(usable, free, 1)
    share = np.broadcast_to(want, free.shape) if strategy == MOST_ALLOCATED else free - want
    if large:
        value = np.array(
            [s * MAX_SCORE // f for s, f in zip(share.ravel().tolist(), safe.ravel().tolist(), strict=True)],
            dtype=np.int64,
        ).reshape(free.shape)
    else:
        value = share * MAX_SCORE // safe
    weight = np.maximum(weights, 1)
    total: Ints = (value * usable * weight.reshape(want.shape)).sum(axis=0) // int(weight.sum())
    return total


def _merged(zones: Sequence[NumaZone]) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for z in zones:
        for r, v in z.available.items():
            out[r] = out.get(r, Decimal(0)) + v
    return out


def node_score(
    strategy: str,
    node: NodeTopology,
    pod: Pod,
    predicted: Mapping[str, Sequence[int]] | None = None,
    weights: Mapping[str, int] | None = None,
) -> int:
    """The node's score; ``predicted`` maps container (or ``pod``) to the NUMA ids the kubelet would use."""
    if strategy == LEAST_NUMA_NODES:
        return least_numa_nodes(node, pod)
    flat = flat_score(pod)
    if flat is not None:
        return flat
    weights = weights or {"cpu": 1, "memory": 1}
    by_id = {z.numa: z for z in node.zones}

    def score_of(name: str, request: Mapping[str, Decimal]) -> int:
        chosen = [by_id[n] for n in (predicted or {}).get(name, ()) if n in by_id]
        if chosen:
            return zone_score(strategy, request, _merged(chosen), weights)
        scores = [s for z in node.zones if (s := zone_score(strategy, request, z.available, weights)) > 0]
        return min(scores) if scores else 0  # upstream: assume the worst zone

    if node.scope == POD_SCOPE:
        return score_of(POD, effective(pod))
    containers = [*pod.init_containers, *pod.containers]
    if not containers:
        return 0
    return sum(score_of(c.name, c.request) for c in containers) // len(containers)


def _distance(combo: Sequence[int], costs: Mapping[int, Mapping[int, int]]) -> float:
    total = sum(costs.get(i, {}).get(j, MISSING_DISTANCE) for i in combo for j in combo)
    return total / (len(combo) ** 2)


def _fewest_zones(
    request: Mapping[str, Decimal],
    guaranteed: bool,
    free: dict[int, dict[str, Decimal]],
    costs: Mapping[int, Mapping[int, int]],
) -> tuple[int, bool, tuple[int, ...]] | None:
    """(number of zones, optimal distance, zones) of the smallest fitting combination."""
    wanted = {r: q for r, q in request.items() if q > 0}
    ids = sorted(free)
    for k in range(1, len(ids) + 1):
        combos = list(itertools.combinations(ids, k))
        best_distance = min(_distance(c, costs) for c in combos)
        fitting = []
        for combo in combos:
            if any(r not in free[n] for n in combo for r in wanted):
                continue
            fits = all(
                (not guaranteed and numa_affine(r)) or sum(free[n][r] for n in combo) >= q for r, q in wanted.items()
            )
            if fits:
                fitting.append(combo)
        if fitting:
            chosen = min(fitting, key=lambda c: _distance(c, costs))
            return k, _distance(chosen, costs) == best_distance, chosen
    return None


def least_numa_nodes(node: NodeTopology, pod: Pod) -> int:
    """100 - zones x (100 / maxNUMA), plus half a step when the zones are as close as any could be."""
    step = MAX_SCORE // node.max_numa
    costs = node.distances
    free = {z.numa: dict(z.available) for z in node.zones}
    guaranteed = qos(pod) == GUARANTEED
    reported = {r for z in node.zones for r in z.available}
    if node.scope == POD_SCOPE:
        requests = [effective(pod)]
    else:
        requests = [c.request for c in [*pod.init_containers, *pod.containers]]
    worst, optimal, any_numa = 0, True, False
    for request in requests:
        relevant = {r: q for r, q in request.items() if q > 0 and r in reported}
        if not relevant:
            continue
        any_numa = True
        found = _fewest_zones(relevant, guaranteed, free, costs)
        if found is None:
            return 0
        k, opt, zones = found
        worst, optimal = max(worst, k), optimal and opt
        if node.scope != POD_SCOPE:
            for r, q in relevant.items():  # lowest zone first, as upstream
                for n in zones:
                    used = min(free[n].get(r, Decimal(0)), q)
                    free[n][r] = free[n].get(r, Decimal(0)) - used
                    q -= used
    if not any_numa:
        return MAX_SCORE
    return MAX_SCORE - worst * step + (step // 2 if optimal else 0)
