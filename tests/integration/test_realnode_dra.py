"""DRA devices judged by a real kubelet and the real kube-scheduler: a real node whose DRA driver
(testkit.dra) publishes GPUs in two slices of one pool and NICs in two pools, their NUMA nodes in
every form drivers use. The kubelet registers the driver and wipes the node's slices when it
starts, the driver publishes them again; the scheduler's DynamicResources plugin allocates claims
from the slices; the kubelet has the driver prepare them, reports them through PodResources, and
has them unprepared when the pod goes.

One node serves the whole module. Pods run under the oracle's RuntimeClass, whose handler no
runtime has: the kubelet prepares a pod's claims just before it asks for the sandbox.
Needs root and the node tools (``make test-tools``): skips without them, fails under CI.
"""

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from testkit.cluster import wait_for
from testkit.oracle.observe import RUNTIME_CLASS, prepare
from testkit.podresources import listed_pod
from testkit.realnode import (
    NodeDRA,
    RealNode,
    add_node,
    ensure_device_class,
    leftovers,
    list_nodes,
    remove_node,
    reset_node,
    resource_claim_template,
    workload_pod,
)
from testkit.realnode.dra import PCIE_ROOT, STANDARD_NUMA
from testkit.realnode.dra_driver import NOTIFY, PREPARE, UNPREPARE
from testkit.realnode.layout import dra_plugin_socket, dra_registration_socket
from toposched.exporter.topology import ClaimDevice

pytestmark = pytest.mark.cluster

GPU, NIC = "gpu.example.com", "nic.example.com"
RESOURCE = "resource.k8s.io"


def node_dra(name: str) -> NodeDRA:
    """GPUs in the node's pool, two slices (s0: zone 0, s1: zone 1); NICs in two pools of their own
    (a: the vendor attribute, one without NUMA as -1; b: the standard one as -1, one with none)."""
    return NodeDRA.parse(
        [
            f"{GPU}=0#pci0000:00,0#pci0000:00",
            f"{GPU}=1#pci0000:80,1&gpu.nvidia.com/numa=1#pci0000:80",
            f"{NIC}:{name}-a=dra.net/numaNode=0#pci0000:00,dra.net/numaNode=-1",
            f"{NIC}:{name}-b/z=-1,-",
        ]
    )


@pytest.fixture(scope="module")
def node(kubeconfig: Path, real_nodes: None) -> Iterator[RealNode]:
    name = f"rdra-{uuid.uuid4().hex[:6]}"
    added = add_node(name, dra=node_dra(name))
    yield added
    if any(n.name == name for n in list_nodes()):
        remove_node(name)
    assert leftovers(name) == []
    assert added.dra_driver.slices() == []  # deleted with the node


@pytest.fixture(scope="module")
async def runtime_class(api: client.ApiClient) -> str:
    await prepare(api)
    return RUNTIME_CLASS


@pytest.fixture
async def templates(api: client.ApiClient, namespace: str, node: RealNode) -> dict[str, str]:
    """ResourceClaimTemplates of the namespace: one GPU, two GPUs, one NIC."""
    gpus, nics = ensure_device_class(GPU), ensure_device_class(NIC)
    resources = client.ResourceV1Api(api)
    made = {"one-gpu": (gpus, 1), "two-gpus": (gpus, 2), "one-nic": (nics, 1)}
    for name, (device_class, count) in made.items():
        await resources.create_namespaced_resource_claim_template(
            namespace, resource_claim_template(name, device_class, count)
        )
    return {name: name for name in made}


def _pod(name: str, node: RealNode, claims: dict[str, str]) -> dict[str, Any]:
    """A Guaranteed pod for the default scheduler, led to ``node`` (and tolerating its taint)."""
    body = workload_pod(name, cpu=1, memory="128Mi", claims=claims)
    body["spec"].update(nodeSelector={"kubernetes.io/hostname": node.name}, runtimeClassName=RUNTIME_CLASS)
    return body


async def _claims_of(api: client.ApiClient, namespace: str, pod: str) -> dict[str, dict[str, Any]]:
    """The pod's claim name -> its ResourceClaim, once every one is allocated."""

    async def allocated() -> dict[str, dict[str, Any]] | None:
        found = await client.CustomObjectsApi(api).list_namespaced_custom_object(
            RESOURCE, "v1", namespace, "resourceclaims"
        )
        mine = {
            c["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"]: c
            for c in found["items"]
            if any(o["name"] == pod for o in c["metadata"].get("ownerReferences") or [])
        }
        return mine if mine and all((c.get("status") or {}).get("allocation") for c in mine.values()) else None

    return await wait_for(allocated, within=60, what=f"the claims of {pod} to be allocated")


def _results(claim: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(r["driver"], r["pool"], r["device"]) for r in claim["status"]["allocation"]["devices"]["results"]]


async def _pod_claims(node: RealNode, namespace: str, pod: str) -> set[ClaimDevice] | None:
    """The containers' claimed devices as PodResources List says (None: not listed yet)."""
    found = await listed_pod(node.pod_resources_socket, namespace, pod)
    return None if found is None else {d for c in found.containers for d in c.claims}


