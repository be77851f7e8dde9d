"""Devices judged by a real kubelet: a real node whose device plugin (testkit.deviceplugin) serves
GPUs on one NUMA zone each, two NICs between the zones and two devices without topology, one GPU
unhealthy. The kubelet's device manager registers them, counts them, reports them through
PodResources, aligns and refuses pods with them, and follows the plugin's changes and restarts
and its own restart.

One node serves the whole module (reset only at the end). Pods run under the oracle's
RuntimeClass, whose handler no runtime has: admission and Allocate happen before any sandbox.
Needs root and the node tools (``make test-tools``): skips without them, fails under CI.
"""

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from testkit.cluster import skip_or_fail, wait_for
from testkit.realnode import (
    NodeDevices,
    RealNode,
    RealNodeError,
    add_node,
    leftovers,
    list_nodes,
    missing_tools,
    remove_node,
    reset_node,
    workload_pod,
)
from testkit.realnode.device_plugin import ALLOCATE, PREFERRED, REGISTER
from testkit.realnode.exporter import nrt_attributes, published_nrt, running_exporter
from toposched.apis.constants import NRT_ATTR_DEVICE_GROUPS
from toposched.exporter.podresources.client import PodResourcesClient
from toposched.exporter.topology import DeviceSet

pytestmark = pytest.mark.cluster

GPU, NIC, ACCEL = "example.com/gpu", "example.com/nic", "example.com/accel"
# gpu-0, gpu-1 on zone 0; gpu-2, gpu-3 on zone 1; gpu-4 on zone 1, unhealthy. The GPUs' plugin
# offers GetPreferredAllocation, the others' do not.
DEVICES = NodeDevices.parse([f"{GPU}:preferred=0,0,1,1,1!", f"{NIC}=0+1,0+1", f"{ACCEL}=-,-"])
ZONE_OF_GPU = {"gpu-0": 0, "gpu-1": 0, "gpu-2": 1, "gpu-3": 1}

RUNTIME_CLASS = "toposched-oracle"
"""The oracle's RuntimeClass (testkit/oracle/observe.py), made here when missing."""


@pytest.fixture(scope="module")
def node(kubeconfig: Path) -> Iterator[RealNode]:
    problems = [] if os.geteuid() == 0 else ["root"]
    problems += [f"{m.what} ({m.package})" for m in missing_tools()]
    if problems:
        skip_or_fail(f"real nodes need {', '.join(problems)}: run `make test-tools` as root")
    name = f"rd-{uuid.uuid4().hex[:6]}"
    yield add_node(name, devices=DEVICES)
    if any(n.name == name for n in list_nodes()):
        remove_node(name)
    assert leftovers(name) == []


@pytest.fixture(scope="module")
async def runtime_class(api: client.ApiClient) -> str:
    body = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": RUNTIME_CLASS},
        "handler": "toposched-oracle-none",  # no containerd of a real node knows it
    }
    try:
        await client.NodeV1Api(api).create_runtime_class(body)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    return RUNTIME_CLASS


def _pod(name: str, node: RealNode, runtime_class: str, devices: dict[str, int]) -> dict[str, Any]:
    body = workload_pod(name, node=node.name, cpu=1, memory="128Mi", devices=devices)
    body["spec"]["runtimeClassName"] = runtime_class
    return body


async def _allocatable(node: RealNode) -> set[DeviceSet]:
    resources = PodResourcesClient(node.pod_resources_socket, timeout=5)
    try:
        return set((await resources.allocatable()).devices)
    finally:
        await resources.close()


async def _all_pod_devices(node: RealNode) -> list[set[DeviceSet]]:
    """Each listed container's devices, as PodResources List says."""
    resources = PodResourcesClient(node.pod_resources_socket, timeout=5)
    try:
        pods = await resources.list_pods()
    finally:
        await resources.close()
    return [set(c.devices) for p in pods for c in p.containers]


async def _pod_devices(node: RealNode, namespace: str, name: str) -> dict[str, set[DeviceSet]] | None:
    """Container -> its devices as PodResources List says (None: the pod is not listed yet)."""
    resources = PodResourcesClient(node.pod_resources_socket, timeout=5)
    try:
        pods = await resources.list_pods()
    finally:
        await resources.close()
    pod = next((p for p in pods if (p.namespace, p.name) == (namespace, name)), None)
    return None if pod is None else {c.name: set(c.devices) for c in pod.containers}


async def _node_counts(api: client.ApiClient, node: RealNode, resource: str) -> tuple[str | None, str | None]:
    status = (await client.CoreV1Api(api).read_node(node.name)).status
    return (status.capacity or {}).get(resource), (status.allocatable or {}).get(resource)


