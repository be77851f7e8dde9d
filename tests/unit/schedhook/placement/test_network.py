from decimal import Decimal

import pytest

from toposched.apis.constants import REGION_LABEL, ZONE_LABEL
from toposched.schedhook.placement.network import (
    Edge,
    Link,
    Location,
    NetworkSettings,
    evaluate,
    normalize,
    pair_cost,
    with_cohesion,
)

# networkoverhead_test.go: regions us-west-1 <-> us-east-1 cost 20; zones Z1 <-> Z2 5, Z3 <-> Z4 10.
LINKS = {
    (REGION_LABEL, "us-west-1", "us-east-1"): Link(20),
    (REGION_LABEL, "us-east-1", "us-west-1"): Link(20),
    (ZONE_LABEL, "Z1", "Z2"): Link(5),
    (ZONE_LABEL, "Z2", "Z1"): Link(5),
    (ZONE_LABEL, "Z3", "Z4"): Link(10),
    (ZONE_LABEL, "Z4", "Z3"): Link(10),
}
LOCATIONS = {
    "n-1": Location("us-west-1", "Z1"),
    "n-2": Location("us-west-1", "Z1"),
    "n-3": Location("us-west-1", "Z2"),
    "n-4": Location("us-west-1", "Z2"),
    "n-5": Location("us-east-1", "Z3"),
    "n-6": Location("us-east-1", "Z3"),
    "n-7": Location("us-east-1", "Z4"),
    "n-8": Location("us-east-1", "Z4"),
}
NODES = sorted(LOCATIONS)
# AppGroup "basic": p1 -> p2 -> p3, maxNetworkCost 0.
BASIC = [Edge("p1", "p2", max_cost=0), Edge("p2", "p3", max_cost=0)]
UPSTREAM = NetworkSettings(unknown_cost=100, count_dependents=False)


@pytest.mark.parametrize(
    ("workload", "raw", "normalized"),
    [
        ("p1", [20, 20, 20, 20, 0, 1, 10, 10], [0, 0, 0, 0, 100, 95, 50, 50]),
        ("p2", [0, 1, 5, 5, 20, 20, 20, 20], [100, 95, 75, 75, 0, 0, 0, 0]),
        ("p3", [0] * 8, [0] * 8),
    ],
    ids=["p1", "p2", "p3-no-dependencies"],
)
def test_upstream_score_vectors(workload: str, raw: list[int], normalized: list[int]) -> None:
    placed = [("p1", "n-2"), ("p2", "n-5"), ("p3", "n-1")]
    costs = {n: evaluate(workload, n, LOCATIONS, BASIC, placed, LINKS, UPSTREAM).cost for n in NODES}
    assert [costs[n] for n in NODES] == raw
    assert [normalize(costs)[n] for n in NODES] == normalized


@pytest.mark.parametrize(
    ("workload", "node", "fits", "counts"),
    [
        ("p1", "n-1", False, (0, 1)),
        ("p1", "n-6", True, (1, 0)),
        ("p2", "n-5", False, (0, 1)),
        ("p2", "n-7", True, (1, 0)),
        ("p3", "n-1", True, (0, 0)),
        ("outsider", "n-1", True, (0, 0)),
    ],
    ids=["p1-on-n1", "p1-on-n6", "p2-on-n5", "p2-on-n7", "p3-anywhere", "no-appgroup"],
)
def test_upstream_filter_vectors(workload: str, node: str, fits: bool, counts: tuple[int, int]) -> None:
    placed = [("p1", "n-2"), ("p2", "n-5"), ("p3", "n-8")]
    result = evaluate(workload, node, LOCATIONS, BASIC, placed, LINKS, UPSTREAM)
    assert (result.fits, (result.satisfied, result.violated)) == (fits, counts)


def test_dependents_count_too() -> None:
    # p3 depends on nobody, but p2 (placed on n-5) depends on p3: near n-5 is better.
    placed = [("p2", "n-5")]
    near = evaluate("p3", "n-6", LOCATIONS, BASIC, placed, LINKS)
    far = evaluate("p3", "n-1", LOCATIONS, BASIC, placed, LINKS)
    assert (near.cost, far.cost) == (1, 20)
    assert evaluate("p3", "n-1", LOCATIONS, BASIC, placed, LINKS, UPSTREAM).cost == 0