async def _run_and_delete(
    api: client.ApiClient, namespace: str, node: RealNode, name: str, claims: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """Create the pod, check its allocation, Prepare, PodResources, then delete it and check the
    Unprepare and the claims' deallocation; returns its claims as allocated."""
    driver = node.dra_driver
    since = driver.log_size()
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod(namespace, _pod(name, node, claims))
    allocated = await _claims_of(api, namespace, name)
    for claim in allocated.values():
        terms = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
        assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node.name]}]}]
        for driver_name, pool, device in _results(claim):
            node.dra.device(driver_name, pool, device, node=node.name)  # one the node's driver publishes
    bound = await core.read_namespaced_pod(name, namespace)
    assert bound.spec.node_name == node.name  # bound by the real scheduler

    expected = {
        ClaimDevice(namespace, c["metadata"]["name"], d, pool, device)
        for c in allocated.values()
        for d, pool, device in _results(c)
    }

    async def listed() -> set[ClaimDevice] | None:
        devices = await _pod_claims(node, namespace, name)
        return devices if devices == expected else None

    await wait_for(listed, within=30, what=f"PodResources to list {name}'s claimed devices")
    prepared = driver.calls(PREPARE, since=since)
    by_uid = {c.detail["uid"]: c for c in prepared}
    for claim in allocated.values():
        call = by_uid[claim["metadata"]["uid"]]
        assert sorted(call.ids) == sorted(f"{p}/{d}" for _, p, d in _results(claim))
        assert call.detail["unknown"] == "-"
        assert "message" not in call.detail

    await core.delete_namespaced_pod(name, namespace)

    async def released() -> bool:
        unprepared = {c.detail["uid"] for c in driver.calls(UNPREPARE, since=since)}
        remaining = await _claims_left(api, namespace, name)
        return unprepared >= set(by_uid) and not remaining

    await wait_for(released, within=60, what=f"{name}'s claims to be unprepared and deallocated")
    return allocated


async def _claims_left(api: client.ApiClient, namespace: str, pod: str) -> list[str]:
    """The pod's claims still allocated (a claim made from a template goes with its pod)."""
    found = await client.CustomObjectsApi(api).list_namespaced_custom_object(
        RESOURCE, "v1", namespace, "resourceclaims"
    )
    return [
        c["metadata"]["name"]
        for c in found["items"]
        if any(o["name"] == pod for o in c["metadata"].get("ownerReferences") or [])
        and (c.get("status") or {}).get("allocation")
    ]


