"""Objects no machine or network can have are invalid, with one readable line per problem."""

import copy
import re
from decimal import Decimal
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from testkit.paths import EXAMPLES, UPSTREAM_FIXTURES
from toposched.apis.appgroup import AppGroup
from toposched.apis.errors import describe, field_path, problems
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.apis.quantity import parse_quantity


def example(name: str) -> dict[str, Any]:
    data = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1e999999", "'1e999999' is more than any machine has (at most 8Pi)"),
        ("1e999999999", "'1e999999999' is more than any machine has"),
        ("-1e999999999", "is more than any machine has"),
        ("9Pi", "'9Pi' is more than any machine has"),
        (10**5000, "an integer of 16610 bits is more than any machine has"),
        ("nan", "'nan' is not a Kubernetes quantity"),
        (float("nan"), "nan is not a Kubernetes quantity"),
        ("\u0661\u0662", "is not a Kubernetes quantity"),
        (" 1", "' 1' is not a Kubernetes quantity"),
        ("1_000", "'1_000' is not a Kubernetes quantity"),
        ("1e5Mi", "'1e5Mi' is not a Kubernetes quantity"),
        ("1" * 41, "is not a Kubernetes quantity"),
        (True, "expected a quantity (a string or a number), not bool"),
        ([1], "expected a quantity (a string or a number), not list"),
    ],
    ids=[
        "exponent-of-a-million",
        "exponent-of-a-billion",
        "negative-huge",
        "beyond-8Pi",
        "huge-int",
        "nan-text",
        "nan-float",
        "arabic-indic-digits",
        "leading-blank",
        "underscore",
        "exponent-and-suffix",
        "too-long",
        "bool",
        "list",
    ],
)
def test_quantities_beyond_any_machine_are_errors(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_quantity(value)


@pytest.mark.parametrize(
    ("value", "exact"),
    [("8Pi", Decimal(2**53)), ("1e-999999999", Decimal("1e-9")), (0.1, Decimal("0.1")), ("+5", Decimal(5))],
    ids=["8Pi", "finer-than-nano-rounds-up", "float-from-yaml", "plus-sign"],
)
def test_quantities_within_bounds(value: object, exact: Decimal) -> None:
    assert parse_quantity(value) == exact


def _nrt_zone0(body: dict[str, Any]) -> dict[str, Any]:
    return body["zones"][0]  # type: ignore[no-any-return]


def _set_resource(field: str, value: object, index: int = 0) -> Any:
    def spoil(body: dict[str, Any]) -> None:
        _nrt_zone0(body)["resources"][index][field] = value

    return spoil


def _distance(value: int, index: int = 1) -> Any:
    def spoil(body: dict[str, Any]) -> None:
        _nrt_zone0(body)["costs"][index]["value"] = value

    return spoil


def _duplicate_zone(body: dict[str, Any]) -> None:
    body["zones"].append(copy.deepcopy(body["zones"][0]))


def _duplicate_resource(body: dict[str, Any]) -> None:
    _nrt_zone0(body)["resources"].append(copy.deepcopy(_nrt_zone0(body)["resources"][0]))


def _zones_together(body: dict[str, Any]) -> None:
    for zone in body["zones"]:
        zone["resources"][0].update(capacity="5000", allocatable="5000", available="5000")


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (_set_resource("available", "1e999999"), "zones[0].resources[0].available: '1e999999' is more than any"),
        (_set_resource("capacity", "-1"), "zones[0].resources[0]: capacity: cpu -1 is negative"),
        (_set_resource("available", "31"), "zones[0].resources[0]: available 31 is more than allocatable 30 of cpu"),
        (_set_resource("capacity", "8193"), "capacity: cpu 8193 is more than any machine has (at most 8192)"),
        (_set_resource("capacity", "5Pi", 1), "capacity: memory 5629499534213120 is more than any machine has"),
        (_distance(-1), "zones[0].costs[1].value: Input should be greater than or equal to 0"),
        (_distance(256), "zones[0].costs[1].value: Input should be less than or equal to 255"),
        (_distance(11, 0), "zones[0]: the distance of node-0 to itself is 11, not 10"),
        (_duplicate_zone, "zone name 'node-0' is listed twice"),
        (_duplicate_resource, "zones[0]: resource name 'cpu' is listed twice"),
        (_zones_together, "the NUMA zones together: cpu 10000 is more than any machine has"),
    ],
    ids=[
        "quantity-of-1e999999",
        "negative-capacity",
        "available-above-allocatable",
        "more-cpus-than-a-machine",
        "more-memory-than-a-machine",
        "negative-distance",
        "distance-above-255",
        "distance-to-itself-not-10",
        "duplicate-zone",
        "duplicate-resource",
        "zones-together-beyond-a-machine",
    ],
)
def test_invalid_nrt(spoil: Any, message: str) -> None:
    body = example("noderesourcetopology-worker-1.yaml")
    spoil(body)
    with pytest.raises(ValidationError) as info:
        NodeResourceTopology.model_validate(body)
    assert any(message in p for p in problems(info.value)), problems(info.value)


