"""A real node's DRA devices as data (testkit.realnode.dra): the text form of ``--dra``, its
checks, the ResourceSlices it makes and the node record that carries it."""

import json
import re
from pathlib import Path
from typing import Any

import pytest

from testkit.realnode import KubeletSettings, Topology, workload_pod
from testkit.realnode.dra import (
    PCIE_ROOT,
    STANDARD_NUMA,
    DRADevice,
    DRAError,
    NodeDRA,
    NumaAttribute,
    device_class,
    owned_by_node,
    published,
    resource_claim_template,
)
from testkit.realnode.dra_driver import DriverConfig, kubelet_wiped
from testkit.realnode.layout import NodeLayout
from testkit.realnode.node import NodeRecord, _check_dra

TWO_ZONES = Topology.uniform(zones=2, cores_per_zone=2, memory_per_zone="1Gi")
GPU = "gpu.example.com"


def _numa(value: int, name: str = STANDARD_NUMA) -> tuple[NumaAttribute, ...]:
    return (NumaAttribute(name, value),)


@pytest.mark.parametrize(
    ("item", "device"),
    [
        ("0", DRADevice("gpu-0", _numa(0))),
        ("-1", DRADevice("gpu-0", _numa(-1))),
        ("-", DRADevice("gpu-0")),
        ("dra.net/numaNode=-1", DRADevice("gpu-0", _numa(-1, "dra.net/numaNode"))),
        ("gpu.nvidia.com/numa=1", DRADevice("gpu-0", _numa(1, "gpu.nvidia.com/numa"))),
        (
            "0&dra.net/numaNode=0",
            DRADevice("gpu-0", (NumaAttribute(STANDARD_NUMA, 0), NumaAttribute("dra.net/numaNode", 0))),
        ),
        ("1#pci0000:80", DRADevice("gpu-0", _numa(1), "pci0000:80")),
        ("-#pci0000:00", DRADevice("gpu-0", (), "pci0000:00")),
        ("big@1", DRADevice("big", _numa(1))),
    ],
    ids=["standard", "standard-minus-one", "none", "vendor-minus-one", "nvidia", "two-forms", "pcie-root",
         "pcie-root-only", "named"],
)  # fmt: skip
def test_a_device_in_the_text_form(item: str, device: DRADevice) -> None:
    (parsed,) = NodeDRA.parse([f"{GPU}={item}"]).slices
    assert parsed.devices == (device,)
    assert NodeDRA.parse(NodeDRA.parse([f"{GPU}={item}"]).specs()) == NodeDRA.parse([f"{GPU}={item}"])


def test_pools_slices_and_default_names() -> None:
    dra = NodeDRA.parse([f"{GPU}=0,0", f"{GPU}=1", f"{GPU}:other/z=1", "nic.example.com:nics=", f"{GPU}:/last=-"])
    assert [(s.driver, s.pool, s.name, [d.name for d in s.devices]) for s in dra.slices] == [
        (GPU, "", "s0", ["gpu-0", "gpu-1"]),
        (GPU, "", "s1", ["gpu-2"]),
        (GPU, "other", "z", ["gpu-0"]),
        ("nic.example.com", "nics", "s0", []),
        (GPU, "", "last", ["gpu-3"]),  # named by its place in the node's pool, after s0 and s1
    ]
    assert dra.drivers() == [GPU, "nic.example.com"]
    assert dra.specs() == [f"{GPU}=0,0", f"{GPU}=1", f"{GPU}:other/z=1", "nic.example.com:nics=", f"{GPU}:/last=-"]
    assert dra.describe() == " ".join(dra.specs())
    assert NodeDRA().describe() == "no DRA devices"