def _attributes(node: RealNode) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(slice name, pool, device) -> its attributes, as the API holds them."""
    return {
        (s["metadata"]["name"], s["spec"]["pool"]["name"], d["name"]): d.get("attributes") or {}
        for s in node.dra_driver.slices()
        for d in s["spec"]["devices"]
    }


def test_the_kubelet_registers_the_driver_and_its_slices_are_published(node: RealNode) -> None:
    driver = node.dra_driver
    notified = {c.resource: c.detail for c in driver.calls(NOTIFY)}
    assert notified == {GPU: {"registered": "True"}, NIC: {"registered": "True"}}
    kubelet_log = (node.layout.logs / "kubelet.log").read_text()
    for name in (GPU, NIC):
        assert f'"Registered DRA plugin" logger="DRA registration handler" driverName="{name}"' in kubelet_log

    n = node.name
    zone = {"int": 0}
    assert _attributes(node) == {
        (f"{n}.{GPU}.{n}.s0", n, "gpu-0"): {STANDARD_NUMA: zone, PCIE_ROOT: {"string": "pci0000:00"}},
        (f"{n}.{GPU}.{n}.s0", n, "gpu-1"): {STANDARD_NUMA: zone, PCIE_ROOT: {"string": "pci0000:00"}},
        (f"{n}.{GPU}.{n}.s1", n, "gpu-2"): {STANDARD_NUMA: {"int": 1}, PCIE_ROOT: {"string": "pci0000:80"}},
        (f"{n}.{GPU}.{n}.s1", n, "gpu-3"): {
            STANDARD_NUMA: {"int": 1},
            "gpu.nvidia.com/numa": {"int": 1},
            PCIE_ROOT: {"string": "pci0000:80"},
        },
        (f"{n}.{NIC}.{n}-a.s0", f"{n}-a", "nic-0"): {"dra.net/numaNode": zone, PCIE_ROOT: {"string": "pci0000:00"}},
        (f"{n}.{NIC}.{n}-a.s0", f"{n}-a", "nic-1"): {"dra.net/numaNode": {"int": -1}},
        (f"{n}.{NIC}.{n}-b.z", f"{n}-b", "nic-0"): {STANDARD_NUMA: {"int": -1}},
        (f"{n}.{NIC}.{n}-b.z", f"{n}-b", "nic-1"): {},
    }
    pools = {(s["metadata"]["name"], tuple(sorted(s["spec"]["pool"].items()))) for s in driver.slices()}
    assert pools == {
        (f"{n}.{GPU}.{n}.s0", (("generation", 1), ("name", n), ("resourceSliceCount", 2))),
        (f"{n}.{GPU}.{n}.s1", (("generation", 1), ("name", n), ("resourceSliceCount", 2))),
        (f"{n}.{NIC}.{n}-a.s0", (("generation", 1), ("name", f"{n}-a"), ("resourceSliceCount", 1))),
        (f"{n}.{NIC}.{n}-b.z", (("generation", 1), ("name", f"{n}-b"), ("resourceSliceCount", 1))),
    }


def test_a_kubelet_restart_wipes_the_slices_and_the_driver_publishes_them_again(node: RealNode) -> None:
    driver = node.dra_driver
    before = _attributes(node)
    since = driver.log_size()
    wipes = (node.layout.logs / "kubelet.log").read_text().count('"Deleted ResourceSlices"')
    node.restart_kubelet()  # returns once the new kubelet registered the driver and the slices are back
    assert (node.layout.logs / "kubelet.log").read_text().count('"Deleted ResourceSlices"') == wipes + 1
    assert sorted(c.resource for c in driver.calls(NOTIFY, since=since)) == [GPU, NIC]
    assert _attributes(node) == before


async def test_a_claim_for_one_gpu_is_allocated_prepared_reported_and_released(
    api: client.ApiClient, namespace: str, node: RealNode, runtime_class: str, templates: dict[str, str]
) -> None:
    allocated = await _run_and_delete(api, namespace, node, "one", {"gpu": templates["one-gpu"]})
    (claim,) = allocated.values()
    # First fit: the pool's first slice by name, its first device.
    assert _results(claim) == [(GPU, node.name, "gpu-0")]


async def test_a_claim_for_two_gpus(
    api: client.ApiClient, namespace: str, node: RealNode, runtime_class: str, templates: dict[str, str]
) -> None:
    allocated = await _run_and_delete(api, namespace, node, "two", {"gpus": templates["two-gpus"]})
    (claim,) = allocated.values()
    assert sorted(_results(claim)) == [(GPU, node.name, "gpu-0"), (GPU, node.name, "gpu-1")]


async def test_two_claims_of_two_drivers(
    api: client.ApiClient, namespace: str, node: RealNode, runtime_class: str, templates: dict[str, str]
) -> None:
    claims = {"gpu": templates["one-gpu"], "nic": templates["one-nic"]}
    allocated = await _run_and_delete(api, namespace, node, "both", claims)
    assert _results(allocated["gpu"]) == [(GPU, node.name, "gpu-0")]
    # Pools in name order: <node>-a before <node>-b.
    assert _results(allocated["nic"]) == [(NIC, f"{node.name}-a", "nic-0")]


async def test_changed_devices_are_published_at_a_new_generation(node: RealNode) -> None:
    driver = node.dra_driver
    smaller = NodeDRA.parse([f"{GPU}=1,-"])  # the NICs' driver goes
    await asyncio.to_thread(driver.set_devices, smaller)  # returns once the API holds exactly these
    (only,) = driver.slices()
    assert only["metadata"]["name"] == f"{node.name}.{GPU}.{node.name}.s0"
    assert only["spec"]["pool"] == {"name": node.name, "generation": 2, "resourceSliceCount": 1}
    assert [d.get("attributes") for d in only["spec"]["devices"]] == [{STANDARD_NUMA: {"int": 1}}, None]
    root = node.layout.kubelet_root
    assert not dra_registration_socket(root, NIC).exists()  # the kubelet's plugin watcher lets it go
    assert not dra_plugin_socket(root, NIC).exists()
    since = driver.log_size()
    await asyncio.to_thread(driver.set_devices, node_dra(node.name))  # and comes back: registered anew
    assert [c.resource for c in driver.calls(NOTIFY, since=since)] == [NIC]
    assert len(driver.slices()) == 4


async def test_a_stopped_driver_loses_its_slices_and_a_started_one_publishes_them(node: RealNode) -> None:
    driver = node.dra_driver
    await asyncio.to_thread(driver.stop)
    assert not driver.running()
    assert not any(p.exists() for p in driver.sockets())
    stopped = time.monotonic()

    while driver.slices():  # the kubelet's grace for an unusable driver is 30 s
        assert time.monotonic() - stopped < 60, "the kubelet did not delete the stopped driver's slices"
        await asyncio.sleep(1)
    assert time.monotonic() - stopped > 20
    since = driver.log_size()
    await asyncio.to_thread(driver.start)
    assert sorted(c.resource for c in driver.calls(NOTIFY, since=since)) == [GPU, NIC]
    assert len(driver.slices()) == 4


async def test_a_reset_publishes_new_devices(node: RealNode) -> None:
    dra = NodeDRA.parse([f"{GPU}:{node.name}-new=0,1"])
    reset = await asyncio.to_thread(reset_node, node.name, dra=dra)  # returns once published
    assert reset.dra_driver.devices() == dra
    (only,) = reset.dra_driver.slices()  # the old pools went with the old kubelet's state
    assert only["metadata"]["name"] == f"{node.name}.{GPU}.{node.name}-new.s0"
    assert [c.resource for c in reset.dra_driver.calls(NOTIFY)] == [GPU]  # a new log
