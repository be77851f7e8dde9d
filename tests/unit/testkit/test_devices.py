"""A real node's devices as data (testkit.realnode.devices): the model, its checks, the text
form of ``--device`` and the node record that carries them."""

import json
from pathlib import Path

import pytest

from testkit.realnode import KubeletSettings, Topology
from testkit.realnode.device_plugin import PluginCall, format_call, parse_calls
from testkit.realnode.devices import Device, DeviceResource, DevicesError, NodeDevices, natural_key
from testkit.realnode.node import NodeRecord

TWO_ZONES = Topology.uniform(zones=2, cores_per_zone=2, memory_per_zone="1Gi")


def test_the_text_form_reads_zones_health_ids_and_options() -> None:
    devices = NodeDevices.parse(
        ["example.com/gpu:preferred=0,0,1,1!", "example.com/nic=0+1,0+1", "example.com/fpga=a@-,b@-!", "x.io/none="]
    )
    gpu, nic, fpga, none = devices.resources
    assert gpu == DeviceResource(
        "example.com/gpu",
        (Device("gpu-0", (0,)), Device("gpu-1", (0,)), Device("gpu-2", (1,)), Device("gpu-3", (1,), healthy=False)),
        preferred_allocation=True,
    )
    assert nic.devices == (Device("nic-0", (0, 1)), Device("nic-1", (0, 1)))
    assert not nic.preferred_allocation
    assert fpga.devices == (Device("a"), Device("b", healthy=False))
    assert none.devices == ()
    assert devices.counts() == {"example.com/gpu": (4, 3), "example.com/nic": (2, 2), "example.com/fpga": (2, 1),
                                "x.io/none": (0, 0)}  # fmt: skip


def test_the_text_form_round_trips() -> None:
    specs = [
        "example.com/gpu:preferred:prestart=0,0,1!,gpu-9@1",
        "example.com/nic=0+1,-!",
        "example.com/empty=",
    ]
    devices = NodeDevices.parse(specs)
    assert devices.specs() == specs
    assert NodeDevices.parse(devices.specs()) == devices
    assert devices.describe() == " ".join(specs)
    assert NodeDevices().describe() == "no devices"


def test_the_record_carries_devices_and_old_records_still_load(tmp_path: Path) -> None:
    devices = NodeDevices.parse(["example.com/gpu:preferred=0,1!"], allow_unknown_numa=True)
    record = NodeRecord("n", 3, 10250, 10248, TWO_ZONES, KubeletSettings(), devices)
    path = tmp_path / "node.json"
    path.write_text(record.to_json())
    assert NodeRecord.load(path) == record
    assert NodeDevices.from_dict(json.loads(json.dumps(devices.to_dict()))) == devices

    plain = NodeRecord("n", 3, 10250, 10248, TWO_ZONES, KubeletSettings())
    path.write_text(plain.to_json())
    assert "devices" not in json.loads(path.read_text())  # a node without devices is written as before
    assert NodeRecord.load(path).devices == NodeDevices()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("example.com/gpu", "expected NAME"),
        ("gpu=0", "needs a domain"),
        ("kubernetes.io/gpu=0", "native resources"),
        ("Example.com/gpu=0", "not a DNS subdomain"),
        ("example.com/-gpu=0", "must be at most 63"),
        ("example.com/gpu:fast=0", "unknown option 'fast'"),
        ("example.com/gpu=0,,1", "an empty device"),
        ("example.com/gpu=zero", "NUMA zones are numbers"),
        ("example.com/gpu=0+0", "named twice"),
        ("example.com/gpu=a b@0", "device id 'a b'"),
        ("example.com/gpu=-@0", "device id '-'"),
    ],
)
def test_text_form_mistakes_are_named(spec: str, message: str) -> None:
    with pytest.raises(DevicesError, match=message):
        NodeDevices.parse([spec])


def test_a_resource_is_given_once() -> None:
    with pytest.raises(DevicesError, match=r"example\.com/gpu is given twice"):
        NodeDevices.parse(["example.com/gpu=0", "example.com/gpu=1"])


def test_duplicate_ids_only_when_asked_for() -> None:
    with pytest.raises(DevicesError, match="device id g is given twice"):
        NodeDevices.parse(["example.com/gpu=g@0,g@1!"])
    devices = NodeDevices.parse(["example.com/gpu=g@0,g@1!"], allow_duplicate_ids=True)
    # The kubelet files one id under healthy and unhealthy alike: counted twice in capacity.
    assert devices.counts() == {"example.com/gpu": (2, 1)}


def test_numa_zones_the_topology_lacks_only_when_asked_for() -> None:
    NodeDevices.parse(["example.com/gpu=0,1,-"]).validate(TWO_ZONES)
    for zone in ("2", "-1", "0+5"):
        with pytest.raises(DevicesError, match=r"the topology has zones 0-1 \(allow_unknown_numa=True"):
            NodeDevices.parse([f"example.com/gpu={zone}"]).validate(TWO_ZONES)
        NodeDevices.parse([f"example.com/gpu={zone}"], allow_unknown_numa=True).validate(TWO_ZONES)
    with pytest.raises(DevicesError, match="64-bit"):
        Device("g", (2**63,))


def test_health_changes_and_resource_edits_keep_the_rest() -> None:
    devices = NodeDevices.parse(["example.com/gpu=0,1", "example.com/nic=0+1"])
    sick = devices.with_health("example.com/gpu", "gpu-1", healthy=False)
    assert sick.specs() == ["example.com/gpu=0,1!", "example.com/nic=0+1"]
    assert sick.with_health("example.com/gpu", "gpu-1", healthy=True) == devices
    assert sick.without_resource("example.com/nic").names() == ["example.com/gpu"]
    added = devices.with_resource(DeviceResource.parse("example.com/fpga=-"))
    assert added.names() == ["example.com/gpu", "example.com/nic", "example.com/fpga"]
    with pytest.raises(DevicesError, match="has no device 'gpu-7'"):
        devices.with_health("example.com/gpu", "gpu-7", healthy=False)
    with pytest.raises(DevicesError, match=r"no device resource 'example\.com/tpu'"):
        devices.resource("example.com/tpu")


def test_ids_sort_as_people_count() -> None:
    assert sorted(["gpu-10", "gpu-2", "gpu-1"], key=natural_key) == ["gpu-1", "gpu-2", "gpu-10"]


def test_the_call_log_reads_back() -> None:
    lines = [
        format_call("Allocate", "example.com/gpu", ["gpu-1", "gpu-0"], unknown="-"),
        "Traceback (most recent call last):",
        format_call("Register", "example.com/gpu", [], endpoint="tsdp-1.sock", generation=2),
        format_call("Error", "", [], message="Register failed (UNAVAILABLE: no\nkubelet)"),
    ]
    allocate, register, error = parse_calls("\n".join(lines))
    assert (allocate.method, allocate.resource, allocate.ids) == ("Allocate", "example.com/gpu", ("gpu-1", "gpu-0"))
    assert allocate.detail == {"unknown": "-"}
    assert register.ids == ()
    assert register.generation == 2
    assert error == PluginCall(error.time, "Error", "", (), {"message": "Register failed (UNAVAILABLE: no kubelet)"})
