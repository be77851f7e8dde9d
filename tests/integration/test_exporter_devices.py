"""The real exporter on a real node with devices, judged by the kubelet's own accounting: after
every admission and deletion, every health change and a plugin's stop and start, each zone's
device figures and the NRT's device groups equal what the kubelet's device checkpoint, its healthy
devices and the plugin's topology say (``testkit.realnode.accounting``), within the exporter's
period; the CPU and memory figures stay right throughout.

One node and one exporter serve the module. Pods that need not run use the oracle's RuntimeClass,
whose handler no runtime has: the kubelet admits them and allocates their devices before any
sandbox. Needs root and the node tools (``make test-tools``): skips without them, fails under CI.
"""

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from testkit.cluster import wait_for, wait_pod_gone, wait_pod_phase
from testkit.oracle.observe import RUNTIME_CLASS, prepare
from testkit.realnode import (
    GIB,
    KubeletSettings,
    NodeDevices,
    RealNode,
    RealNodeError,
    Topology,
    Zone,
    add_node,
    leftovers,
    list_nodes,
    remove_node,
    workload_pod,
)
from testkit.realnode.accounting import (
    active_pod_uids,
    device_checkpoint,
    differences,
    kubelet_devices,
    kubelet_figures,
    nrt_figures,
)
from testkit.realnode.exporter import NodeExporter, published_nrt, running_exporter, wait_agreement
from toposched.apis.constants import NRT_ATTR_DEVICE_GROUPS
from toposched.exporter.podresources.client import PodResourcesClient

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds")]

PERIOD = 10.0  # the exporter's default --period: every figure must be right within it
GPU, NIC = "example.com/gpu", "example.com/nic"
# gpu-0..2 on zone 0, gpu-3..5 on zone 1, gpu-6 on both, gpu-7 without topology, gpu-8 unhealthy;
# nic-0 on zone 0, nic-1 on zone 1, nic-2 on both.
DEVICES = NodeDevices.parse([f"{GPU}=0,0,0,1,1,1,0+1,-,1!", f"{NIC}=0,1,0+1"])


@pytest.fixture(scope="module")
def node(kubeconfig: Path, real_nodes: None) -> Iterator[RealNode]:
    name = f"rxd-{uuid.uuid4().hex[:6]}"
    yield add_node(name, Topology((Zone(4, 4 * GIB), Zone(4, 4 * GIB))), KubeletSettings(), devices=DEVICES)
    if any(n.name == name for n in list_nodes()):
        remove_node(name)
    assert leftovers(name) == []


@pytest.fixture(scope="module")
def exporter(node: RealNode) -> Iterator[NodeExporter]:
    with running_exporter(node, period=PERIOD) as running:
        yield running


@pytest.fixture(scope="module")
async def runtime_class(api: client.ApiClient) -> str:
    await prepare(api)
    return RUNTIME_CLASS


def _pod(
    name: str, node: RealNode, devices: dict[str, int], *, cpu: int | None = 1, runtime_class: str | None = None
) -> dict[str, Any]:
    body = workload_pod(name, node=node.name, cpu=cpu, memory="128Mi" if cpu else None, devices=devices)
    if runtime_class:
        body["spec"]["runtimeClassName"] = runtime_class
    return body


class Timings:
    """Seconds from the kubelet's decision to an NRT that agrees with it, per step."""

    def __init__(self, exporter: NodeExporter) -> None:
        self.exporter = exporter
        self.seconds: dict[str, float] = {}

    async def agree(self, step: str) -> None:
        try:
            self.seconds[step] = await asyncio.to_thread(wait_agreement, self.exporter, PERIOD)
        except RealNodeError as exc:
            raise AssertionError(f"after step {step!r}: {exc}") from None
        nrt = await asyncio.to_thread(published_nrt, self.exporter.node)
        assert nrt is not None
        for zone in nrt["zones"]:  # the kubelet's list holds healthy devices only: capacity == allocatable
            for r in zone["resources"]:
                assert r["name"] not in (GPU, NIC) or r["capacity"] == r["allocatable"], (step, zone["name"], r)

    def check(self) -> None:
        print(
            "seconds from the kubelet's decision to an agreeing NRT:", {k: round(v, 2) for k, v in self.seconds.items()}
        )
        assert max(self.seconds.values()) <= PERIOD