def test_unknown_pair_costs_the_largest_known_not_zero_or_100() -> None:
    links = {k: v for k, v in LINKS.items() if k != (ZONE_LABEL, "Z2", "Z1")}
    result = evaluate("p1", "n-3", LOCATIONS, BASIC, [("p2", "n-1")], links)
    assert result.cost == 10  # largest known zone cost
    assert (result.satisfied, result.violated) == (0, 0)
    assert "no known cost from Z2 to Z1; counted as 10" in result.reasons


def test_min_bandwidth_against_free_capacity() -> None:
    links = {**LINKS, (ZONE_LABEL, "Z3", "Z4"): Link(10, capacity=Decimal(10**9), allocated=Decimal(9 * 10**8))}
    edges = [Edge("web", "db", max_cost=50, min_bandwidth=Decimal(2 * 10**8))]
    result = evaluate("web", "n-5", LOCATIONS, edges, [("db", "n-7")], links)
    assert not result.fits
    assert result.reasons == ["bandwidth Z3 -> Z4: 200000000 needed, 100000000 free"]
    assert evaluate("web", "n-8", LOCATIONS, edges, [("db", "n-7")], links).fits  # same zone: no link crossed


def test_absent_max_cost_means_no_limit() -> None:
    result = evaluate("a", "n-1", LOCATIONS, [Edge("a", "b")], [("b", "n-5")], LINKS)
    assert (result.satisfied, result.violated, result.cost) == (1, 0, 20)


def test_unlabeled_dependency_node() -> None:
    result = evaluate("p1", "n-1", {**LOCATIONS, "bare": Location(None, None)}, BASIC, [("p2", "bare")], LINKS)
    assert (result.violated, result.cost) == (1, 100)


def test_normalize_edge_cases() -> None:
    assert normalize({}) == {}
    assert normalize({"a": 0, "b": 0}) == {"a": 0, "b": 0}
    assert normalize({"a": 7, "b": 7}) == {"a": 100, "b": 100}


@pytest.mark.parametrize(
    ("a", "b", "cost"),
    [
        ("n-1", "n-1", 0),
        ("n-1", "n-2", 1),
        ("n-1", "n-3", 5),
        ("n-5", "n-8", 10),
        ("n-1", "n-7", 20),
        ("n-1", "unlabeled", 100),
    ],
    ids=["same-node", "same-zone", "zone-pair", "other-zone-pair", "region-pair", "unlabeled"],
)
def test_pair_cost_as_evaluate_counts_it(a: str, b: str, cost: int) -> None:
    assert pair_cost(a, b, LOCATIONS, LINKS) == cost
    if b in LOCATIONS:  # the same figure evaluate gives a single dependency without a limit
        assert evaluate("x", a, LOCATIONS, [Edge("x", "y")], [("y", b)], LINKS).cost == cost


@pytest.mark.parametrize(
    ("cost", "members", "expected"),
    [
        (7, [], 7),
        (0, ["n-1"], 0),
        (0, ["n-1", "n-7"], 20),
        (3, ["n-1", "n-7"], 26),
    ],
    ids=["no-members", "next-to-the-only-member", "mean-of-two-in-halves", "dependencies-count-per-member"],
)
def test_with_cohesion_adds_the_mean_cost_to_the_members(cost: int, members: list[str], expected: int) -> None:
    costs = {("n-1", m): pair_cost("n-1", m, LOCATIONS, LINKS) for m in members}
    assert with_cohesion(cost, "n-1", members, costs) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({}, {}),
        ({"a": 0, "b": 0}, {"a": 0, "b": 0}),
        ({"a": 7, "b": 7}, {"a": 100, "b": 100}),
        ({"a": 0, "b": 1, "c": 180}, {"a": 100, "b": 87, "c": 0}),
        ({"a": 20, "b": 21, "c": 200}, {"a": 100, "b": 87, "c": 0}),
    ],
    ids=["empty", "all-free", "all-equal", "next-door-vs-far", "shifted-by-the-cheapest"],
)
def test_normalize_on_a_log_scale_keeps_near_differences(raw: dict[str, int], expected: dict[str, int]) -> None:
    assert normalize(raw, log_scale=True) == expected
    linear = normalize(raw)
    assert sorted(raw, key=lambda n: (-linear[n], n)) == sorted(
        raw, key=lambda n: (-normalize(raw, log_scale=True)[n], n)
    )
