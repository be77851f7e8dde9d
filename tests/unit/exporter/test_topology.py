from decimal import Decimal
from pathlib import Path

import pytest

from testkit.sysfs import FakeNode, write
from testkit.sysfs import build as build_tree
from toposched.apis.constants import NRT_ATTR_DEVICE_GROUPS
from toposched.apis.devicegroups import DeviceGroup
from toposched.apis.quantity import parse_quantity
from toposched.exporter.kubeletconfig import KubeletConfig, KubeletConfigError, load
from toposched.exporter.kubeletconfig import parse as parse_kubelet
from toposched.exporter.sysfs import read_machine
from toposched.exporter.topology import (
    Allocatable,
    ContainerUse,
    DeviceSet,
    Inputs,
    MemoryBlock,
    PodUse,
    build,
    device_problems,
    topology_policy,
)
from toposched.schedhook.placement.parse import from_nrt

GI = 2**30
KUBELET = parse_kubelet(
    {
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerScope": "container",
        "cpuManagerPolicy": "static",
        "memoryManagerPolicy": "Static",
        "reservedSystemCPUs": "0,32",
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}],
    }
)


def machine(tmp_path: Path):  # type: ignore[no-untyped-def]
    """2 sockets x 16 cores / 32 threads, 64 GB each, 4 x 1Gi hugepages per node."""
    nodes = [
        FakeNode(0, list(range(0, 16)) + list(range(32, 48)), 65536000, {1048576: 4}),
        FakeNode(1, list(range(16, 32)) + list(range(48, 64)), 65536000, {1048576: 4}),
    ]
    return read_machine(build_tree(tmp_path, nodes))


ALLOCATABLE = Allocatable(
    cpu_ids=tuple(c for c in range(64) if c not in (0, 32)),
    memory=(
        MemoryBlock("memory", 61740154880, (0,)),
        MemoryBlock("memory", 62813896704, (1,)),
        MemoryBlock("hugepages-1Gi", 4 * GI, (0,)),
        MemoryBlock("hugepages-1Gi", 4 * GI, (1,)),
    ),
    devices=(DeviceSet("example.com/vf", ("vf0",), (0,)), DeviceSet("example.com/vf", ("vf1",), (1,))),
)
GUARANTEED = PodUse(
    "prod",
    "db-0",
    (
        ContainerUse(
            cpu_ids=(16, 17, 48, 49),
            memory=(MemoryBlock("memory", 8 * GI, (1,)), MemoryBlock("hugepages-1Gi", 2 * GI, (1,))),
            devices=(DeviceSet("example.com/vf", ("vf1",), (1,)),),
        ),
    ),
)


def table(nrt) -> dict[str, dict[str, tuple[str, str, str]]]:  # type: ignore[no-untyped-def]
    return {
        z.name: {r.name: (str(r.capacity), str(r.allocatable), str(r.available)) for r in z.resources or []}
        for z in nrt.zones
    }


def attrs(nrt) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {a.name: a.value for a in nrt.attributes or []}


def test_research_example_with_cpu_and_memory_managers(tmp_path: Path) -> None:
    nrt = build(Inputs("worker-1", machine(tmp_path), KUBELET, ALLOCATABLE, [GUARANTEED]))
    assert table(nrt) == {
        "node-0": {
            "cpu": ("32", "30", "30"),
            "memory": ("67108864000", "61740154880", "61740154880"),
            "hugepages-1Gi": ("4294967296", "4294967296", "4294967296"),
            "example.com/vf": ("1", "1", "1"),
        },
        "node-1": {
            "cpu": ("32", "32", "28"),
            "memory": ("67108864000", "62813896704", "54223962112"),
            "hugepages-1Gi": ("4294967296", "4294967296", "2147483648"),
            "example.com/vf": ("1", "1", "0"),
        },
    }
    assert [(c.name, c.value) for c in nrt.zones[1].costs or []] == [("node-0", 21), ("node-1", 10)]
    a = attrs(nrt)
    assert a["topologyManagerPolicy"] == "single-numa-node"
    assert a["topologyManagerScope"] == "container"
    assert a["cpuManagerPolicy"] == "static"
    assert a["reservedSystemCPUs"] == "0,32"
    assert a["toposched.io/memory"] == "memory-manager"
    assert a["nodeTopologyPodsFingerprintMethod"] == "with-exclusive-resources"
    assert a["nodeTopologyPodsFingerprint"].startswith("pfp0v001")
    assert nrt.topology_policies == ["SingleNUMANodeContainerLevel"]
    assert nrt.name == "worker-1"


