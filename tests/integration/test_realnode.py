"""Real kubelet nodes with fake NUMA topologies (testkit.realnode) in the local cluster.

The cluster tests need root and the node tools (``make test-tools``); without them they skip,
except under CI, where they fail. The first tests need neither: they check the fake sysfs, the
settings checks, the runc wrapper and the images on their own.
"""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from testkit.cluster import skip_or_fail, wait_for
from testkit.realnode import (
    NODE_LABEL,
    KubeletSettings,
    RealNode,
    SettingsError,
    Topology,
    Zone,
    add_node,
    leftovers,
    list_nodes,
    remove_node,
    reset_node,
    workload_pod,
)
from testkit.realnode import images as node_images
from testkit.realnode.host import HOST_MOUNT_POINTS, link_exists, mountinfo
from testkit.realnode.topology import GIB, MIB, parse_cpulist, write_fake_host

pytestmark = pytest.mark.cluster


# -- without a cluster ------------------------------------------------------------------------------


def test_fake_sysfs_is_what_cadvisor_reads(tmp_path: Path) -> None:
    topology = Topology(
        (Zone(4, 4 * GIB), Zone(2, 2 * GIB, hugepages_2mi=100), Zone(0, 8 * GIB)),
        threads_per_core=2,
        distances=((10, 20, 30), (20, 10, 20), (30, 20, 10)),
    )
    fake = write_fake_host(topology, tmp_path / "host")
    # cadvisor finds a zone's CPUs by globbing node<N>/cpu*, which must resolve into the cpu tree.
    assert sorted(p.name for p in (fake.node / "node1").glob("cpu[0-9]*")) == ["cpu10", "cpu11", "cpu4", "cpu5"]
    assert (fake.node / "node1" / "cpu4" / "topology" / "core_id").resolve().is_file()
    assert (fake.node / "node1" / "cpulist").read_text() == "4-5,10-11\n"
    assert (fake.node / "node2" / "cpulist").read_text() == "\n"  # memory-only zone
    assert (fake.node / "has_cpu").read_text() == "0-1\n"
    assert (fake.cpu / "online").read_text() == "0-11\n"
    assert (fake.cpu / "cpu3" / "topology" / "thread_siblings_list").read_text() == "3,9\n"
    assert (fake.node / "node0" / "distance").read_text() == "10 20 30\n"
    assert (fake.node / "node1" / "meminfo").read_text().startswith("Node 1 MemTotal:         2097152 kB\n")
    assert (fake.node / "node1" / "hugepages" / "hugepages-2048kB" / "nr_hugepages").read_text() == "100\n"
    assert (fake.hugepages / "hugepages-2048kB" / "nr_hugepages").read_text() == "100\n"
    assert fake.meminfo.read_text().startswith("MemTotal:       14680064 kB\n")
    assert Topology.from_dict(topology.to_dict()) == topology


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (KubeletSettings(reserved_system_cpus=""), "at least one reserved CPU"),
        (KubeletSettings(reserved_system_cpus="9"), "do not exist"),
        (KubeletSettings(reserved_memory={0: 100 * MIB}), "exactly"),
        (KubeletSettings(reserved_memory={2: 256 * MIB}), "NUMA node 2"),
        (KubeletSettings(cpu_manager_policy_options={"align-by-socket": "true"}), "alpha"),
        (KubeletSettings(topology_manager_policy_options={"max-allowable-numa-nodes": "4"}), "at least 8"),
        (KubeletSettings(memory_manager_policy="BestEffort"), "Windows"),
    ],
)
def test_settings_the_kubelet_would_refuse(settings: KubeletSettings, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        settings.validate(Topology.uniform(2, 4))


def test_more_than_8_numa_nodes_need_the_option() -> None:
    nine = Topology.uniform(zones=9, cores_per_zone=1, memory_per_zone="1Gi")
    with pytest.raises(SettingsError, match="more than 8"):
        KubeletSettings().validate(nine)
    KubeletSettings(topology_manager_policy_options={"max-allowable-numa-nodes": "9"}).validate(nine)
    KubeletSettings(topology_manager_policy="none").validate(nine)


def test_runc_wrapper_projects_cpusets(tmp_path: Path) -> None:
    """create bundles and update resources reach the real runc with real CPUs and memory nodes; a
    host-network container gets a UTS namespace of its own, named after the node."""
    seen = tmp_path / "seen.json"
    fake_runc = tmp_path / "runc"
    fake_runc.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"json.dump({{'args': sys.argv[1:], 'stdin': sys.stdin.read()}}, open({str(seen)!r}, 'w'))\n"
    )
    fake_runc.chmod(0o755)
    module = Path(__file__).resolve().parents[2] / "testkit" / "realnode"
    wrapper = tmp_path / "wrapper"
    wrapper.write_text(
        f"#!{sys.executable} -S\nimport sys\nsys.path.insert(0, {str(module)!r})\nfrom runc_wrapper import main\n"
        f"sys.exit(main(sys.argv, real_runc={str(fake_runc)!r}, cpus=[0, 1], mems=[0], log=None, hostname='n-a'))\n"
    )
    wrapper.chmod(0o755)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps({"linux": {"resources": {"cpu": {"cpus": "4-5", "mems": "1"}}}}))
    subprocess.run([str(wrapper), "--root", "/r", "create", "--bundle", str(bundle), "c1"], check=True)
    created = json.loads((bundle / "config.json").read_text())
    assert created["linux"]["resources"]["cpu"] == {"cpus": "0-1", "mems": "0"}
    assert (created["linux"]["namespaces"], created["hostname"]) == ([{"type": "uts"}], "n-a")
    assert json.loads(seen.read_text())["args"] == ["--root", "/r", "create", "--bundle", str(bundle), "c1"]
    resources = json.dumps({"cpu": {"cpus": "3,7", "shares": 2048}})
    subprocess.run([str(wrapper), "update", "--resources", "-", "c1"], input=resources, text=True, check=True)
    forwarded = json.loads(seen.read_text())
    assert forwarded["args"] == ["update", "--resources", "-", "c1"]
    assert json.loads(forwarded["stdin"]) == {"cpu": {"cpus": "1", "shares": 2048}}
    # A pod network's container keeps its sandbox's namespaces.
    pod_network = {"linux": {"namespaces": [{"type": "network", "path": "/proc/1/ns/net"}]}}
    (bundle / "config.json").write_text(json.dumps(pod_network))
    subprocess.run([str(wrapper), "create", "--bundle", str(bundle), "c2"], check=True)
    assert json.loads((bundle / "config.json").read_text()) == pod_network


