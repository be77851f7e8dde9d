"""The kubelet's per-zone accounting read from its checkpoints, and its comparison with an NRT."""

import json
from pathlib import Path
from typing import Any

import pytest

from testkit.builders import nrt_body
from testkit.realnode import KubeletSettings, NodeDevices, RealNode, Topology
from testkit.realnode.accounting import (
    Figures,
    differences,
    kubelet_device_groups,
    kubelet_figures,
    nrt_device_groups,
    nrt_figures,
)
from testkit.realnode.cluster import LocalCluster
from testkit.realnode.node import NodeLayout, NodeRecord
from toposched.apis.constants import NRT_ATTR_DEVICE_GROUPS

GI = 2**30
TOPOLOGY = Topology.uniform(2, 4, "4Gi")


def memory_state(free: tuple[int, int], entries: dict[str, Any] | None = None) -> dict[str, Any]:
    machine = {
        str(numa): {
            "memoryMap": {
                "memory": {"allocatable": allocatable, "free": left},
                "hugepages-2Mi": {"allocatable": 0, "free": 0},
            }
        }
        for numa, (allocatable, left) in enumerate(((4 * GI - 256 * 2**20, free[0]), (4 * GI, free[1])))
    }
    return {"policyName": "Static", "machineState": machine, "entries": entries or {}}


def node_with(
    tmp_path: Path,
    cpu: dict[str, Any] | None,
    memory: dict[str, Any] | None,
    devices: NodeDevices | None = None,
    device_checkpoint: dict[str, Any] | None = None,
) -> RealNode:
    layout = NodeLayout(tmp_path / "node")
    layout.device_plugins.mkdir(parents=True)
    files = (("cpu_manager_state", cpu), ("memory_manager_state", memory))
    files += (("device-plugins/kubelet_internal_checkpoint", device_checkpoint),)
    for name, body in files:
        if body is not None:
            (layout.kubelet_root / name).write_text(json.dumps(body))
    record = NodeRecord("n", 0, 1, 2, TOPOLOGY, KubeletSettings(), devices or NodeDevices())
    return RealNode(record, layout, LocalCluster(tmp_path))


HELD = {"uid-a": {"app": [{"numaAffinity": [1], "type": "memory", "size": GI}]}}


@pytest.mark.parametrize(
    ("cpu", "memory", "active", "expected"),
    [
        (
            {"policyName": "static", "defaultCpuSet": "0-7"},
            memory_state((4 * GI - 256 * 2**20, 4 * GI)),
            None,
            {"node-0": {"cpu": (3, 3), "memory": (3840 * 2**20, 3840 * 2**20)}, "node-1": {"cpu": (4, 4)}},
        ),
        (
            {"policyName": "static", "defaultCpuSet": "0-3,6-7", "entries": {"uid-a": {"app": "4-5"}}},
            memory_state((4 * GI - 256 * 2**20, 3 * GI), HELD),
            {"uid-a"},
            {"node-1": {"cpu": (4, 2), "memory": (4 * GI, 3 * GI)}},
        ),
        # The pod is gone: the kubelet still lists it until its next admission, but counts it free.
        (
            {"policyName": "static", "defaultCpuSet": "0-3,6-7", "entries": {"uid-a": {"app": "4-5"}}},
            memory_state((4 * GI - 256 * 2**20, 3 * GI), HELD),
            set(),
            {"node-1": {"cpu": (4, 4), "memory": (4 * GI, 4 * GI)}},
        ),
        # No static policies: every CPU but the reserved one is allocatable and free; no memory figure.
        ({"policyName": "none", "defaultCpuSet": ""}, None, None, {"node-0": {"cpu": (3, 3)}}),
    ],
    ids=["empty", "one-pod", "stale-entries-count-as-free", "no-static-policies"],
)
def test_kubelet_figures(
    tmp_path: Path,
    cpu: dict[str, Any],
    memory: dict[str, Any] | None,
    active: set[str] | None,
    expected: dict[str, dict[str, tuple[int, int]]],
) -> None:
    figures = kubelet_figures(node_with(tmp_path, cpu, memory), active)
    for zone, resources in expected.items():
        for resource, value in resources.items():
            assert figures[zone][resource] == value, (zone, resource)
    if memory is None:
        assert all("memory" not in resources for resources in figures.values())


def test_a_multi_numa_block_of_a_gone_pod_is_given_back_zone_by_zone(tmp_path: Path) -> None:
    entries = {"gone": {"app": [{"numaAffinity": [0, 1], "type": "memory", "size": 5 * GI}]}}
    memory = memory_state((0, 3 * GI - 256 * 2**20), entries)  # 3840Mi taken on NUMA 0, the rest on 1
    figures = kubelet_figures(node_with(tmp_path, {"policyName": "static"}, memory), active=set())
    assert figures["node-0"]["memory"] == (3840 * 2**20, 3840 * 2**20)
    assert figures["node-1"]["memory"] == (4 * GI, 4 * GI)