async def _admitted(api: client.ApiClient, node: RealNode, namespace: str, name: str) -> str:
    """The pod's UID once the kubelet's device checkpoint holds it (its devices are allocated)."""
    uid = (await client.CoreV1Api(api).read_namespaced_pod(name, namespace)).metadata.uid

    async def held() -> bool:
        entries = (await asyncio.to_thread(device_checkpoint, node)).get("PodDeviceEntries") or []
        return any(entry["PodUID"] == uid for entry in entries)

    await wait_for(held, within=60, what=f"pod {name}'s devices in the kubelet's checkpoint")
    return str(uid)


async def _delete(api: client.ApiClient, namespace: str, name: str) -> None:
    await client.CoreV1Api(api).delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    await wait_pod_gone(api, namespace, name)


async def _allocated(node: RealNode, uid: str | None = None) -> set[tuple[str, str]]:
    """Devices the kubelet holds allocated to live pods (to ``uid`` only, when given)."""
    active = await asyncio.to_thread(active_pod_uids, node)
    devices = await asyncio.to_thread(kubelet_devices, node, active if uid is None else {uid})
    return {device for device, (_, allocated) in devices.items() if allocated}


async def _listed(node: RealNode, namespace: str, name: str) -> int:
    """How many devices PodResources List shows the pod's containers holding."""
    resources = PodResourcesClient(node.pod_resources_socket, timeout=5)
    try:
        pods = await resources.list_pods()
    finally:
        await resources.close()
    pod = next(p for p in pods if (p.namespace, p.name) == (namespace, name))
    return len({(d.resource, i) for c in pod.containers for d in c.devices for i in d.ids})


async def test_nrt_follows_the_kubelet_through_device_admissions_and_deletions(
    api: client.ApiClient, namespace: str, node: RealNode, exporter: NodeExporter, runtime_class: str
) -> None:
    core = client.CoreV1Api(api)
    timings = Timings(exporter)
    await timings.agree("start")

    # The init container gets two GPUs, the app container reuses one: the kubelet keeps both
    # allocated until the pod ends, while PodResources lists the app container's one only.
    init = _pod("init", node, {GPU: 1}, runtime_class=runtime_class)
    init["spec"]["initContainers"] = [{**_pod("x", node, {GPU: 2})["spec"]["containers"][0], "name": "setup"}]
    await core.create_namespaced_pod(namespace, init)
    uid = await _admitted(api, node, namespace, "init")
    await timings.agree("init container")
    assert len(await _allocated(node, uid)) == 2
    assert await _listed(node, namespace, "init") == 1

    # A running pod with CPUs, a GPU and a NIC; one asking devices only (BestEffort).
    await core.create_namespaced_pod(namespace, _pod("running", node, {GPU: 1, NIC: 1}))
    await wait_pod_phase(api, namespace, "running", {"Running"})
    await timings.agree("running with CPUs")
    await core.create_namespaced_pod(
        namespace, _pod("bare", node, {GPU: 1, NIC: 1}, cpu=None, runtime_class=runtime_class)
    )
    await _admitted(api, node, namespace, "bare")
    await timings.agree("devices only")

    # 5 GPUs: zone 0 has 4 attached (gpu-6 included), zone 1 too; single-numa-node refuses it.
    await core.create_namespaced_pod(namespace, _pod("five", node, {GPU: 5}, runtime_class=runtime_class))
    pod = await wait_pod_phase(api, namespace, "five", {"Failed"})
    assert pod.status.reason == "TopologyAffinityError", pod.status
    await timings.agree("rejected")
    assert len(await _allocated(node)) == 6  # 2 + 2 + 2, nothing for the rejected pod

    for name in ("init", "running", "bare"):
        await _delete(api, namespace, name)
        await timings.agree(f"deleted {name}")
    assert await _allocated(node) == set()
    timings.check()


