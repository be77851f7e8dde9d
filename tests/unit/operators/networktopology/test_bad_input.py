"""One unreadable AppGroup or NetworkTopology is reported and left out; the others are computed as before."""

import random
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.fuzz import mutate_tree
from testkit.paths import EXAMPLES, UPSTREAM_FIXTURES
from toposched.apis.constants import REGION_LABEL
from toposched.apis.netperf import parse
from toposched.apis.networktopology import NetworkTopology
from toposched.operators.appgroup.status import PodView
from toposched.operators.networktopology.costs import NodeInfo, node_info
from toposched.operators.networktopology.reconciler import NetworkTopologyReconciler
from toposched.operators.networktopology.status import configmap_name_problem, reconcile
from toposched.operators.runtime import Runtime
from toposched.operators.settings import OperatorSettings

NOW = datetime(2024, 5, 1, tzinfo=UTC)
NODES = [NodeInfo("a", "r1", "z1"), NodeInfo("b", "r1", "z2"), NodeInfo("c", "r2", "z3")]


def appgroup(namespace: str, bandwidth: object = "100Mi") -> dict[str, Any]:
    body = yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text())
    body["metadata"].update(namespace=namespace, resourceVersion="1")
    body["spec"]["workloads"][0]["dependencies"][0]["minBandwidth"] = bandwidth
    return body  # type: ignore[no-any-return]


def reconciler(appgroups: dict[tuple[str, str], list[dict[str, Any]]]) -> NetworkTopologyReconciler:
    """The reconciler's pure part, over indexes shaped as Kopf's (key -> list of bodies or views)."""
    settings = OperatorSettings(0, "127.0.0.1", False, "ns", "lease", "me", 0.1, "p90", 3600, 300)
    pods = {
        (ns, "online-boutique"): [PodView(True, None, node, w) for node, w in (("a", "frontend"), ("c", "cartservice"))]
        for ns, _ in appgroups
    }
    return NetworkTopologyReconciler(Runtime(settings, api=None), {}, appgroups, pods)


@pytest.mark.parametrize(
    "bandwidth",
    ["1e999999999", "-1", "11T", [1], "lots"],
    ids=["exponent-of-a-billion", "negative", "above-10T", "a-list", "not-a-quantity"],
)
def test_an_unreadable_appgroup_is_left_out_of_bandwidth_allocated_and_others_count(bandwidth: object) -> None:
    """Issue item 5: minBandwidth 1e999999999 made every NetworkTopology reconcile fail."""
    good = {("x", "online-boutique"): [appgroup("x")]}
    both = {**good, ("y", "online-boutique"): [appgroup("y", bandwidth)]}
    assert reconciler(both)._allocated(NODES) == reconciler(good)._allocated(NODES)
    assert reconciler(good)._allocated(NODES) == {(REGION_LABEL, "r1", "r2"): Decimal(100 * 2**20)}


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), mutations=st.integers(1, 3))
def test_garbage_in_one_appgroup_never_changes_the_others_allocation(seed: int, mutations: int) -> None:
    rng = random.Random(seed)
    spoiled: Any = appgroup("y")
    for _ in range(mutations):
        spoiled, _ = mutate_tree(spoiled, rng)
    if not isinstance(spoiled, dict):
        spoiled = {}
    spoiled["metadata"] = {"name": "online-boutique", "namespace": "y", "resourceVersion": "2"}
    good = {("x", "online-boutique"): [appgroup("x")]}
    alone = reconciler(good)._allocated(NODES)
    together = reconciler({**good, ("y", "online-boutique"): [spoiled]})._allocated(NODES)
    for key, value in alone.items():  # y may add its own (valid) allocations, never take x's away
        assert together.get(key, Decimal(0)) >= value


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("netperf-metrics", None),
        ("a.b-c", None),
        ("netperfMetrics", "spec.configmapName 'netperfMetrics' is not a ConfigMap name"),
        ("a/b", "spec.configmapName 'a/b' is not a ConfigMap name"),
        ("", "spec.configmapName '' is not a ConfigMap name"),
        ("a" * 254, "is not a ConfigMap name (lower-case letters, digits, '-' and '.', at most 253 characters)"),
    ],
    ids=["valid", "dots", "capitals-as-upstream-writes", "slash", "empty", "too-long"],
)
def test_configmap_name(name: str, problem: str | None) -> None:
    found = configmap_name_problem(name)
    assert found == problem if problem is None else (found is not None and problem in found)


def test_an_invalid_configmap_name_is_the_condition_not_configmap_not_found() -> None:
    nt = NetworkTopology.model_validate(yaml.safe_load((UPSTREAM_FIXTURES / "networktopology.yaml").read_text()))
    problem = configmap_name_problem(nt.spec.configmap_name)
    assert problem is not None
    outcome = reconcile(nt, None, None, 3, NOW, invalid=problem)
    (ready,) = outcome.status.conditions or []
    assert (ready.status, ready.reason) == ("False", "InvalidSpec")
    assert "netperfMetrics" in str(ready.message)
    assert outcome.weights is None  # the published costs stay
    assert [reason for reason, _ in outcome.warnings] == ["InvalidSpec"]
    again = reconcile(nt.model_copy(update={"status": outcome.status}), None, None, 3, NOW, invalid=problem)
    assert again.warnings == []  # said once


@pytest.mark.parametrize(
    ("value", "bandwidth"),
    [("25G", Decimal(25 * 10**9)), ("1e999999", None), ("-1", None), ("11T", None), ("lots", None)],
    ids=["valid", "huge", "negative", "above-10T", "not-a-quantity"],
)
def test_a_node_bandwidth_no_nic_has_is_ignored_with_a_warning(value: str, bandwidth: Decimal | None) -> None:
    warnings: list[str] = []
    info = node_info("n", {}, {"network.aware.com/bandwidth": value}, warn=warnings.append)
    assert info.bandwidth == bandwidth
    assert len(warnings) == (bandwidth is None)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("9" * 5000, "99999999999... (5000 digits) ms is not a plausible latency"),
        ("0" * 5000 + "5", None),
        ("\u0661\u0662", "not a whole number of milliseconds"),
        ("1" * 100 + "x", "not a whole number of milliseconds: '1111111111111111111111111111111111111111'..."),
    ],
    ids=["five-thousand-digits", "five-thousand-leading-zeros", "arabic-indic-digits", "long-garbage"],
)
def test_configmap_values_that_are_garbage(value: str, why: str | None) -> None:
    """None: a value that only looks like garbage (5 ms, written with leading zeros)."""
    measured = parse({"netperf.p90.latency.milliseconds.origin.a.destination.b": value}, "p90", ["a", "b"])
    if why is None:
        assert measured.latency_ms == {("a", "b"): 5}
        return
    assert measured.latency_ms == {}
    (reason,) = measured.malformed.values()
    assert why in reason