def _dependency(**fields: object) -> Any:
    def spoil(body: dict[str, Any]) -> None:
        body["spec"]["workloads"][0]["dependencies"][0].update(fields)

    return spoil


def _selector(value: str) -> Any:
    def spoil(body: dict[str, Any]) -> None:
        body["spec"]["workloads"][2]["workload"]["selector"] = value

    return spoil


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (_dependency(minBandwidth="1e999999999"), "minBandwidth: '1e999999999' is more than any machine has"),
        (_dependency(minBandwidth="-1"), "minBandwidth: '-1' is negative"),
        (_dependency(minBandwidth="11T"), "minBandwidth: '11T' is more than any link carries (at most 10T)"),
        (_selector("app in (a, b)"), "workload.selector: String should match pattern"),
        (_selector(""), "workload.selector: String should match pattern"),
        (_selector("a" * 64), "workload.selector: String should have at most 63 characters"),
    ],
    ids=["bandwidth-1e999999999", "negative-bandwidth", "bandwidth-above-10T", "selector-expression", "empty", "long"],
)
def test_invalid_appgroup(spoil: Any, message: str) -> None:
    body = example("appgroup-online-boutique.yaml")
    spoil(body)
    with pytest.raises(ValidationError) as info:
        AppGroup.model_validate(body)
    assert any(message in p for p in problems(info.value)), problems(info.value)


def _cost(**fields: object) -> Any:
    def spoil(body: dict[str, Any]) -> None:
        body["spec"]["weights"][0]["topologyList"][0]["originList"][0]["costList"][0].update(fields)

    return spoil


def _duplicate_weight(body: dict[str, Any]) -> None:
    body["spec"]["weights"].append(copy.deepcopy(body["spec"]["weights"][0]))


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (_cost(bandwidthCapacity="-1Gi"), "bandwidthCapacity: '-1Gi' is negative"),
        (_cost(bandwidthAllocated="1e999999"), "bandwidthAllocated: '1e999999' is more than any machine has"),
        (_duplicate_weight, "spec: weight name 'UserDefined' is listed twice"),
    ],
    ids=["negative-capacity", "huge-allocated", "duplicate-weight"],
)
def test_invalid_networktopology(spoil: Any, message: str) -> None:
    body = example("networktopology.yaml")
    spoil(body)
    with pytest.raises(ValidationError) as info:
        NetworkTopology.model_validate(body)
    assert any(message in p for p in problems(info.value)), problems(info.value)


def test_upstream_objects_stay_valid() -> None:
    for name, model in (
        ("appgroup-online-boutique.yaml", AppGroup),
        ("networktopology.yaml", NetworkTopology),
        ("noderesourcetopology.yaml", NodeResourceTopology),
    ):
        model.model_validate(yaml.safe_load((UPSTREAM_FIXTURES / name).read_text()))


def test_validation_errors_read_one_line_per_problem_without_links() -> None:
    body = example("noderesourcetopology-worker-1.yaml")
    body["zones"][0]["resources"][0]["capacity"] = ["not", "a", "quantity"]
    body["zones"][1]["resources"][1]["available"] = "lots\nof\nlines"
    del body["zones"][1]["type"]
    with pytest.raises(ValidationError) as info:
        NodeResourceTopology.model_validate(body)
    assert problems(info.value) == [
        "zones[0].resources[0].capacity: expected a quantity (a string or a number), not list",
        "zones[1].type: Field required",
        "zones[1].resources[1].available: 'lots\\nof\\nlines' is not a Kubernetes quantity "
        "(e.g. 100Mi, 1G, 1500m, 10e3)",
    ]
    assert "http" not in describe(info.value)
    assert describe(info.value, "nrt.yaml").startswith("nrt.yaml.zones[0]")


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        ((), ""),
        (("spec",), "spec"),
        (("spec", "workloads", 0, "workload"), "spec.workloads[0].workload"),
        ((3,), "[3]"),
    ],
    ids=["root", "field", "nested", "index-first"],
)
def test_field_path(loc: tuple[int | str, ...], path: str) -> None:
    assert field_path(loc) == path


def test_a_flood_of_problems_is_cut_short() -> None:
    body = example("noderesourcetopology-worker-1.yaml")
    for zone in body["zones"]:
        for resource in zone["resources"]:
            resource.update(capacity="x", allocatable="x", available="x")
    with pytest.raises(ValidationError) as info:
        NodeResourceTopology.model_validate(body)
    lines = problems(info.value)
    assert len(lines) == 21
    assert lines[-1] == "and 4 more problems"
