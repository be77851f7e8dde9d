"""The placement parsers (pod specs, Nodes, bound pods, NRT and NetworkTopology views, the NUMA
policy annotation) against random garbage: a value, or a ValueError of one readable line."""

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.fuzz import GARBAGE, garbled, one_line, parse_error
from testkit.nrt import POD
from testkit.paths import EXAMPLES
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.schedhook.placement.evaluate import evaluate
from toposched.schedhook.placement.parse import (
    from_nrt,
    links_of,
    node_allocatable,
    node_location,
    parse_pod,
    placed_pod,
)
from toposched.schedhook.placement.podpolicy import parse_annotation
from toposched.schedhook.placement.snapshot import snapshot

SEEDS = st.integers(0, 2**32)
ROUNDS = st.integers(1, 4)
NODE: dict[str, Any] = {
    "metadata": {"name": "n", "labels": {"topology.kubernetes.io/zone": "z1"}},
    "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
}
BOUND: dict[str, Any] = {
    "metadata": {
        "namespace": "ns",
        "labels": {"appgroup.diktyo.x-k8s.io": "ag"},
        "annotations": {"toposched.io/numa-zones": '["node-1"]'},
    },
    "spec": {"nodeName": "n", **POD["spec"]},
    "status": {"phase": "Running"},
}
NRT = yaml.safe_load((EXAMPLES / "noderesourcetopology-worker-1.yaml").read_text())
TOPOLOGY = yaml.safe_load((EXAMPLES / "networktopology.yaml").read_text())


@settings(max_examples=400, deadline=None)
@given(SEEDS, ROUNDS)
def test_pods(seed: int, rounds: int) -> None:
    body = garbled(POD, seed, rounds)
    error = parse_error(lambda: parse_pod(body))
    assert error is None or one_line(error)
    results = evaluate(body, ["worker-1"], snapshot(nrts=[NRT]))  # never raises: a bad pod fails every node
    assert results.pod_error == (None if error is None else f"invalid pod: {error}")


@settings(max_examples=300, deadline=None)
@given(SEEDS, ROUNDS)
def test_nodes_and_bound_pods(seed: int, rounds: int) -> None:
    node = garbled(NODE, seed, rounds)
    if isinstance(node, dict):
        node_location(node)  # never raises
        error = parse_error(lambda: node_allocatable(node))
        assert error is None or one_line(error)
    pod = garbled(BOUND, seed, rounds)
    if isinstance(pod, dict):
        placed_pod(pod)  # None or a Placed: never raises


@settings(max_examples=300, deadline=None)
@given(SEEDS, ROUNDS)
def test_nrt_and_networktopology_views(seed: int, rounds: int) -> None:
    error = parse_error(lambda: from_nrt(NodeResourceTopology.model_validate(garbled(NRT, seed, rounds))))
    assert error is None or one_line(error)
    error = parse_error(
        lambda: links_of(NetworkTopology.model_validate(garbled(TOPOLOGY, seed, rounds)), "UserDefined")
    )
    assert error is None or one_line(error)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=80),
        st.sampled_from([*GARBAGE, '{"numaTopologyPolicy": ' + "1" * 5000 + "}", "[" * 100_000]),
        st.from_regex(r'\{"numaTopologyPolicy": ".{0,20}"(, "[a-zA-Z]{0,25}": .{0,10})?\}', fullmatch=True),
    )
)
def test_numa_policy_annotation(raw: object) -> None:
    error = parse_error(lambda: parse_annotation(raw))
    assert error is None or (one_line(error) and len(error) < 300)