def test_default_slice_names_sort_as_their_places() -> None:
    dra = NodeDRA.parse([f"{GPU}=0"] * 11)
    names = [s.name for s in dra.slices]
    assert names[:2] == ["s00", "s01"]
    assert names == sorted(names)


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (["gpu.example.com"], "expected DRIVER"),
        (["gpu.example.com=[0+1]"], "list attribute; the apiserver of Kubernetes 1.36 refuses those"),
        (["gpu.example.com=zero"], "NUMA 'zero' is an int, ATTRIBUTE=INT or '-'"),
        (["gpu.example.com=numaNode=0"], "give its domain"),
        (["gpu.example.com=0,,1"], "an empty device"),
        (["Gpu.example.com="], "driver name 'Gpu.example.com': must be a DNS subdomain"),
        (["gpu.example.com:Pool=0"], "pool name 'Pool'"),
        (["gpu.example.com:p/=0"], "no slice name after '/'"),
        (["gpu.example.com=a@0,a@1"], "device a is given twice in pool (the node)"),
        (["gpu.example.com=0", "gpu.example.com:/s0=1"], "slice s0 of pool (the node) is given twice"),
        (["gpu.example.com=0&0"], "a NUMA attribute is given twice"),
        (["gpu.example.com=resource.kubernetes.io/pcieRoot=1"], "is a string, given after '#'"),
        (["gpu.example.com=" + ",".join(["0"] * 129)], "more than 128 devices"),
    ],
    ids=["no-devices-part", "list", "not-a-number", "unqualified", "empty-device", "driver", "pool", "slice",
         "device-twice", "slice-twice", "attribute-twice", "pcie-as-int", "too-many"],
)  # fmt: skip
def test_mistakes_are_named(specs: list[str], message: str) -> None:
    with pytest.raises(DRAError, match=re.escape(message)):
        NodeDRA.parse(specs)


def test_numa_nodes_must_be_the_topology_s_unless_allowed() -> None:
    NodeDRA.parse([f"{GPU}=0,1,-1,dra.net/numaNode=-1,-"]).validate(TWO_ZONES)
    with pytest.raises(DRAError, match="device gpu-0 is on NUMA node 2; the topology has nodes 0-1"):
        NodeDRA.parse([f"{GPU}=dra.net/numaNode=2"]).validate(TWO_ZONES)
    NodeDRA.parse([f"{GPU}=7"], allow_unknown_numa=True).validate(TWO_ZONES)


def test_the_slices_a_node_publishes() -> None:
    dra = NodeDRA.parse([f"{GPU}=0#pci0000:00", f"{GPU}=-", f"{GPU}:b=dra.net/numaNode=-1"])
    first, second, other = dra.resource_slices("n1", 3)
    assert first == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"n1.{GPU}.n1.s0"},
        "spec": {
            "driver": GPU,
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 3, "resourceSliceCount": 2},
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {STANDARD_NUMA: {"int": 0}, PCIE_ROOT: {"string": "pci0000:00"}},
                }
            ],
        },
    }
    assert second["spec"]["devices"] == [{"name": "gpu-1"}]  # no attributes at all
    assert other["metadata"]["name"] == f"n1.{GPU}.b.s0"
    assert other["spec"]["pool"] == {"name": "b", "generation": 3, "resourceSliceCount": 1}
    assert dra.device(GPU, "b", "gpu-0", node="n1").numa == _numa(-1, "dra.net/numaNode")
    with pytest.raises(DRAError, match="publishes no device gpu-9 in pool n1"):
        dra.device(GPU, "n1", "gpu-9", node="n1")


def test_what_is_compared_of_a_published_slice() -> None:
    (body,) = NodeDRA.parse([f"{GPU}=0,1"]).resource_slices("n1", 1)
    stored: dict[str, Any] = json.loads(json.dumps(owned_by_node(body, "n1", "uid-1")))
    stored["metadata"].update(resourceVersion="7", uid="x")  # what the apiserver adds does not count
    assert published(stored) == published(body)
    assert stored["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-1", "controller": True}
    ]
    (newer,) = NodeDRA.parse([f"{GPU}=0,1"]).resource_slices("n1", 2)
    (moved,) = NodeDRA.parse([f"{GPU}=0,0"]).resource_slices("n1", 1)
    assert published(newer) != published(body)
    assert published(moved) != published(body)


