"""The bounds of what a machine can have, and the CRDs that spell the same figures."""

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.paths import CRDS
from toposched.apis import limits
from toposched.apis.limits import check_amount, check_bandwidth, limit_of


@pytest.mark.parametrize(
    ("resource", "value", "error"),
    [
        ("cpu", "8192", None),
        ("cpu", "8193", "cpu 8193 is more than any machine has (at most 8192)"),
        ("cpu", "0.5", None),
        ("memory", str(2**52), None),
        ("memory", str(2**52 + 1), "at most 4Pi"),
        ("hugepages-1Gi", str(2**53), "at most 4Pi"),
        ("example.com/nic", str(2**53), None),
        ("example.com/nic", str(2**53 + 1), "at most 8Pi"),
        ("network.aware.com/bandwidth", "1E+13", None),
        ("network.aware.com/bandwidth", "1E+14", "at most 10T"),
        ("memory", "-1", "memory -1 is negative"),
        ("cpu", "1E+999999", "cpu 1e+999999 is more than any machine has"),
    ],
    ids=[
        "cpu-at-the-limit",
        "cpu-above",
        "half-a-cpu",
        "memory-at-4Pi",
        "memory-above",
        "hugepages-above",
        "device-at-8Pi",
        "device-above",
        "bandwidth-at-10T",
        "bandwidth-above",
        "negative",
        "huge-exponent-said-briefly",
    ],
)
def test_check_amount(resource: str, value: str, error: str | None) -> None:
    if error is None:
        assert check_amount(resource, Decimal(value)) == Decimal(value)
    else:
        with pytest.raises(ValueError, match=re.escape(error)):
            check_amount(resource, Decimal(value))


@pytest.mark.parametrize(
    ("value", "error"),
    [("0", None), ("1E+13", None), ("-1", "is negative"), ("1E+14", "more than any network carries")],
    ids=["zero", "10T", "negative", "above"],
)
def test_check_bandwidth(value: str, error: str | None) -> None:
    if error is None:
        assert check_bandwidth(Decimal(value)) == Decimal(value)
    else:
        with pytest.raises(ValueError, match=error):
            check_bandwidth(Decimal(value))


def _crd(name: str) -> dict[str, Any]:
    data = yaml.safe_load((CRDS / name).read_text())
    assert isinstance(data, dict)
    return data["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def _at(schema: dict[str, Any], *path: str) -> dict[str, Any]:
    for part in path:
        schema = schema["items"] if part == "[]" else schema["properties"][part]
    return schema


def _rules(schema: dict[str, Any]) -> str:
    return " ".join(rule["rule"] for rule in schema.get("x-kubernetes-validations", []))


def _figure(limit: int) -> str:
    return {limits.MAX_MEMORY: "4Pi", limits.MAX_QUANTITY: "8Pi", limits.MAX_BANDWIDTH: "10T"}.get(limit, str(limit))


def test_the_nrt_crd_spells_the_limits() -> None:
    root = _crd("topology.node.k8s.io_noderesourcetopologies.yaml")
    zones = _at(root, "zones")
    resources = _at(zones, "[]", "resources")
    assert zones["maxItems"] == limits.MAX_ZONES
    assert _at(zones, "[]", "costs")["maxItems"] == limits.MAX_ZONES
    assert resources["maxItems"] == limits.MAX_ZONE_RESOURCES
    rules = _rules(resources["items"])
    for resource in ("cpu", "memory", "hugepages-2Mi", "example.com/nic"):
        assert f"'{_figure(limit_of(resource))}'" in rules
    distance = _at(zones, "[]", "costs", "[]", "value")
    assert (distance["minimum"], distance["maximum"]) == (0, limits.MAX_NUMA_DISTANCE)
    assert f"c.value == {limits.LOCAL_DISTANCE}" in _rules(zones["items"])
    for field in ("capacity", "allocatable", "available"):
        assert _at(resources, "[]", field)["maxLength"] == limits.MAX_QUANTITY_TEXT


def test_the_appgroup_crd_spells_the_limits() -> None:
    spec = _at(_crd("appgroup.diktyo.x-k8s.io_appgroups.yaml"), "spec")
    workloads = _at(spec, "workloads")
    assert workloads["maxItems"] == limits.MAX_WORKLOADS
    assert _at(workloads, "[]", "dependencies")["maxItems"] == limits.MAX_DEPENDENCIES
    bandwidth = _at(workloads, "[]", "dependencies", "[]", "minBandwidth")
    assert f"quantity('{_figure(limits.MAX_BANDWIDTH)}')" in _rules(bandwidth)
    assert bandwidth["maxLength"] == limits.MAX_QUANTITY_TEXT


def test_the_networktopology_crd_bounds_quantities_by_their_shape() -> None:
    costs = _at(
        _crd("networktopology.diktyo.x-k8s.io_networktopologies.yaml"),
        *("spec", "weights", "[]", "topologyList", "[]", "originList", "[]", "costList", "[]"),
    )
    for field in ("bandwidthCapacity", "bandwidthAllocated"):
        assert "-" not in _at(costs, field)["pattern"].split("]")[0]  # no sign but +: never negative
        assert _at(costs, field)["maxLength"] == limits.MAX_QUANTITY_TEXT


def test_limits_are_documented_in_one_place() -> None:
    """The figures are spelled in apis.limits and nowhere else in the package."""
    package = Path(limits.__file__).parent.parent
    spelled = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name != "limits.py" and any(f"= {n}" in path.read_text() for n in ("8192", "2**52", "2**53", "10**13"))
    ]
    assert spelled == []