async def test_the_kubelet_registers_counts_and_reports_the_devices(api: client.ApiClient, node: RealNode) -> None:
    for resource, counts in {GPU: ("5", "4"), NIC: ("2", "2"), ACCEL: ("2", "2")}.items():
        assert await _node_counts(api, node, resource) == counts  # capacity counts gpu-4, allocatable does not
    assert sorted(c.resource for c in node.device_plugin.calls(REGISTER)) == sorted([GPU, NIC, ACCEL])

    # PodResources: the healthy devices, once per NUMA zone (the NICs twice), the others without one.
    expected = {DeviceSet(GPU, (gpu,), (zone,)) for gpu, zone in ZONE_OF_GPU.items()}
    expected |= {DeviceSet(NIC, (nic,), (zone,)) for nic in ("nic-0", "nic-1") for zone in (0, 1)}
    expected |= {DeviceSet(ACCEL, (accel,), ()) for accel in ("accel-0", "accel-1")}
    assert await _allocatable(node) == expected


async def test_a_pod_gets_aligned_devices_the_plugin_preferred(
    api: client.ApiClient, namespace: str, node: RealNode, runtime_class: str
) -> None:
    since = node.device_plugin.log_size()
    body = _pod("aligned", node, runtime_class, {GPU: 1, NIC: 1, ACCEL: 1})
    await client.CoreV1Api(api).create_namespaced_pod(namespace, body)

    async def allocated() -> set[DeviceSet] | None:
        # Listed as soon as the kubelet knows the pod; its devices once admission allocated them.
        devices = (await _pod_devices(node, namespace, "aligned") or {}).get("app", set())
        return devices if {d.resource for d in devices} == {GPU, NIC, ACCEL} else None

    devices = await wait_for(allocated, within=30, what="the pod's devices in PodResources List")
    got = {d.resource: d.ids for d in devices}
    zones = {d.numa for d in devices if d.resource == GPU}
    assert len(got[GPU]) == len(got[NIC]) == len(got[ACCEL]) == 1
    assert zones == {(ZONE_OF_GPU[got[GPU][0]],)}
    pod = await client.CoreV1Api(api).read_namespaced_pod("aligned", namespace)
    assert pod.status.phase == "Pending"  # admitted; no runtime ever starts its sandbox
    cpu_zones = {node.topology.zone_of_cpu(c) for c in node.assigned_cpus(pod.metadata.uid)["app"]}
    assert cpu_zones == set(zones.pop())  # single-numa-node: the CPU beside the GPU

    # The kubelet asked the GPUs' plugin (only) which of the zone's two it prefers and took that one:
    # the highest id, where it would otherwise have taken either.
    (preferred,) = node.device_plugin.calls(PREFERRED, since=since)
    assert preferred.resource == GPU
    assert preferred.detail["size"] == "1"
    assert preferred.ids == got[GPU] == (max(preferred.detail["available"].split(",")),)
    allocated = {c.resource: c.ids for c in node.device_plugin.calls(ALLOCATE, since=since)}
    assert allocated == got


async def test_more_devices_than_any_zone_has_is_a_topology_affinity_error(
    api: client.ApiClient, namespace: str, node: RealNode, runtime_class: str
) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod(namespace, _pod("three-gpus", node, runtime_class, {GPU: 3}))

    async def failed() -> Any:
        pod = await core.read_namespaced_pod("three-gpus", namespace)
        return pod if pod.status.phase == "Failed" else None

    pod = await wait_for(failed, within=30, what="the pod to be rejected")
    assert pod.status.reason == "TopologyAffinityError", pod.status


