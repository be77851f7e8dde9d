"""Yardsticks: the least summed dependency cost any placement could reach (network scenario),
and how many pods of a NUMA stream any placement could run (fragmentation scenarios).

Network. In the scenario a pod pair costs 0 on one node, 1 in one zone, and at least 5 across
zones; every workload has ``r`` replicas and a dependency's cost is the mean over its r * r pod
pairs. So any placement costs at least (pairs not on one node) / r^2, and the pairs on one node
are at most what the best grouping of the pods into nodes of ``capacity`` pods puts together.
Replicas of a workload are interchangeable, so a node's content is a *pattern* (how many
replicas of each workload) and the best grouping is a small integer program over how many
nodes get each pattern (HiGHS). That gives a lower bound; placing each AppGroup's groups on the
nodes of one zone of its own gives a placement of exactly that cost when the groups fit in a
zone, which makes it the optimum ("optimal"); otherwise both figures are reported.
``exhaustive`` checks this on tiny instances by trying every placement.

NUMA. A proven upper bound on the pods of a stream that can run at once (per resource, the most
pods whose requests fit in the cluster's total; the least of those), and beside it what an
offline best-fit-decreasing packing, every pod known in advance and each on one NUMA zone, runs.
"""

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Where = tuple[str, str, str]
"""(node, region, zone)."""


@dataclass(frozen=True)
class Instance:
    nodes: Mapping[str, Where]
    capacity: Mapping[str, int]
    """Pods per node."""
    pods: Sequence[str]
    pairs: Sequence[tuple[str, str, float]]
    """Dependent pod pairs and the weight of each in the objective."""


def total(instance: Instance, placement: Mapping[str, str], cost: Callable[[Where, Where], int]) -> float:
    return sum(w * cost(instance.nodes[placement[a]], instance.nodes[placement[b]]) for a, b, w in instance.pairs)


@dataclass(frozen=True)
class Grouping:
    together: int
    """Dependent pod pairs on one node."""
    nodes: int
    patterns: list[dict[str, int]]
    """One per node: workload -> replicas on it."""
    optimal: bool


def best_grouping(
    workloads: Sequence[str],
    edges: Sequence[tuple[str, str]],
    replicas: int,
    capacity: int,
    max_nodes: int | None = None,
    time_limit: float = 60,
) -> Grouping:
    """The most dependent pod pairs that nodes of ``capacity`` pods can hold together, for
    ``replicas`` pods per workload (at most ``max_nodes`` nodes when given)."""
    import highspy  # only the bench needs a solver

    patterns = _patterns(workloads, replicas, capacity)
    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    z = [h.addIntegral(lb=0, ub=replicas * len(workloads)) for _ in patterns]
    for w in workloads:
        h.addConstr(h.qsum(p[w] * v for p, v in zip(patterns, z, strict=True) if p[w]) == replicas)
    if max_nodes is not None:
        h.addConstr(h.qsum(z) <= max_nodes)
    gains = [sum(p[a] * p[b] for a, b in edges) for p in patterns]
    h.maximize(h.qsum(g * v for g, v in zip(gains, z, strict=True) if g))
    values = h.getSolution().col_value
    chosen: list[dict[str, int]] = []
    for p, v in zip(patterns, z, strict=True):
        chosen += [{w: c for w, c in p.items() if c}] * round(values[v.index])
    optimal = h.modelStatusToString(h.getModelStatus()).lower() == "optimal"
    together = sum(sum(p.get(a, 0) * p.get(b, 0) for a, b in edges) for p in chosen)
    return Grouping(together, len(chosen), chosen, optimal)


def _patterns(workloads: Sequence[str], replicas: int, capacity: int) -> list[dict[str, int]]:
    """Every node content of at most ``capacity`` pods, at most ``replicas`` of a workload."""
    out = []
    for size in range(1, capacity + 1):
        for combo in itertools.combinations_with_replacement(workloads, size):
            counts = {w: combo.count(w) for w in workloads}
            if max(counts.values()) <= replicas:
                out.append(counts)
    return out