def test_differences_name_the_zone_resource_and_gap() -> None:
    kubelet: Figures = {"node-0": {"cpu": (3, 1), "memory": (100, 50)}}
    nrt = nrt_body("n", [{"cpu": ("4", "3", "1"), "memory": ("128", "100", "100"), "hugepages-2Mi": "0"}])
    published = nrt_figures(nrt)
    assert differences(kubelet, published) == ["node-0 memory available: kubelet 50, NRT 100 (NRT - kubelet 50)"]
    assert differences(kubelet, published, available=False) == []


GPU = "example.com/gpu"
# gpu-0, gpu-1 on zone 0, gpu-2 on zone 1, gpu-3 on both, gpu-4 without topology, gpu-5 unhealthy.
DEVICES = NodeDevices.parse([f"{GPU}=0,0,1,0+1,-,1!", "example.com/nic=0"])


def device_checkpoint(entries: list[tuple[str, str, dict[str, list[str]]]]) -> dict[str, Any]:
    """As the kubelet writes it: (pod uid, container, ids per NUMA node) of ``GPU``; the healthy
    ids registered (the unhealthy gpu-5 is not)."""
    return {
        "Data": {
            "PodDeviceEntries": [
                {"PodUID": uid, "ContainerName": c, "ResourceName": GPU, "DeviceIDs": ids, "AllocResp": "Cg=="}
                for uid, c, ids in entries
            ],
            "RegisteredDevices": {GPU: ["gpu-4", "gpu-0", "gpu-1", "gpu-2", "gpu-3"], "example.com/nic": ["nic-0"]},
        },
        "Checksum": 1,
    }


HOLDING = device_checkpoint(
    [
        ("uid-a", "init", {"0": ["gpu-1", "gpu-3"], "1": ["gpu-3"]}),  # kept for the pod's life
        ("uid-a", "app", {"0": ["gpu-1"], "1": ["gpu-5"]}),  # gpu-5 turned unhealthy since
        ("gone", "app", {"1": ["gpu-2"], "-1": ["gpu-4"]}),
    ]
)


@pytest.mark.parametrize(
    ("active", "zones", "groups"),
    [
        (
            {"uid-a"},
            {"node-0": {GPU: (3, 1), "example.com/nic": (1, 1)}, "node-1": {GPU: (2, 1), "example.com/nic": (0, 0)}},
            {"device group 0,1": {GPU: (1, 0)}, "device group -": {GPU: (1, 1)}},
        ),
        (
            None,
            {"node-0": {GPU: (3, 1), "example.com/nic": (1, 1)}, "node-1": {GPU: (2, 0), "example.com/nic": (0, 0)}},
            {"device group 0,1": {GPU: (1, 0)}, "device group -": {GPU: (1, 0)}},
        ),
    ],
    ids=["a-gone-pods-devices-are-free", "every-entry-counts"],
)
def test_device_figures(tmp_path: Path, active: set[str] | None, zones: Figures, groups: Figures) -> None:
    """Healthy devices per zone (gpu-3 in both), allocated ones out of available (the init
    container's too); gpu-5 is allocated but unhealthy: in no figure."""
    node = node_with(tmp_path, {"policyName": "none", "defaultCpuSet": ""}, None, DEVICES, HOLDING)
    figures = kubelet_figures(node, active)
    assert {zone: {r: v for r, v in figures[zone].items() if r != "cpu"} for zone in figures} == zones
    assert kubelet_device_groups(node, active) == groups


def test_device_groups_are_compared_with_the_nrt_attribute(tmp_path: Path) -> None:
    node = node_with(tmp_path, {"policyName": "none", "defaultCpuSet": ""}, None, DEVICES, HOLDING)
    nrt = {"attributes": [{"name": NRT_ATTR_DEVICE_GROUPS, "value": f"{GPU}@0,1=1/0;{GPU}@-=1/0"}]}
    assert nrt_device_groups(nrt) == {"device group 0,1": {GPU: (1, 0)}, "device group -": {GPU: (1, 0)}}
    assert differences(kubelet_device_groups(node, {"uid-a"}), nrt_device_groups(nrt)) == [
        f"device group - {GPU} available: kubelet 1, NRT 0 (NRT - kubelet -1)"
    ]
    assert nrt_device_groups({"attributes": []}) == {}


def test_no_device_checkpoint_no_device_figures(tmp_path: Path) -> None:
    """A node whose plugin never registered anything: the kubelet holds no device healthy."""
    node = node_with(tmp_path, {"policyName": "none", "defaultCpuSet": ""}, None, DEVICES)
    assert kubelet_figures(node)["node-0"] == {"cpu": (3, 3)}
    assert kubelet_device_groups(node) == {}