def test_the_record_carries_dra_devices_and_old_records_still_load(tmp_path: Path) -> None:
    dra = NodeDRA.parse([f"{GPU}=0,x@1#pci0000:80", f"{GPU}:b/z=-"], allow_unknown_numa=True)
    record = NodeRecord("n", 3, 10250, 10248, TWO_ZONES, KubeletSettings(), dra=dra)
    path = tmp_path / "node.json"
    path.write_text(record.to_json())
    assert NodeRecord.load(path) == record
    assert NodeDRA.from_dict(json.loads(json.dumps(dra.to_dict()))) == dra
    plain = NodeRecord("n", 3, 10250, 10248, TWO_ZONES, KubeletSettings())
    assert "dra" not in json.loads(plain.to_json())  # a node without DRA devices is written as before
    with pytest.raises(DRAError, match="unknown fields"):
        NodeDRA.from_dict({"slices": [], "pools": []})


def test_two_nodes_never_publish_one_pool() -> None:
    def record(name: str, specs: list[str]) -> NodeRecord:
        return NodeRecord(name, 0, 1, 2, TWO_ZONES, KubeletSettings(), dra=NodeDRA.parse(specs))

    mine, layout = NodeDRA.parse([f"{GPU}=0", f"{GPU}:shared=0"]), NodeLayout(Path("/r/.cluster/nodes/a"))
    others = [record("a", [f"{GPU}:shared=0"]), record("b", [f"{GPU}=0", "nic.example.com:shared=0"])]
    _check_dra("a", mine, TWO_ZONES, layout, others)
    with pytest.raises(DRAError, match=f"pool shared of {GPU} is published by real node b already"):
        _check_dra("a", mine, TWO_ZONES, layout, [record("b", [f"{GPU}:shared=1"])])


def test_the_driver_s_configuration_round_trips(tmp_path: Path) -> None:
    config = DriverConfig(4, "n1", NodeDRA.parse([f"{GPU}=0,1"]))
    config.write(tmp_path / "dra" / "dra.json")
    assert DriverConfig.read(tmp_path / "dra" / "dra.json") == config
    assert config.slices() == config.dra.resource_slices("n1", 4)


def test_the_kubelet_s_start_up_wipe_is_found_in_its_current_run(tmp_path: Path) -> None:
    log = tmp_path / "kubelet.log"
    assert not kubelet_wiped(log)
    start = 'I1 server.go:545] "Kubelet version" kubeletVersion="v1.36.3"\n'
    wipe = 'I1 dra_plugin_manager.go:247] "Deleted ResourceSlices" fieldSelector="spec.nodeName=n1"\n'
    driver_wipe = (
        'I1 dra_plugin_manager.go:247] "Deleted ResourceSlices" fieldSelector="spec.driver=d,spec.nodeName=n1"\n'
    )
    log.write_text(start + wipe + start)
    assert not kubelet_wiped(log)  # that was the run before
    log.write_text(start + wipe + start + driver_wipe)
    assert not kubelet_wiped(log)  # one driver's slices only
    log.write_text(start + wipe + start + wipe)
    assert kubelet_wiped(log)


def test_a_long_driver_name_makes_the_longest_socket() -> None:
    layout = NodeLayout(Path("/r/.cluster/nodes/n1"))
    driver = "a-rather-long-driver-name.example.com"
    assert layout.longest_socket([driver]) == Path(f"/r/.cluster/nodes/n1/kubelet/plugins_registry/{driver}-reg.sock")
    assert layout.longest_socket() != layout.longest_socket([driver])


def test_device_classes_templates_and_pods_that_claim() -> None:
    assert device_class(GPU)["spec"] == {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}
    assert device_class(GPU, "gpus")["metadata"] == {"name": "gpus"}
    template = resource_claim_template("two", "gpus", 2)
    assert template["spec"]["spec"]["devices"]["requests"] == [
        {"name": "devices", "exactly": {"deviceClassName": "gpus", "allocationMode": "ExactCount", "count": 2}}
    ]
    pod = workload_pod("p", cpu=1, memory="1Gi", claims={"gpu": "two", "nic": "one-nic"})
    assert pod["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "two"},
        {"name": "nic", "resourceClaimTemplateName": "one-nic"},
    ]
    (container,) = pod["spec"]["containers"]
    assert container["resources"]["claims"] == [{"name": "gpu"}, {"name": "nic"}]
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
    assert "resourceClaims" not in workload_pod("q")["spec"]
