"""Where a DRA device is, from the attributes its driver publishes: the standard name first, then
the vendor names; missing or -1 is unknown, never zone 0; a list means every zone in it."""

from typing import Any

import pytest

from toposched.apis.quantity import parse_quantity
from toposched.apis.resourceslice import NUMA_ATTRIBUTES, DeviceAttribute, ResourceSlice, device_numa

GPU = "gpu.example.com"
STANDARD = "resource.kubernetes.io/numaNode"


def attrs(raw: dict[str, Any]) -> dict[str, DeviceAttribute]:
    return {name: DeviceAttribute.model_validate(value) for name, value in raw.items()}


@pytest.mark.parametrize(
    ("driver", "raw", "zones", "why"),
    [
        pytest.param(GPU, {STANDARD: {"int": 1}}, {1}, STANDARD, id="standard-scalar"),
        pytest.param(GPU, {STANDARD: {"ints": [0, 1]}}, {0, 1}, STANDARD, id="standard-list-every-zone"),
        pytest.param(GPU, {STANDARD: {"int": 0}}, {0}, STANDARD, id="zone-0-when-said"),
        pytest.param(GPU, {}, None, "no NUMA attribute", id="missing-is-unknown-not-zone-0"),
        pytest.param(GPU, {"model": {"string": "x"}}, None, "no NUMA attribute", id="other-attributes-only"),
        pytest.param(
            "dra.net", {"numaNode": {"int": -1}}, None, "dra.net/numaNode is -1", id="sriov-minus-one-unknown"
        ),
        pytest.param(
            "dra.net", {"numaNode": {"int": 3}}, {3}, "dra.net/numaNode", id="vendor-unqualified-in-its-domain"
        ),
        pytest.param(
            GPU, {STANDARD: {"int": 1}, "dra.net/numaNode": {"int": 0}}, {1}, STANDARD, id="standard-before-vendor"
        ),
        pytest.param(
            GPU, {STANDARD: {"int": -1}, "dra.net/numaNode": {"int": 0}}, None, "is -1", id="minus-one-is-final"
        ),
        pytest.param(
            GPU,
            {STANDARD: {"string": "1"}, "dra.net/numaNode": {"int": 0}},
            {0},
            "dra.net/numaNode",
            id="skip-a-string",
        ),
        pytest.param(GPU, {STANDARD: {"string": "1"}}, None, "is not a number", id="a-string-only"),
        pytest.param(GPU, {STANDARD: {"bool": True}}, None, "is not a number", id="a-bool"),
        pytest.param(GPU, {STANDARD: {"int": 10**30}}, None, "is no NUMA node", id="huge"),
        pytest.param(GPU, {STANDARD: {"int": -5}}, None, "-5 is no NUMA node", id="negative"),
        pytest.param(GPU, {STANDARD: {"ints": []}}, None, "is no NUMA node", id="empty-list"),
        pytest.param(GPU, {STANDARD: {"ints": [0, -1]}}, None, "is -1", id="list-with-minus-one"),
        pytest.param(GPU, {STANDARD: {"ints": [0, 5000]}}, None, "is no NUMA node", id="list-with-huge"),
        pytest.param("gpu.nvidia.com", {"numa": {"int": 1}}, {1}, "gpu.nvidia.com/numa", id="nvidia-vfio"),
        pytest.param("dra.cpu", {"numaNodeID": {"int": 2}}, {2}, "dra.cpu/numaNodeID", id="cpu-driver"),
    ],
)
def test_device_numa(driver: str, raw: dict[str, Any], zones: set[int] | None, why: str) -> None:
    found = device_numa(driver, attrs(raw))
    assert found.zones == (None if zones is None else frozenset(zones))
    assert why in found.why


def test_the_table_names_the_standard_attribute_first() -> None:
    assert NUMA_ATTRIBUTES[0] == STANDARD


def test_a_slice_reads_as_the_apiserver_sends_it() -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-a-gpu.example.com-x7k2"},
        "spec": {
            "driver": GPU,
            "nodeName": "node-a",
            "pool": {"name": "node-a", "generation": 3, "resourceSliceCount": 1},
            "devices": [
                {"name": "gpu-0", "attributes": {STANDARD: {"int": 0}, "pcieRoot": {"string": "pci0000:00"}}},
                {"name": "gpu-1", "capacity": {"memory": {"value": "80Gi"}}, "bindsToNode": True},
            ],
            "futureField": {"kept": True},
        },
    }
    rs = ResourceSlice.model_validate(body)
    assert (rs.spec.driver, rs.spec.node_name, rs.spec.pool.generation) == (GPU, "node-a", 3)
    assert [device_numa(GPU, d.attributes).zones for d in rs.spec.devices] == [frozenset({0}), None]
    assert rs.to_dict()["spec"]["futureField"] == {"kept": True}
    assert parse_quantity(rs.spec.devices[1].capacity["memory"].value) == 80 * 2**30