def test_without_memory_manager_memory_is_estimated_not_omitted(tmp_path: Path) -> None:
    kubelet = parse_kubelet({"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node"})
    alloc = Allocatable(cpu_ids=ALLOCATABLE.cpu_ids, devices=ALLOCATABLE.devices)
    node_allocatable = {"memory": Decimal(120 * GI)}
    nrt = build(Inputs("w", machine(tmp_path), kubelet, alloc, [GUARANTEED], node_allocatable=node_allocatable))
    t = table(nrt)
    assert t["node-0"]["memory"] == ("67108864000", str(60 * GI), str(60 * GI))
    assert t["node-1"]["hugepages-1Gi"] == ("4294967296", "4294967296", "4294967296")
    assert t["node-1"]["cpu"] == ("32", "32", "28")
    assert attrs(nrt)["toposched.io/memory"].startswith("estimated")


def test_cpu_manager_none_estimates_cpus(tmp_path: Path) -> None:
    kubelet = parse_kubelet({"reservedSystemCPUs": "0-1"})
    nrt = build(Inputs("w", machine(tmp_path), kubelet, Allocatable(), []))
    assert table(nrt)["node-0"]["cpu"] == ("32", "30", "30")
    assert attrs(nrt)["toposched.io/cpu"].startswith("estimated")
    assert nrt.topology_policies == ["None"]


def test_without_podresources(tmp_path: Path) -> None:
    kubelet = parse_kubelet({"systemReserved": {"memory": "1Gi"}, "kubeReserved": {"memory": "1Gi"}})
    nrt = build(Inputs("w", machine(tmp_path), kubelet, None, None))
    t = table(nrt)
    # MemTotal - hugepages - (2Gi reserved + 100Mi eviction) split by MemTotal.
    expected = 67108864000 - 4 * GI - (2 * GI + 100 * 2**20) // 2
    assert t["node-0"]["memory"] == ("67108864000", str(expected), str(expected))
    a = attrs(nrt)
    assert a["toposched.io/podresources"].startswith("unavailable")
    assert "nodeTopologyPodsFingerprint" not in a


def test_multi_numa_memory_block_is_split_not_double_counted(tmp_path: Path) -> None:
    pod = PodUse("p", "big", (ContainerUse(memory=(MemoryBlock("memory", 70 * GI, (0, 1)),)),))
    nrt = build(Inputs("w", machine(tmp_path), KUBELET, ALLOCATABLE, [pod]))
    t = table(nrt)
    used = (61740154880 - int(t["node-0"]["memory"][2])) + (62813896704 - int(t["node-1"]["memory"][2]))
    assert used == 70 * GI
    assert t["node-0"]["memory"][2] == "0"


def test_a_device_on_two_numa_nodes_counts_in_both_and_the_groups_say_it_is_one(tmp_path: Path) -> None:
    """Each zone lists the devices attached to it; the device-groups attribute lists the devices
    on several zones and those without topology, so that a set of zones counts each once."""
    alloc = Allocatable(
        cpu_ids=ALLOCATABLE.cpu_ids,
        devices=(  # the kubelet lists a device once per NUMA node it is attached to
            DeviceSet("gpu", ("g0",), (0,)),
            DeviceSet("gpu", ("g0",), (1,)),
            DeviceSet("gpu", ("g1",), (1,)),
            DeviceSet("fpga", ("f0", "f1"), ()),
        ),
    )
    used = PodUse(
        "default", "p", (ContainerUse(devices=(DeviceSet("gpu", ("g0",), (0, 1)), DeviceSet("fpga", ("f1",), ()))),)
    )
    nrt = build(Inputs("w", machine(tmp_path), KUBELET, alloc, [used]))
    t = table(nrt)
    assert t["node-0"]["gpu"] == ("1", "1", "0")
    assert t["node-1"]["gpu"] == ("2", "2", "1")
    assert all("fpga" not in z for z in t.values())
    assert nrt.attribute(NRT_ATTR_DEVICE_GROUPS) == "fpga@-=2/1;gpu@0,1=1/0"
    view = from_nrt(nrt)
    assert view.device_groups == {"fpga": (DeviceGroup((), 2, 1),), "gpu": (DeviceGroup((0, 1), 1, 0),)}


