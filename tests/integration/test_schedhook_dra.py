"""DRA devices beside pinned CPUs, end to end on kwok nodes: the real kube-scheduler allocates the
claims, toposched's extender predicts its pick, passes only nodes where the GPU lies on the NUMA
zone the kubelet will pin the CPUs on, and refuses a bind whose written allocation does not."""

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from testkit.builders import (
    KWOK_TOLERATION,
    claim_body,
    deviceclass_body,
    gpu_slice_body,
    nrt_body,
    pod_body,
    with_claim,
)
from testkit.certs import extender_pki
from testkit.cluster import ensure_kwok_node, free_port, wait_default_service_account, wait_for
from testkit.extender import claim_webhook_body
from testkit.schedstack import SchedulerStack, bin_dir, scheduler_stack
from toposched.apis.noderesourcetopology import NodeResourceTopology

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds")]

NRTS = (NodeResourceTopology.GROUP, NodeResourceTopology.VERSION, NodeResourceTopology.PLURAL)
RESOURCE = ("resource.k8s.io", "v1")
DRIVER = "gpu.toposched.example"


def helper() -> str:
    return str(bin_dir() / "toposched-dra-allocate")


@pytest.fixture(scope="module")
def stack(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchedulerStack]:
    with scheduler_stack(kubeconfig, tmp_path_factory.mktemp("dra"), ["--dra-allocator", helper()]) as found:
        yield found


@pytest.fixture
def lying_stack(kubeconfig: Path, tmp_path: Path) -> Iterator[SchedulerStack]:
    """An extender whose allocator names gpu-1 where the scheduler picks gpu-0 (and back): its
    prediction is wrong, as after a race, and only the bind's check stands between."""
    liar = tmp_path / "liar.sh"
    liar.write_text(f"#!/bin/sh\nexec {sys.executable} -m testkit.dra_liar --helper {helper()} --swap gpu-0=gpu-1\n")
    liar.chmod(0o755)
    with scheduler_stack(kubeconfig, tmp_path, ["--dra-allocator", str(liar)]) as found:
        yield found


@pytest.fixture
async def gpu_nodes(api: client.ApiClient) -> AsyncIterator[tuple[str, dict[str, str]]]:
    """Two kwok nodes of two zones, 8 CPUs each, a GPU per zone (gpu-0 on NUMA 0, gpu-1 on NUMA 1):
    'busy' has 1 CPU free on zone 0, so a 4-CPU pod's CPUs go to zone 1 while first fit gives it
    gpu-0; 'free' has every CPU free."""
    tag = uuid.uuid4().hex[:6]
    names = {"busy": f"busy-{tag}", "free": f"free-{tag}"}
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    await ensure_class(custom)
    for short, name in names.items():
        await ensure_kwok_node(api, name, {"toposched-dra": tag})
        uid = (await core.read_node(name)).metadata.uid
        free = (1, 8) if short == "busy" else (8, 8)
        zones = [{"cpu": (8, 8, cpu), "memory": ("32Gi", "30Gi", "30Gi")} for cpu in free]
        await custom.create_cluster_custom_object(*NRTS, nrt_body(name, zones, owner_uid=uid))
        await custom.create_cluster_custom_object(*RESOURCE, "resourceslices", gpu_slice(name))
    yield tag, names
    for name in names.values():
        await core.delete_node(name)
        await custom.delete_cluster_custom_object(*RESOURCE, "resourceslices", f"{name}-gpus")


async def ensure_class(custom: client.CustomObjectsApi) -> None:
    try:
        await custom.create_cluster_custom_object(*RESOURCE, "deviceclasses", deviceclass_body(DRIVER))
    except ApiException as exc:
        if exc.status != 409:
            raise


def gpu_slice(node: str) -> dict[str, Any]:
    return gpu_slice_body(f"{node}-gpus", node, DRIVER, [("gpu-0", 0), ("gpu-1", 1)])


def claim(name: str) -> dict[str, Any]:
    return claim_body(name, DRIVER)


def gpu_pod(name: str, claim_name: str, selector: dict[str, str], annotations: dict[str, str] | None = None) -> Any:
    body = pod_body(
        name,
        cpu=4,
        memory="1Gi",
        scheduler="toposched",
        tolerations=[KWOK_TOLERATION],
        node_selector=selector,
        image="example.invalid/train:1",
        annotations=annotations,
    )
    return with_claim(body, claim=claim_name)