def test_images_are_deterministic_docker_archives() -> None:
    if not node_images.BUSYBOX.is_file() or not shutil.which("gcc"):
        skip_or_fail("the images need gcc and busybox-static: run `make test-tools` as root")
    for archive in node_images.archives().values():
        with tarfile.open(archive) as tar:
            manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
            assert manifest[0]["RepoTags"][0] in (node_images.PAUSE_IMAGE, node_images.WORKLOAD_IMAGE)
            assert all(m.mtime == 0 and m.uid == 0 for m in tar.getmembers())
    layer = node_images.layer_tar([node_images.FileEntry("a", b"x"), node_images.FileEntry("b", link="a")])
    assert layer == node_images.layer_tar([node_images.FileEntry("b", link="a"), node_images.FileEntry("a", b"x")])


# -- against the local cluster ----------------------------------------------------------------------


@pytest.fixture
def node_name(real_nodes: None) -> Iterator[str]:
    """A fresh real node name; the node is removed afterwards and must leave nothing behind."""
    name = f"rn-{uuid.uuid4().hex[:8]}"
    yield name
    if any(n.name == name for n in list_nodes()):
        remove_node(name)
    assert leftovers(name) == []


async def _pod(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    created = await client.CoreV1Api(api).create_namespaced_pod(namespace, body)
    return {"uid": created.metadata.uid, "name": created.metadata.name}


async def _phase(api: client.ApiClient, namespace: str, name: str, phases: set[str], within: float = 60) -> Any:
    core = client.CoreV1Api(api)

    async def reached() -> Any:
        pod = await core.read_namespaced_pod(name, namespace)
        return pod if pod.status.phase in phases else None

    return await wait_for(reached, within=within, what=f"pod {name} in {sorted(phases)}")


def _zones_of(node: RealNode, cpus: list[int]) -> set[int]:
    return {node.topology.zone_of_cpu(c) for c in cpus}


async def test_single_numa_node_admission(api: client.ApiClient, namespace: str, node_name: str) -> None:
    node = await asyncio.to_thread(add_node, node_name, Topology.uniform(2, 4, "4Gi"), KubeletSettings())
    obj = await client.CoreV1Api(api).read_node(node_name)
    assert obj.status.capacity["cpu"] == "8"
    assert obj.metadata.labels[NODE_LABEL] == "true"

    # 5 exclusive CPUs fit on no single zone (4 each, CPU 0 reserved): the kubelet rejects the pod.
    await _pod(api, namespace, workload_pod("too-big", node=node_name, cpu=5, memory="256Mi"))
    rejected = await _phase(api, namespace, "too-big", {"Failed"})
    assert rejected.status.reason == "TopologyAffinityError", rejected.status

    # 2 + 2 fit, and run: the runc wrapper moves their cpusets onto the machine's real CPUs.
    first = await _pod(api, namespace, workload_pod("two-a", node=node_name, cpu=2, memory="256Mi"))
    await _phase(api, namespace, "two-a", {"Running"})
    second = await _pod(api, namespace, workload_pod("two-b", node=node_name, cpu=2, memory="256Mi"))
    await _phase(api, namespace, "two-b", {"Running"})
    cpus_a = node.assigned_cpus(first["uid"])["app"]
    cpus_b = node.assigned_cpus(second["uid"])["app"]
    assert len(cpus_a) == len(cpus_b) == 2
    assert not set(cpus_a) & set(cpus_b)
    assert 0 not in cpus_a + cpus_b  # reserved
    assert len(_zones_of(node, cpus_a)) == len(_zones_of(node, cpus_b)) == 1  # single-numa-node
    assert _zones_of(node, cpus_a) != _zones_of(node, cpus_b)  # zone 0 had 3 free CPUs: 2 + 2 must split
    assert any("create" in line for line in node.runc_rewrites())

    # The PodResources socket tells the same as the checkpoint.
    from toposched.exporter.podresources.client import PodResourcesClient

    pods = PodResourcesClient(node.pod_resources_socket, timeout=5)
    try:
        listed = {p.name: p for p in await pods.list_pods() if p.namespace == namespace}
        allocatable = await pods.allocatable()
    finally:
        await pods.close()
    assert sorted(listed["two-a"].containers[0].cpu_ids) == cpus_a
    assert sorted(listed["two-b"].containers[0].cpu_ids) == cpus_b
    assert sorted(allocatable.cpu_ids) == list(range(1, 8))


async def test_topology_change_resets_the_node(api: client.ApiClient, namespace: str, node_name: str) -> None:
    await asyncio.to_thread(add_node, node_name, Topology.uniform(2, 4, "4Gi"), KubeletSettings())
    await _pod(api, namespace, workload_pod("before", node=node_name, cpu=2, memory="256Mi"))
    await _phase(api, namespace, "before", {"Running"})

    smt = Topology.uniform(zones=3, cores_per_zone=2, memory_per_zone="2Gi", threads_per_core=2, hugepages_2mi=32)
    node = await asyncio.to_thread(reset_node, node_name, smt)
    obj = await client.CoreV1Api(api).read_node(node_name)
    assert obj.status.capacity["cpu"] == "12"
    assert obj.status.capacity["hugepages-2Mi"] == "192Mi"
    state = node.cpu_manager_state()
    assert state is not None
    assert state.get("entries", {}) == {}  # a fresh checkpoint: the old assignment is gone
    assert parse_cpulist(state["defaultCpuSet"]) == list(range(12))
    memory = node.memory_manager_state()
    assert memory is not None
    assert sorted(memory["machineState"]) == ["0", "1", "2"]

    with pytest.raises(ApiException) as gone:  # drained
        await client.CoreV1Api(api).read_namespaced_pod("before", namespace)
    assert gone.value.status == 404
    # Zone 1 has 2 cores x 2 threads free; CPU 0 (zone 0) is reserved.
    after = await _pod(api, namespace, workload_pod("after", node=node_name, cpu=4, memory="256Mi"))
    await _phase(api, namespace, "after", {"Running"})
    cpus = node.assigned_cpus(after["uid"])["app"]
    assert _zones_of(node, cpus) == {1}
    assert sorted(cpus) == [2, 3, 8, 9]  # whole cores: both threads of each


def _host_view(name: str) -> dict[str, Any]:
    """What the host shows of a node: its mounts, its cgroups, and the shared mount points."""
    return {
        "mounts": [m for m, _, _ in mountinfo() if name in m],
        "cgroups": sorted(str(p) for p in Path("/sys/fs/cgroup").glob(f"*/toposched-realnode/{name}")),
        "mount points": {p for p in HOST_MOUNT_POINTS if os.path.isdir(p)},
    }


async def test_removed_node_leaves_nothing(api: client.ApiClient, namespace: str, node_name: str) -> None:
    before = _host_view(node_name)
    others = [n.name for n in list_nodes()]
    node = await asyncio.to_thread(add_node, node_name)
    await _pod(api, namespace, workload_pod("busy", node=node_name, cpu=1, memory="128Mi"))
    await _pod(api, namespace, workload_pod("shared", node=node_name))  # BestEffort, shared pool
    await _phase(api, namespace, "busy", {"Running"})
    await _phase(api, namespace, "shared", {"Running"})
    bridge = node.record.bridge
    assert link_exists(bridge)

    await asyncio.to_thread(remove_node, node_name)
    assert leftovers(node_name) == []
    assert not link_exists(bridge)
    after = _host_view(node_name)
    assert after["mounts"] == after["cgroups"] == []
    if not others:  # the last real node gave back the shared mount points too
        assert after["mount points"] == before["mount points"]
    core = client.CoreV1Api(api)

    async def node_gone() -> bool:
        try:
            await core.read_node(node_name)
        except ApiException as exc:
            return exc.status == 404
        return False

    await wait_for(node_gone, within=30, what=f"Node {node_name} deleted")
