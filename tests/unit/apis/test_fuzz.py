"""The apis parsers against random garbage: a value, or a ValueError of one readable line."""

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.fuzz import GARBAGE, garbled, one_line, parse_error
from testkit.paths import EXAMPLES, UPSTREAM_FIXTURES
from toposched.apis.appgroup import AppGroup
from toposched.apis.graph import build_graph
from toposched.apis.meta import KubeObject
from toposched.apis.netperf import parse
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.apis.quantity import parse_quantity

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50) | st.sampled_from(GARBAGE),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
QUANTITY_TEXT = st.from_regex(r"[-+]?[0-9.]{0,25}([eE][-+]?[0-9]{0,12}|[KMGTPE]i?|[numk])?", fullmatch=True)
ZERO_PADDED = st.builds(
    lambda zeros, digits: "0" * zeros + digits, st.integers(0, 6000), st.text("0123456789", max_size=8)
)
"""Numbers of thousands of digits, most of them leading zeros (int() refuses more than 4,300)."""
SAMPLES: list[tuple[type[KubeObject], dict[str, Any]]] = [
    (model, yaml.safe_load(path.read_text()))
    for model, path in (
        (AppGroup, EXAMPLES / "appgroup-online-boutique.yaml"),
        (AppGroup, UPSTREAM_FIXTURES / "appgroup-online-boutique.yaml"),
        (NetworkTopology, EXAMPLES / "networktopology.yaml"),
        (NetworkTopology, UPSTREAM_FIXTURES / "networktopology.yaml"),
        (NodeResourceTopology, EXAMPLES / "noderesourcetopology-worker-1.yaml"),
        (NodeResourceTopology, UPSTREAM_FIXTURES / "noderesourcetopology.yaml"),
    )
]


@settings(max_examples=500, deadline=None)
@given(st.one_of(QUANTITY_TEXT, st.text(max_size=60), st.integers(), st.floats(), JSON))
def test_quantities(value: object) -> None:
    error = parse_error(lambda: parse_quantity(value))
    assert error is None or one_line(error)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(SAMPLES))), st.integers(0, 2**32), st.integers(1, 4))
def test_custom_resources(sample: int, seed: int, rounds: int) -> None:
    model, body = SAMPLES[sample]

    def read() -> None:
        parsed = model.model_validate(garbled(body, seed, rounds))
        if isinstance(parsed, AppGroup):
            build_graph(parsed.spec)  # InvalidSpecError is a ValueError

    error = parse_error(read)
    assert error is None or one_line(error)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=80) | st.sampled_from(["netperf.p90.latency.milliseconds.origin.a.destination.b"]),
        st.text(max_size=30)
        | st.sampled_from([str(g) for g in GARBAGE])
        | st.builds(
            lambda zeros, digits: "0" * zeros + digits, st.integers(0, 6000), st.text("0123456789", max_size=8)
        ),
    )
)
def test_configmap_keys(data: dict[str, str]) -> None:
    measured = parse(data, "p90", ["a", "b", "a.destination.b"])
    assert all(one_line(why) and len(why) < 400 for why in measured.malformed.values())
