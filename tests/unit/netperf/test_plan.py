import pytest

from toposched.netperf.plan import Latency, NodeAddress, Probe, parse_output, plan

NODES = [
    NodeAddress("a1", "10.0.0.1", "za"),
    NodeAddress("a2", "10.0.0.2", "za"),
    NodeAddress("b1", "10.0.1.1", "zb"),
    NodeAddress("c1", "10.0.2.1", "zc"),
    NodeAddress("c0", None, "zc"),  # no address: cannot be measured
    NodeAddress("x1", "10.0.3.1", None),  # no zone: only in all-pairs mode
]


@pytest.mark.parametrize(
    ("me", "all_pairs", "expected"),
    [
        ("a1", False, [Probe("a1", "b1", "10.0.1.1"), Probe("a1", "c1", "10.0.2.1")]),
        ("a2", False, []),
        ("b1", False, [Probe("b1", "c1", "10.0.2.1")]),
        ("c1", False, []),
        (
            "b1",
            True,
            [
                Probe("b1", n, a)
                for n, a in [("a1", "10.0.0.1"), ("a2", "10.0.0.2"), ("c1", "10.0.2.1"), ("x1", "10.0.3.1")]
            ],
        ),
    ],
    ids=["zone-representative", "not-representative", "middle-zone", "last-zone", "all-pairs"],
)
def test_plan(me: str, all_pairs: bool, expected: list[Probe]) -> None:
    assert plan(NODES, me, all_pairs) == expected


def test_every_zone_pair_is_measured_exactly_once() -> None:
    probes = [p for n in NODES for p in plan(NODES, n.name)]
    zone = {n.name: n.zone for n in NODES}
    pairs = [frozenset((zone[p.origin], zone[p.destination])) for p in probes]
    assert sorted(map(sorted, pairs)) == [["za", "zb"], ["za", "zc"], ["zb", "zc"]]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2285,2420,2775\n", Latency(2285, 2420, 2775)),
        ("MIGRATED TCP REQUEST/RESPONSE TEST\n20521,20942,23000\n", Latency(20521, 20942, 23000)),
        ("  100.5 , 200 , 300 \n", Latency(100.5, 200, 300)),
    ],
    ids=["plain", "with-banner", "spaces-and-fractions"],
)
def test_parse_output(text: str, expected: Latency) -> None:
    assert parse_output(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "establish control: are you sure", "1,2\n", "-1,-1,-1\n"],
    ids=["empty", "error", "two-fields", "negative"],
)
def test_parse_output_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="no latency line"):
        parse_output(text)


def test_milliseconds_truncate_like_the_reference_script() -> None:
    assert Latency(900, 2420, 20942).milliseconds() == {"p50": 1, "p90": 2, "p99": 20}
