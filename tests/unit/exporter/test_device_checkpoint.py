"""The device manager's checkpoint, and the devices in use the NRT takes from it: what init
containers hold, which PodResources List does not show."""

import json
from pathlib import Path
from typing import Any

import pytest

from testkit.sysfs import FakeNode, build
from toposched.apis.constants import NRT_ATTR_DEVICE_GROUPS
from toposched.exporter.checkpoints import (
    DEVICE_STATE,
    CheckpointError,
    Checkpoints,
    device_holders,
    parse_cpu_state,
    parse_device_state,
    read,
)
from toposched.exporter.kubeletconfig import parse as parse_kubelet
from toposched.exporter.sysfs import read_machine
from toposched.exporter.topology import Allocatable, ContainerUse, DeviceSet, Inputs, PodUse
from toposched.exporter.topology import build as build_nrt

GPU = "example.com/gpu"


def checkpoint(entries: list[tuple[str, str, dict[str, list[str]]]]) -> str:
    """As the kubelet writes it: (pod uid, container, ids per NUMA node, -1 without topology)."""
    return json.dumps(
        {
            "Data": {
                "PodDeviceEntries": [
                    {"PodUID": uid, "ContainerName": c, "ResourceName": GPU, "DeviceIDs": ids, "AllocResp": "Cg=="}
                    for uid, c, ids in entries
                ],
                "RegisteredDevices": {GPU: ["g0", "g1", "g2", "g3"]},
            },
            "Checksum": 1,
        }
    )


def test_device_state() -> None:
    state = parse_device_state(
        checkpoint([("u", "init", {"0": ["g0"], "1": ["g0", "g2"]}), ("u", "app", {"-1": ["g3"]})])
    )
    assert state.entries == {"u": {"init": frozenset({(GPU, "g0"), (GPU, "g2")}), "app": frozenset({(GPU, "g3")})}}
    # No allocation yet: the kubelet writes null for the empty list.
    assert parse_device_state('{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":0}').entries == {}


ENTRY = {"PodUID": "u", "ContainerName": "c", "ResourceName": GPU}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "Data is not an object"),
        ({"PodDeviceEntries": {}}, "not a list"),
        ({"PodDeviceEntries": ["x"]}, r"\[0\] is not an object"),
        ({"PodDeviceEntries": [{"PodUID": "u", "ContainerName": "c"}]}, "must be strings"),
        (
            {"PodDeviceEntries": [{"PodUID": "u", "ContainerName": "c", "ResourceName": GPU, "DeviceIDs": []}]},
            "DeviceIDs",
        ),
        (
            {"PodDeviceEntries": [{"PodUID": "u", "ContainerName": "c", "ResourceName": GPU, "DeviceIDs": {"0": [1]}}]},
            "not a list of ids",
        ),
    ],
    ids=["data-a-list", "entries-an-object", "entry-a-string", "no-resource", "ids-a-list", "id-a-number"],
)
def test_bad_device_state_is_refused(data: Any, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        parse_device_state(json.dumps({"Data": data}))


def test_read_finds_the_device_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "device-plugins").mkdir()
    (tmp_path / DEVICE_STATE).write_text(checkpoint([("u", "app", {"0": ["g0"]})]))
    found = read(tmp_path)
    assert found.devices is not None
    assert found.devices.entries == {"u": {"app": frozenset({(GPU, "g0")})}}
    (tmp_path / DEVICE_STATE).write_text('{"Data": 1}')
    found = read(tmp_path)
    assert found.devices is None
    assert "Data is not an object" in found.problems[0]


def test_the_pods_the_kubelet_still_runs() -> None:
    """Live: a container holds what a listed container holds, or the CPU checkpoint holds the pod
    and found it live. ``init-only`` got devices in its init container alone and holds no CPUs:
    nothing tells it from a gone pod."""
    devices = parse_device_state(
        checkpoint(
            [
                ("listed", "init", {"0": ["g0", "g1"]}),
                ("listed", "app", {"0": ["g1"]}),
                ("pinned", "init", {"1": ["g2"]}),
                ("init-only", "init", {"1": ["g3"]}),
                ("gone", "app", {"0": ["g0"]}),
            ]
        )
    )
    cpu = parse_cpu_state('{"policyName":"static","defaultCpuSet":"0,4-7","entries":{"pinned":{"app":"1"}}}')
    listed = [("app", frozenset({(GPU, "g1")})), ("other", frozenset())]
    found = Checkpoints(cpu=cpu, devices=devices)
    assert device_holders(found, listed, stale=set()) == {"listed", "pinned"}
    assert device_holders(found, listed, stale={"pinned"}) == {"listed"}
    assert device_holders(Checkpoints(cpu=cpu), listed, stale=set()) == set()


def test_the_nrt_counts_the_devices_init_containers_hold(tmp_path: Path) -> None:
    """The init container got g0 and g1, the app container reused g1: the kubelet counts both
    allocated until the pod ends, PodResources lists g1 only. The gone pod's g2 is free."""
    sysfs = build(tmp_path, [FakeNode(0, [0, 1], 4 * 1024 * 1024), FakeNode(1, [2, 3], 4 * 1024 * 1024)])
    app = ContainerUse(devices=(DeviceSet(GPU, ("g1",), (0,)),), name="app")
    devices = checkpoint(
        [
            ("live", "init", {"0": ["g0", "g1"]}),
            ("live", "app", {"0": ["g1"]}),
            ("gone", "app", {"1": ["g2"], "0": ["g3"]}),
        ]
    )
    inputs = Inputs(
        node="n",
        machine=read_machine(sysfs),
        kubelet=parse_kubelet({"topologyManagerPolicy": "single-numa-node"}),
        allocatable=Allocatable(
            devices=(
                DeviceSet(GPU, ("g0", "g1"), (0,)),
                DeviceSet(GPU, ("g2",), (1,)),
                DeviceSet(GPU, ("g3",), (0,)),
                DeviceSet(GPU, ("g3",), (1,)),
            )
        ),
        pods=[PodUse("ns", "p", (app,))],
        checkpoints=Checkpoints(devices=parse_device_state(devices)),
    )

    def gpus(nrt_inputs: Inputs) -> dict[str, tuple[str, str]]:
        nrt = build_nrt(nrt_inputs)
        found = {z.name: {r.name: (str(r.allocatable), str(r.available)) for r in z.resources or []} for z in nrt.zones}
        return {zone: resources[GPU] for zone, resources in found.items()} | {
            "groups": (nrt.attribute(NRT_ATTR_DEVICE_GROUPS) or "", "")
        }

    assert gpus(inputs) == {"node-0": ("3", "1"), "node-1": ("2", "2"), "groups": (f"{GPU}@0,1=1/1", "")}
    without = Inputs(**{**inputs.__dict__, "checkpoints": None})
    assert gpus(without) == {"node-0": ("3", "2"), "node-1": ("2", "2"), "groups": (f"{GPU}@0,1=1/1", "")}