def test_device_garbage_is_left_out_and_said(tmp_path: Path) -> None:
    alloc = Allocatable(
        cpu_ids=ALLOCATABLE.cpu_ids,
        devices=(DeviceSet("gpu", ("g0",), (0,)), DeviceSet("gpu", ("g0",), (7,)), DeviceSet("nic", (), (0,))),
    )
    t = table(build(Inputs("w", machine(tmp_path), KUBELET, alloc, [])))
    assert t["node-0"]["gpu"] == ("1", "1", "1")  # zone 7 does not exist
    assert "gpu" not in t["node-1"]
    assert "nic" not in t["node-0"]  # an empty list is no device
    assert device_problems(machine(tmp_path), alloc) == "NUMA ids the machine does not have: 7"


def test_each_pods_pinned_cpus_by_zone(tmp_path: Path) -> None:
    """For a scheduler that sees a pod end before the NRT does: where its CPUs go back."""
    across = PodUse(
        "ns",
        "across",
        (ContainerUse(name="init", cpu_ids=(1, 2)), ContainerUse(name="app", cpu_ids=(1, 2, 16))),
    )
    plain = PodUse("default", "web-1", (ContainerUse(),))
    nrt = build(Inputs("w", machine(tmp_path), KUBELET, ALLOCATABLE, [plain, GUARANTEED, across]))
    assert attrs(nrt)["toposched.io/pod-cpus"] == "ns/across=0:2,1:1;prod/db-0=1:4"
    assert "toposched.io/pod-cpus" not in attrs(build(Inputs("w", machine(tmp_path), KUBELET, ALLOCATABLE, [plain])))


def test_fingerprint_methods(tmp_path: Path) -> None:
    plain = PodUse("default", "web-1", (ContainerUse(),))
    with_exclusive = build(Inputs("w", machine(tmp_path), KUBELET, ALLOCATABLE, [plain, GUARANTEED]))
    only_exclusive = build(Inputs("w", machine(tmp_path), KUBELET, ALLOCATABLE, [GUARANTEED]))
    everyone = build(
        Inputs("w", machine(tmp_path), KUBELET, ALLOCATABLE, [plain, GUARANTEED], fingerprint_method="all")
    )
    fp = "nodeTopologyPodsFingerprint"
    assert attrs(with_exclusive)[fp] == attrs(only_exclusive)[fp]
    assert attrs(everyone)[fp] != attrs(only_exclusive)[fp]


def test_kernel_without_numa_gives_one_zone(tmp_path: Path) -> None:
    sys = tmp_path / "sys"
    write(sys / "devices/system/cpu/online", "0-7\n")
    write(tmp_path / "proc/meminfo", "MemTotal: 8000000 kB\n")
    nrt = build(Inputs("w", read_machine(sys), KubeletConfig(), None, None))
    assert [z.name for z in nrt.zones] == ["node-0"]
    assert attrs(nrt)["toposched.io/numa"].startswith("unsupported")


@pytest.mark.parametrize(
    ("policy", "scope", "word"),
    [
        ("single-numa-node", "pod", "SingleNUMANodePodLevel"),
        ("restricted", "container", "RestrictedContainerLevel"),
        ("best-effort", "pod", "BestEffortPodLevel"),
        ("none", "container", "None"),
    ],
)
def test_deprecated_topology_policies(policy: str, scope: str, word: str) -> None:
    assert topology_policy(KubeletConfig(topology_manager_policy=policy, topology_manager_scope=scope)) == word


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: Pod\n", "not a KubeletConfiguration"),
        ("reservedSystemCPUs: zero\n", "is not a CPU list"),
        ("systemReserved: {memory: lots}\n", "is not a Kubernetes quantity"),
        ("reservedMemory: [{limits: {memory: 1Gi}}]\n", "has no numaNode"),
        ("a: [\n", "not YAML"),
    ],
    ids=["wrong-kind", "bad-cpus", "bad-quantity", "no-numa-node", "not-yaml"],
)
def test_bad_kubelet_config_names_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(content)
    with pytest.raises(KubeletConfigError, match=message) as info:
        load(path)
    assert "config.yaml" in str(info.value)


def test_missing_kubelet_config_file(tmp_path: Path) -> None:
    with pytest.raises(KubeletConfigError, match="No such file"):
        load(tmp_path / "absent.yaml")


MI = 2**20
FOUR_GI_KB = 4 * 2**20
STATIC = {"memoryManagerPolicy": "Static"}


