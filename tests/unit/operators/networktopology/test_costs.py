import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.apis.constants import REGION_LABEL, ZONE_LABEL
from toposched.apis.netperf import latency_key, parse, split_pair, timestamp_key
from toposched.apis.networktopology import NetworkTopology, WeightInfo
from toposched.operators.networktopology.costs import (
    Dependency,
    NodeInfo,
    Placement,
    UnknownPair,
    allocated_bandwidth,
    compute,
)

# Two regions: west (zones w1, w2) and east (e1, e2), two nodes per zone.
NODES = [
    NodeInfo("w1-a", "west", "w1"),
    NodeInfo("w1-b", "west", "w1"),
    NodeInfo("w2-a", "west", "w2"),
    NodeInfo("w2-b", "west", "w2"),
    NodeInfo("e1-a", "east", "e1"),
    NodeInfo("e1-b", "east", "e1"),
    NodeInfo("e2-a", "east", "e2"),
]
NAMES = [n.name for n in NODES]


def data(pairs: dict[tuple[str, str], str], pct: str = "p90") -> dict[str, str]:
    return {latency_key(pct, o, d): v for (o, d), v in pairs.items()}


def costs_of(weight: WeightInfo) -> dict[tuple[str, str, str], int]:
    return {
        (t.topology_key, o.origin, c.destination): c.network_cost
        for t in weight.topology_list
        for o in t.origin_list
        for c in o.cost_list or ()
    }


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        (latency_key("p90", "w1-a", "w2-a"), "abc", "not a whole number of milliseconds: 'abc'"),
        (latency_key("p90", "w1-a", "w2-a"), "-5", "not a whole number of milliseconds: '-5'"),
        (latency_key("p90", "w1-a", "w2-a"), "3.5", "not a whole number of milliseconds: '3.5'"),
        (latency_key("p90", "w1-a", "w2-a"), "999999", "999999 ms is not a plausible latency (limit 60000 ms)"),
        (latency_key("p90", "w1-a", "ghost"), "3", "unknown node ghost"),
        (latency_key("p90", "w1-a", "w1-a"), "3", "origin and destination are the same node"),
        (latency_key("p75", "w1-a", "w2-a"), "3", "unknown percentile 'p75' (expected one of p50, p90, p99)"),
        (
            "netperf_p90_latency_microseconds.origin.w1-a.destination.w2-a",
            "3000",
            "old microsecond key format; expected netperf.<pct>.latency.milliseconds.*",
        ),
        ("netperf.p90.something", "1", "unrecognised netperf key"),
        (timestamp_key("w1-a", "w2-a"), "yesterday", "not an RFC 3339 time: 'yesterday'"),
    ],
    ids=[
        "non-numeric",
        "negative",
        "fraction",
        "absurd",
        "unknown-node",
        "same-node",
        "unknown-percentile",
        "old-microsecond-format",
        "unrecognised",
        "bad-timestamp",
    ],
)
def test_bad_keys_are_reported_not_used(key: str, value: str, problem: str) -> None:
    parsed = parse({key: value, latency_key("p90", "w1-a", "e1-a"): "40"}, "p90", NAMES)
    assert parsed.malformed == {key: problem}
    assert parsed.latency_ms == {("w1-a", "e1-a"): 40}


def test_other_keys_and_percentiles_are_left_alone() -> None:
    parsed = parse(
        {"owner": "someone else", **data({("w1-a", "w2-a"): "9"}, "p50"), **data({("w1-a", "w2-a"): "12"})},
        "p90",
        NAMES,
    )
    assert parsed.latency_ms == {("w1-a", "w2-a"): 12}
    assert parsed.malformed == {}


def test_dotted_node_names_split_on_known_nodes() -> None:
    nodes = ["a.destination.b", "c", "a"]
    assert split_pair("a.destination.b.destination.c", nodes) == ("a.destination.b", "c")
    assert split_pair("c.destination.a.destination.b", nodes) == ("c", "a.destination.b")


node_names = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(node_names, min_size=2, max_size=6, unique=True), st.data())
def test_a_written_key_parses_back_to_its_pair(nodes: list[str], draw: st.DataObject) -> None:
    origin, destination = draw.draw(st.permutations(nodes))[:2]
    parsed = parse({latency_key("p99", origin, destination): "7"}, "p99", nodes)
    assert parsed.latency_ms == {(origin, destination): 7}