@pytest.mark.usefixtures("crds")
async def test_devices_without_topology_all_held_leave_no_room(
    api: client.ApiClient, namespace: str, node: RealNode, runtime_class: str, tmp_path: Path
) -> None:
    """Both devices of a resource without topology held: the Topology Manager admits one more
    (no topology, no preference), then the device manager's Allocate fails -- and toposched,
    reading the NRT the exporter publishes (``example.com/accel@-=2/0``), says so first."""
    core = client.CoreV1Api(api)

    async def accel_free() -> bool:  # earlier tests' pods may still be going away
        pods = await _all_pod_devices(node)
        return not any(d.resource == ACCEL for devices in pods for d in devices)

    await wait_for(accel_free, within=90, what="no pod holding an accelerator")
    await core.create_namespaced_pod(namespace, _pod("holder", node, runtime_class, {ACCEL: 2}))

    async def held() -> bool:
        devices = (await _pod_devices(node, namespace, "holder") or {}).get("app", set())
        return sum(len(d.ids) for d in devices if d.resource == ACCEL) == 2

    await wait_for(held, within=30, what="the holder's two accelerators in PodResources List")
    with running_exporter(node, period=2):

        async def published() -> dict[str, Any] | None:
            nrt = await asyncio.to_thread(published_nrt, node)
            groups = nrt_attributes(nrt).get(NRT_ATTR_DEVICE_GROUPS, "") if nrt else ""
            return nrt if f"{ACCEL}@-=2/0" in groups.split(";") else None

        nrt = await wait_for(published, within=30, what=f"the NRT to show both {ACCEL} held")
    one_more = _pod("one-more", node, runtime_class, {ACCEL: 1})
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(one_more))
    (tmp_path / "nrt.yaml").write_text(yaml.safe_dump(nrt))
    pod_file, nrt_file = str(tmp_path / "pod.yaml"), str(tmp_path / "nrt.yaml")
    explain = [sys.executable, "-m", "toposched", "explain", "--pod", pod_file, "--nrt", nrt_file, "-o", "json"]
    explained = await asyncio.to_thread(subprocess.run, explain, capture_output=True, text=True, check=True)
    (verdict,) = [r for r in json.loads(explained.stdout) if r["node"] == node.name]
    assert not verdict["fit"]
    assert verdict["reason"] == f"cannot allocate for container app: not enough {ACCEL}: 1 requested, 0 free"

    await core.create_namespaced_pod(namespace, one_more)

    async def failed() -> Any:
        pod = await core.read_namespaced_pod("one-more", namespace)
        return pod if pod.status.phase == "Failed" else None

    pod = await wait_for(failed, within=30, what="the kubelet to reject the pod")
    assert pod.status.reason == "UnexpectedAdmissionError", pod.status
    assert ACCEL in (pod.status.message or ""), pod.status
    await core.delete_namespaced_pod("holder", namespace)


async def test_a_device_marked_unhealthy_mid_run_leaves_allocatable(api: client.ApiClient, node: RealNode) -> None:
    plugin = node.device_plugin
    await asyncio.to_thread(plugin.set_health, GPU, "gpu-0", False)  # returns once the Node shows it
    assert await _node_counts(api, node, GPU) == ("5", "3")
    assert DeviceSet(GPU, ("gpu-0",), (0,)) not in await _allocatable(node)
    await asyncio.to_thread(plugin.set_health, GPU, "gpu-0", True)
    assert await _node_counts(api, node, GPU) == ("5", "4")


async def test_a_stopped_or_restarted_plugin_and_a_restarted_kubelet(api: client.ApiClient, node: RealNode) -> None:
    plugin = node.device_plugin
    await asyncio.to_thread(plugin.stop)
    assert not plugin.running()
    assert not any(p.exists() for p in plugin.sockets().values())
    with pytest.raises(RealNodeError, match=r"the device plugin of rd-\w+ exited\n--- plugin.log"):
        plugin.wait(5)  # at once, with the tails of its log and the kubelet's

    # The kubelet marks a stopped plugin's devices unhealthy (their capacity stays for its grace period).
    async def dropped() -> bool:
        return await _node_counts(api, node, GPU) == ("5", "0")

    await wait_for(dropped, within=30, what="the stopped plugin's GPUs to leave allocatable")

    for action in (plugin.start, plugin.restart, plugin.reregister, node.restart_kubelet):
        since = plugin.log_size()
        await asyncio.to_thread(action)  # each returns once the kubelet has the lists and the Node shows them
        registered = sorted(c.resource for c in plugin.calls(REGISTER, since=since))
        assert registered == sorted([GPU, NIC, ACCEL]), action
        assert await _node_counts(api, node, GPU) == ("5", "4"), action
    assert len(await _allocatable(node)) == 10  # 4 GPUs, 2 NICs x 2 zones, 2 without a zone


async def test_a_reset_serves_new_devices(api: client.ApiClient, node: RealNode) -> None:
    reset = await asyncio.to_thread(reset_node, node.name, devices=NodeDevices.parse([f"{GPU}=1"]))
    assert reset.devices.specs() == [f"{GPU}=1"]
    assert await _node_counts(api, node, GPU) == ("1", "1")
    # Gone from the Node: the reset drops the old device resources, which its new kubelet never heard of.
    assert await _node_counts(api, node, NIC) == (None, None)
    assert [c.resource for c in reset.device_plugin.calls(REGISTER)] == [GPU]  # a new log