async def test_unhealthy_devices_are_neither_allocatable_nor_available(
    api: client.ApiClient, namespace: str, node: RealNode, exporter: NodeExporter, runtime_class: str
) -> None:
    """One GPU a pod holds and one free turn unhealthy: both leave the zones' allocatable (and so
    available), and come back when healthy again."""
    timings = Timings(exporter)
    await client.CoreV1Api(api).create_namespaced_pod(
        namespace, _pod("holder", node, {GPU: 1}, runtime_class=runtime_class)
    )
    uid = await _admitted(api, node, namespace, "holder")
    await timings.agree("holder admitted")
    ((_, held),) = await _allocated(node, uid)
    free = next(d.id for d in DEVICES.resource(GPU).devices if d.healthy and d.id != held and len(d.numa) == 1)
    before = nrt_figures(await asyncio.to_thread(published_nrt, node) or {})

    plugin = node.device_plugin
    await asyncio.to_thread(plugin.update, DEVICES.with_health(GPU, held, False).with_health(GPU, free, False))
    await timings.agree("two GPUs unhealthy")
    after = nrt_figures(await asyncio.to_thread(published_nrt, node) or {})
    lost = sum(before[z][GPU][0] - after[z].get(GPU, (0, 0))[0] for z in before)
    attached = {d.id: len(d.numa) for d in DEVICES.resource(GPU).devices}
    assert lost == attached[held] + attached[free]  # a device counts in every zone it is attached to

    await asyncio.to_thread(plugin.update, DEVICES)
    await timings.agree("healthy again")
    assert nrt_figures(await asyncio.to_thread(published_nrt, node) or {}) == before
    timings.check()


async def test_a_stopped_plugins_devices_leave_the_nrt(
    api: client.ApiClient, namespace: str, node: RealNode, exporter: NodeExporter, runtime_class: str
) -> None:
    """A stopped plugin: the kubelet drops its devices from its healthy set at once (the Node's
    allocatable turns 0, PodResources lists none) but keeps their capacity for its 5-minute grace
    period, and writes no checkpoint then: the file still lists them as registered until its next
    write. The exporter follows the kubelet's lists: no device figure and no device group is left
    within the period, CPU and memory stay right; when the plugin is back, everything agrees again."""
    timings = Timings(exporter)
    await client.CoreV1Api(api).create_namespaced_pod(
        namespace, _pod("holder", node, {NIC: 1}, runtime_class=runtime_class)
    )
    await _admitted(api, node, namespace, "holder")
    await timings.agree("holder admitted")
    registered = {r: set(ids) for r, ids in device_checkpoint(node)["RegisteredDevices"].items()}

    plugin = node.device_plugin
    await asyncio.to_thread(plugin.stop)
    started = time.monotonic()

    async def without_devices() -> dict[str, Any] | None:
        nrt = await asyncio.to_thread(published_nrt, node)
        names = {r["name"] for zone in (nrt or {}).get("zones", []) for r in zone["resources"]}
        groups = [a for a in (nrt or {}).get("attributes", []) if a["name"] == NRT_ATTR_DEVICE_GROUPS]
        return nrt if nrt and not names & {GPU, NIC} and not groups else None

    nrt = await wait_for(without_devices, within=PERIOD + 5, what="an NRT without the stopped plugin's devices")
    seconds = time.monotonic() - started
    print(f"seconds from the plugin's stop to an NRT without its devices: {seconds:.2f}")
    assert seconds <= PERIOD

    async def node_shows_them_unhealthy() -> bool:  # its status is written every second
        status = (await client.CoreV1Api(api).read_node(node.name)).status
        shown = {r: (status.capacity.get(r), status.allocatable.get(r)) for r in (GPU, NIC)}
        return shown == {GPU: ("9", "0"), NIC: ("3", "0")}  # capacity kept for the grace period

    await wait_for(node_shows_them_unhealthy, within=10, what="the Node's allocatable devices to drop to 0")
    still = {r: set(ids) for r, ids in device_checkpoint(node)["RegisteredDevices"].items()}
    assert still == registered == {GPU: {f"gpu-{i}" for i in range(8)}, NIC: {"nic-0", "nic-1", "nic-2"}}
    active = await asyncio.to_thread(active_pod_uids, node)
    kubelet = await asyncio.to_thread(kubelet_figures, node, active)
    cpu_and_memory = {
        zone: {r: v for r, v in figures.items() if r not in (GPU, NIC)} for zone, figures in kubelet.items()
    }
    assert differences(cpu_and_memory, nrt_figures(nrt)) == []

    await asyncio.to_thread(plugin.start)  # returns once the kubelet has the lists again
    await timings.agree("plugin back")
    timings.check()


async def test_the_exporter_logged_no_traceback(exporter: NodeExporter) -> None:
    exporter.ensure_running()
    log = exporter.log.read_text(errors="replace")
    assert "Traceback" not in log, exporter.log_tail(60)