async def start_pod(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> None:
    custom = client.CustomObjectsApi(api)
    await custom.create_namespaced_custom_object(
        *RESOURCE, namespace, "resourceclaims", claim(body["metadata"]["name"])
    )
    await client.CoreV1Api(api).create_namespaced_pod(namespace, body)


async def allocated(api: client.ApiClient, namespace: str, name: str) -> list[str]:
    found = await client.CustomObjectsApi(api).get_namespaced_custom_object(
        *RESOURCE, namespace, "resourceclaims", name
    )
    results = ((found.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return [f"{r['pool']}/{r['device']}" for r in results]


async def events_of(api: client.ApiClient, namespace: str, name: str, reason: str) -> list[str]:
    found = await client.CoreV1Api(api).list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
    return [e.message for e in found.items if e.reason == reason]


async def bound_to(api: client.ApiClient, namespace: str, name: str) -> str | None:
    return (await client.CoreV1Api(api).read_namespaced_pod(name, namespace)).spec.node_name  # type: ignore[no-any-return]


@pytest.mark.usefixtures("stack")
async def test_the_gpu_lands_beside_the_pinned_cpus(
    api: client.ApiClient, namespace: str, gpu_nodes: tuple[str, dict[str, str]]
) -> None:
    tag, nodes = gpu_nodes
    await wait_default_service_account(api, namespace)
    # On 'busy' first fit gives gpu-0 (NUMA 0) while the 4 CPUs can only be pinned on NUMA 1.
    await start_pod(api, namespace, gpu_pod("train", "train", {"toposched-dra": tag}))
    node = await wait_for(lambda: bound_to(api, namespace, "train"), within=60, what="train bound")
    assert node == nodes["free"]
    assert await allocated(api, namespace, "train") == [f"{nodes['free']}/gpu-0"]

    # Held to 'busy' alone it stays Pending, and says which device lies where.
    await start_pod(api, namespace, gpu_pod("held", "held", {"kubernetes.io/hostname": nodes["busy"]}))
    messages = await wait_for(
        lambda: events_of(api, namespace, "held", "FailedScheduling"), within=60, what="FailedScheduling for held"
    )
    want = f"gpu-0 of claim {namespace}/held on NUMA 0, CPUs would be on NUMA 1"
    assert any(want in m for m in messages), messages

    # The pod that asks for no alignment is placed there anyway, misaligned as it asked.
    off = gpu_pod("loose", "loose", {"kubernetes.io/hostname": nodes["busy"]}, {"toposched.io/dra-alignment": "off"})
    await start_pod(api, namespace, off)
    assert await wait_for(lambda: bound_to(api, namespace, "loose"), within=60, what="loose bound") == nodes["busy"]


@pytest.mark.usefixtures("lying_stack")
async def test_a_misaligned_allocation_is_refused_at_bind_and_the_claim_freed(
    api: client.ApiClient, namespace: str, gpu_nodes: tuple[str, dict[str, str]]
) -> None:
    _, nodes = gpu_nodes
    await wait_default_service_account(api, namespace)
    # The extender believes gpu-1 (NUMA 1, beside the CPUs); the scheduler writes gpu-0.
    await start_pod(api, namespace, gpu_pod("raced", "raced", {"kubernetes.io/hostname": nodes["busy"]}))
    messages = await wait_for(
        lambda: events_of(api, namespace, "raced", "DRADevicesMisaligned"), within=60, what="the refused bind's Event"
    )
    assert f"gpu-0 of claim {namespace}/raced on NUMA 0, CPUs would be on NUMA 1" in messages[0], messages
    assert await bound_to(api, namespace, "raced") is None

    async def freed() -> bool:  # on one candidate node kube-scheduler itself would leave it allocated
        return not await allocated(api, namespace, "raced")

    await wait_for(freed, within=60, what="the refused claim deallocated")
    assert await bound_to(api, namespace, "raced") is None


def test_explain_names_the_device_its_claim_and_both_zones(tmp_path: Path) -> None:
    """Offline, from files: the same verdicts and words as the extender's filter."""
    nrts = [
        nrt_body(name, [{"cpu": (8, 8, cpu), "memory": ("32Gi", "30Gi", "30Gi")} for cpu in free])
        for name, free in (("busy", (1, 8)), ("free", (8, 8)))
    ]
    gpu_class = deviceclass_body(DRIVER)
    train = claim("train") | {"metadata": {"name": "train", "namespace": "ml"}}
    pod = gpu_pod("train", "train", {})
    pod["metadata"]["namespace"] = "ml"
    files = {"nrt": nrts, "dra": [gpu_class, gpu_slice("busy"), gpu_slice("free"), train], "pod": [pod]}
    for name, docs in files.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump_all(docs))
    args = [sys.executable, "-m", "toposched", "explain", "--dra-allocator", helper()]
    args += [f"--{name}={tmp_path / name}.yaml" for name in files]
    table = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    assert "gpu-0 of claim ml/train on NUMA 0, CPUs would be on NUMA 1" in table.splitlines()[2], table
    assert "DRA devices beside the CPUs" in table.splitlines()[1], table
    found = json.loads(subprocess.run([*args, "-o", "json"], capture_output=True, text=True, check=True).stdout)
    by_node = {r["node"]: r for r in found}
    assert by_node["free"]["fit"]
    assert by_node["free"]["devices"] == {"verdict": "aligned", "reason": ""}
    assert by_node["busy"]["devices"]["verdict"] == "misaligned"


@pytest.fixture
def pin_stack(kubeconfig: Path, tmp_path: Path) -> Iterator[tuple[SchedulerStack, int]]:
    """The extender with its webhooks on, the claim webhook pinning annotated pods' claims."""
    port = free_port()
    pki = extender_pki(tmp_path / "pki")  # the stack makes it again, at the same paths, before it starts
    args = ["--dra-allocator", helper(), "--dra-pin", "annotated", "--webhook-port", str(port)]
    args += ["--tls-cert", str(pki.serving.cert), "--tls-key", str(pki.serving.key)]
    with scheduler_stack(kubeconfig, tmp_path, args) as found:
        yield found, port


@pytest.fixture
async def claim_webhook(
    api: client.ApiClient, namespace: str, pin_stack: tuple[SchedulerStack, int]
) -> AsyncIterator[None]:
    stack, port = pin_stack
    assert stack.pki is not None
    admission = client.AdmissionregistrationV1Api(api)
    name = f"toposched-claims-{namespace}"
    await admission.create_mutating_webhook_configuration(
        claim_webhook_body(name, port, stack.pki.ca.read_bytes(), namespace)
    )
    await asyncio.sleep(1)  # the apiserver picks up new configurations asynchronously
    yield
    await admission.delete_mutating_webhook_configuration(name)


def templated_pod(name: str, selector: dict[str, str], pin: bool) -> dict[str, Any]:
    body = gpu_pod(name, "unused", selector, {"toposched.io/dra-pin-numa": "true"} if pin else None)
    return with_claim(body, template="one-gpu")


async def placed_or_pending(api: client.ApiClient, namespace: str, names: list[str], within: float) -> dict[str, str]:
    """Where each pod is bound after ``within`` seconds ("" for those still pending)."""
    core = client.CoreV1Api(api)
    deadline = asyncio.get_running_loop().time() + within
    while True:
        found = {n: (await core.read_namespaced_pod(n, namespace)).spec.node_name or "" for n in names}
        if all(found.values()) or asyncio.get_running_loop().time() > deadline:
            return found
        await asyncio.sleep(1)


@pytest.mark.usefixtures("claim_webhook")
async def test_pinned_claims_get_the_gpu_first_fit_would_miss(
    api: client.ApiClient, namespace: str, gpu_nodes: tuple[str, dict[str, str]]
) -> None:
    """On 'busy' first fit gives gpu-0 (NUMA 0) while the CPUs can only go to NUMA 1: unpinned, the
    pod fits nowhere there; pinned, its claim is kept on NUMA 1 and it gets gpu-1 beside its CPUs."""
    _, nodes = gpu_nodes
    await wait_default_service_account(api, namespace)
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu"},
        "spec": {"spec": claim("x")["spec"]},
    }
    custom = client.CustomObjectsApi(api)
    await custom.create_namespaced_custom_object(*RESOURCE, namespace, "resourceclaimtemplates", template)
    busy = {"kubernetes.io/hostname": nodes["busy"]}
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod(namespace, templated_pod("plain", busy, pin=False))
    await core.create_namespaced_pod(namespace, templated_pod("pinned", busy, pin=True))
    found = await placed_or_pending(api, namespace, ["plain", "pinned"], within=45)
    assert found == {"plain": "", "pinned": nodes["busy"]}, found
    pod = await core.read_namespaced_pod("pinned", namespace)
    claim_name = pod.status.resource_claim_statuses[0].resource_claim_name
    pinned = await custom.get_namespaced_custom_object(*RESOURCE, namespace, "resourceclaims", claim_name)
    assert pinned["metadata"]["annotations"]["toposched.io/dra-pin-numa"] == "1"
    assert await allocated(api, namespace, claim_name) == [f"{nodes['busy']}/gpu-1"]