def _estimated(
    tmp_path: Path, nodes: list[FakeNode], config: dict[str, object], node_memory: str | None
) -> dict[str, dict[str, str]]:
    """Per zone, the available memory and hugepages an exporter without PodResources publishes."""
    node_allocatable = {"memory": parse_quantity(node_memory)} if node_memory else {}
    machine = read_machine(build_tree(tmp_path, nodes))
    nrt = build(Inputs("w", machine, parse_kubelet(config), None, None, node_allocatable))
    return {
        zone: {r: v[2] for r, v in resources.items() if r.startswith(("memory", "hugepages"))}
        for zone, resources in table(nrt).items()
    }


@pytest.mark.parametrize(
    ("nodes", "config", "node_memory", "expected"),
    [
        # The kubelet reserves 1000Mi + the 100Mi eviction threshold on NUMA 0 only; NUMA 1 keeps all
        # of its memory. Splitting the reservation over both zones put NUMA 1 550Mi below the kubelet.
        (
            [FakeNode(0, [0, 1], FOUR_GI_KB), FakeNode(1, [2, 3], FOUR_GI_KB)],
            {
                **STATIC,
                "systemReserved": {"memory": "1000Mi"},
                "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1100Mi"}}],
            },
            "7092Mi",
            {"node-0": {"memory": str(2996 * MI)}, "node-1": {"memory": str(4096 * MI)}},
        ),
        # Hugepages on one zone only: that zone's memory is what the hugepages leave.
        (
            [FakeNode(0, [0, 1], 2 * FOUR_GI_KB), FakeNode(1, [2, 3], FOUR_GI_KB, {1048576: 2, 2048: 64})],
            {**STATIC, "reservedMemory": [{"numaNode": 0, "limits": {"memory": "256Mi"}}]},
            "9856Mi",
            {
                "node-0": {"memory": str(7936 * MI)},
                "node-1": {"memory": str(1920 * MI), "hugepages-1Gi": str(2048 * MI), "hugepages-2Mi": str(128 * MI)},
            },
        ),
        # No Memory Manager: the node's allocatable (hugepages already taken off) split by the memory
        # outside hugepages, 8Gi : 2Gi, not by MemTotal, 8Gi : 4Gi.
        (
            [FakeNode(0, [0, 1], 2 * FOUR_GI_KB), FakeNode(1, [2, 3], FOUR_GI_KB, {1048576: 2})],
            {"systemReserved": {"memory": "256Mi"}, "evictionHard": {"nodefs.available": "1%"}},
            "9984Mi",
            {
                "node-0": {"memory": str(9984 * MI * 4 // 5)},
                "node-1": {"memory": str(9984 * MI // 5), "hugepages-1Gi": str(2048 * MI)},
            },
        ),
        # Without the Node's figure: the reservation alone (evictionHard without memory.available:
        # no threshold).
        (
            [FakeNode(0, [0, 1], FOUR_GI_KB), FakeNode(1, [2, 3], FOUR_GI_KB)],
            {"systemReserved": {"memory": "256Mi"}, "evictionHard": {"nodefs.available": "1%"}},
            None,
            {"node-0": {"memory": str(3968 * MI)}, "node-1": {"memory": str(3968 * MI)}},
        ),
    ],
    ids=["static-reserved-on-one-zone", "static-hugepages-on-one-zone", "no-memory-manager-split", "no-node-figure"],
)
def test_memory_estimates_match_the_kubelet(
    tmp_path: Path,
    nodes: list[FakeNode],
    config: dict[str, object],
    node_memory: str | None,
    expected: dict[str, dict[str, str]],
) -> None:
    assert _estimated(tmp_path, nodes, config, node_memory) == expected


@pytest.mark.parametrize(
    ("config", "eviction"),
    [
        ({}, 100 * MI),
        ({"evictionHard": {"nodefs.available": "1%"}}, 0),
        ({"evictionHard": {}}, 0),
        ({"evictionHard": {"memory.available": "200Mi"}}, 200 * MI),
        ({"evictionHard": {"nodefs.available": "1%"}, "mergeDefaultEvictionSettings": True}, 100 * MI),
    ],
    ids=["absent-kubelet-default", "set-without-memory", "empty", "explicit", "merged-defaults"],
)
def test_eviction_threshold_follows_the_kubelet_defaults(config: dict[str, object], eviction: int) -> None:
    assert parse_kubelet(config).eviction_memory == eviction