def test_median_per_link_both_directions() -> None:
    pairs = {
        ("w1-a", "w2-a"): "2",
        ("w1-b", "w2-b"): "4",
        ("w2-a", "w1-b"): "9",  # the same zone link measured the other way
        ("w1-a", "w1-b"): "1",  # within a zone: no cost
        ("w1-a", "e1-a"): "40",
        ("w2-b", "e2-a"): "50",
        ("e1-a", "e2-a"): "3",
    }
    result = compute(NODES, parse(data(pairs), "p90", NAMES), [])
    assert costs_of(result.weight) == {
        (REGION_LABEL, "east", "west"): 45,
        (REGION_LABEL, "west", "east"): 45,
        (ZONE_LABEL, "e1", "e2"): 3,
        (ZONE_LABEL, "e2", "e1"): 3,
        (ZONE_LABEL, "w1", "w2"): 4,
        (ZONE_LABEL, "w2", "w1"): 4,
    }
    assert result.unknown == []
    # Sorted as the upstream plugin expects: keys, origins, destinations.
    assert [t.topology_key for t in result.weight.topology_list] == [REGION_LABEL, ZONE_LABEL]


def test_missing_pair_falls_back_to_the_user_entry_else_is_unknown() -> None:
    user = NetworkTopology.model_validate(
        {
            "metadata": {"name": "nt"},
            "spec": {
                "configmapName": "cm",
                "weights": [
                    {
                        "name": "UserDefined",
                        "topologyList": [
                            {
                                "topologyKey": ZONE_LABEL,
                                "originList": [
                                    {"origin": "w1", "costList": [{"destination": "w2", "networkCost": 7}]},
                                ],
                            }
                        ],
                    }
                ],
            },
        }
    )
    pairs = {("w1-a", "e1-a"): "40", ("e1-a", "e2-a"): "3"}
    result = compute(NODES, parse(data(pairs), "p90", NAMES), user.spec.weights)
    costs = costs_of(result.weight)
    assert costs[(ZONE_LABEL, "w1", "w2")] == 7
    assert (ZONE_LABEL, "w2", "w1") not in costs
    assert result.unknown == [UnknownPair(ZONE_LABEL, "w2", "w1")]


def test_zero_latency_still_costs_one() -> None:
    result = compute(NODES, parse(data({("e1-a", "e2-a"): "0"}), "p90", NAMES), [])
    assert costs_of(result.weight)[(ZONE_LABEL, "e1", "e2")] == 1


@settings(max_examples=50, deadline=None)
@given(st.randoms(use_true_random=False))
def test_listing_order_does_not_matter(rng: random.Random) -> None:
    pairs = {(a, b): str(rng.randint(1, 100)) for a in NAMES for b in NAMES if a != b and rng.random() < 0.7}
    items = list(data(pairs).items())
    first = compute(NODES, parse(dict(items), "p90", NAMES), [])
    rng.shuffle(items)
    second = compute(NODES, parse(dict(items), "p90", NAMES), [])
    assert first.weight == second.weight


def test_capacity_from_user_entry_else_from_nodes() -> None:
    nodes = [
        NodeInfo("a", "r", "z1", Decimal(10**10)),
        NodeInfo("b", "r", "z1", Decimal(10**10)),
        NodeInfo("c", "r", "z2", Decimal(25 * 10**9)),
    ]
    result = compute(nodes, parse(data({("a", "c"): "2"}), "p90", ["a", "b", "c"]), [])
    entry = result.weight.topology_list[0].origin_list[0].cost_list[0]  # type: ignore[index]
    assert entry.bandwidth_capacity == 20 * 10**9  # min(10G + 10G, 25G)
    assert entry.bandwidth_allocated == 0


def test_allocated_bandwidth_is_level_triggered() -> None:
    by_name = {n.name: n for n in NODES}
    placements = [
        Placement("w1-a", "frontend"),
        Placement("w2-a", "cart"),
        Placement("w1-b", "cart"),
        Placement("e1-a", "redis"),
    ]
    deps = [Dependency("frontend", "cart", Decimal(100)), Dependency("cart", "redis", Decimal(50))]
    once = allocated_bandwidth(by_name, placements, deps)
    assert once == {
        (ZONE_LABEL, "w1", "w2"): Decimal(100),  # frontend@w1 -> cart@w2; cart@w1 is local
        (REGION_LABEL, "west", "east"): Decimal(100),  # both cart pods -> redis@east
    }
    assert allocated_bandwidth(by_name, list(reversed(placements)), deps) == once


def test_stale_measurements_are_reported() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    raw = {
        **data({("w1-a", "w2-a"): "2", ("e1-a", "e2-a"): "3"}),
        timestamp_key("w1-a", "w2-a"): "2025-12-31T00:00:00Z",
        timestamp_key("e1-a", "e2-a"): "2025-12-31T23:59:00Z",
    }
    result = compute(NODES, parse(raw, "p90", NAMES), [], now=now, max_age=timedelta(hours=1))
    assert result.stale == [("w1-a", "w2-a")]


def test_unlabeled_nodes_are_reported() -> None:
    nodes = [*NODES, NodeInfo("bare", None, None)]
    result = compute(nodes, parse(data({("bare", "w1-a"): "5"}), "p90", [n.name for n in nodes]), [])
    assert result.unlabeled_nodes == ["bare"]