def network_optimum(
    appgroups: Sequence[tuple[str, Sequence[str], Sequence[tuple[str, str]]]],
    replicas: int,
    capacity: int,
    nodes_per_zone: int,
) -> dict[str, Any]:
    """The network scenario's optimum: (name, workloads, edges) per AppGroup, each edge's cost the
    mean over its replicas^2 pod pairs, summed."""
    pairs_per_edge = replicas * replicas
    lower = upper = 0.0
    pair_costs: list[int] = []
    optimal = True
    for _, workloads, edges in appgroups:
        pairs = len(edges) * pairs_per_edge
        free = best_grouping(workloads, edges, replicas, capacity)
        lower += (pairs - free.together) / pairs_per_edge
        fitted = (
            free
            if free.nodes <= nodes_per_zone
            else best_grouping(workloads, edges, replicas, capacity, max_nodes=nodes_per_zone)
        )
        upper += (pairs - fitted.together) / pairs_per_edge
        optimal &= free.optimal and fitted.optimal and fitted.together == free.together
        pair_costs += [0] * fitted.together + [1] * (pairs - fitted.together)
    return {
        "total_cost": round(upper, 3),
        "bound": round(lower, 3),
        "status": "optimal" if optimal else "best found; the bound is a lower bound",
        "solver": "HiGHS",
        "pair_costs": pair_costs,
        "max_pair_cost": max(pair_costs, default=0),
        "method": (
            "The optimum (bench/optimum.py): the most dependent pod pairs nodes can hold together, an "
            "integer program over node contents solved with HiGHS, is a lower bound on any placement's "
            "cost; each AppGroup in a zone of its own reaches it."
        ),
    }


def exhaustive(instance: Instance, cost: Callable[[Where, Where], int]) -> float:
    """The least cost by trying every placement (tiny instances only: nodes ** pods of them)."""
    nodes = sorted(instance.nodes)
    best = float("inf")
    for combo in itertools.product(nodes, repeat=len(instance.pods)):
        if any(combo.count(n) > instance.capacity[n] for n in set(combo)):
            continue
        best = min(best, total(instance, dict(zip(instance.pods, combo, strict=True)), cost))
    return best


# NUMA --------------------------------------------------------------------------------------


def capacity_bound(zones_per_node: Sequence[Sequence[dict[str, float]]], pods: Sequence[dict[str, float]]) -> int:
    """At most this many of ``pods`` can run at once, however placed: for each resource, the
    most pods whose requests fit in the cluster's total of it (smallest first); the least of those."""
    totals: dict[str, float] = {}
    for node in zones_per_node:
        for zone in node:
            for r, v in zone.items():
                totals[r] = totals.get(r, 0.0) + v
    bound = len(pods)
    for r in {r for p in pods for r in p}:
        used, count = 0.0, 0
        for need in sorted(p.get(r, 0.0) for p in pods):
            if used + need > totals.get(r, 0.0):
                break
            used += need
            count += 1
        bound = min(bound, count)
    return bound


def packed_estimate(zones_per_node: Sequence[Sequence[dict[str, float]]], pods: Sequence[dict[str, float]]) -> int:
    """How many ``pods`` (each: resource -> amount, all on one NUMA zone) fit when placed offline,
    largest first, each on the zone it leaves least free (best fit decreasing)."""
    free = [dict(z) for node in zones_per_node for z in node]
    placed = 0
    for pod in sorted(pods, key=lambda p: tuple(sorted(p.items(), key=lambda kv: kv[0])), reverse=True):
        fits = [z for z in free if all(z.get(r, 0) >= v for r, v in pod.items())]
        if not fits:
            continue
        zone = min(fits, key=lambda z: sum(z.get(r, 0) - v for r, v in pod.items()))
        for r, v in pod.items():
            zone[r] -= v
        placed += 1
    return placed


def self_check() -> list[str]:
    """network_optimum against exhaustive search on tiny instances; the disagreements (none expected)."""

    def cost(a: Where, b: Where) -> int:
        return 0 if a[0] == b[0] else 1 if a[2] == b[2] else 5

    cases = [
        (["a", "b", "c"], [("a", "b"), ("b", "c")], 1, 2),
        (["a", "b"], [("a", "b")], 2, 2),
        (["a", "b", "c"], [("a", "b"), ("a", "c"), ("b", "c")], 1, 2),
        (["a", "b", "c"], [("a", "b"), ("a", "c")], 2, 3),
    ]
    problems = []
    for workloads, edges, replicas, capacity in cases:
        nodes = {f"{z}-{i}": (f"{z}-{i}", "r", z) for z in ("z0", "z1") for i in range(2)}
        pods = [f"{w}/{i}" for w in workloads for i in range(replicas)]
        weight = 1 / (replicas * replicas)
        pairs = [(f"{s}/{i}", f"{t}/{j}", weight) for s, t in edges for i in range(replicas) for j in range(replicas)]
        instance = Instance(nodes, dict.fromkeys(nodes, capacity), pods, pairs)
        found = network_optimum([("g", workloads, edges)], replicas, capacity, nodes_per_zone=2)["total_cost"]
        best = exhaustive(instance, cost)
        if abs(found - best) > 1e-6:
            problems.append(f"{workloads} {edges} x{replicas}, capacity {capacity}: {found} vs exhaustive {best}")
    return problems
