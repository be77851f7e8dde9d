"""What pinning DRA claims gains, on kwok nodes with the real kube-scheduler allocating.

Nodes of 2 NUMA zones x 8 CPUs whose free CPUs are drawn per zone (seeded), each with 2 GPUs per
zone, those of NUMA 0 listed first: first fit gives a GPU of NUMA 0 while it has one, wherever the
CPUs go. A stream of Guaranteed pods of 4 CPUs and one GPU from a ResourceClaimTemplate, 2 per
node, through kube-scheduler + toposched (strict alignment), twice on the same node state: claims
as written, then pinned at creation by the claim webhook. Figures: pods placed and GPUs in use
(every placed pod's GPU lies on its predicted CPU zone: strict lets no other node pass).
"""

import asyncio
import json
import random
import uuid
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

from testkit.builders import (
    KWOK_TOLERATION,
    Figures,
    claim_body,
    deviceclass_body,
    gpu_slice_body,
    nrt_body,
    pod_body,
    with_claim,
)
from testkit.certs import extender_pki
from testkit.cluster import ensure_kwok_node, free_port, wait_default_service_account
from testkit.extender import claim_webhook_body
from testkit.schedstack import bin_dir, scheduler_stack

DRIVER = "gpu.pin.bench.example"
RESOURCE = ("resource.k8s.io", "v1")
NRTS = ("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies")
PODS_PER_NODE = 2
SETTLE_SECONDS = 20.0
"""A run ends once no pod has been placed for this long (or all are)."""
# Optimum: every zone takes min(free CPUs // 4, its 2 GPUs) pods, each GPU beside its CPUs.


def free_cpus(nodes: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.randint(1, 8), rng.randint(1, 8)) for _ in range(nodes)]


async def _nodes(api: client.ApiClient, tag: str, state: list[tuple[int, int]]) -> list[str]:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    names = []
    for i, free in enumerate(state):
        name = f"pin-{tag}-{i}"
        await ensure_kwok_node(api, name, {"toposched-pin": tag})
        uid = (await core.read_node(name)).metadata.uid
        zones: list[dict[str, Figures]] = [{"cpu": (8, 8, cpu), "memory": ("32Gi", "30Gi", "30Gi")} for cpu in free]
        await custom.create_cluster_custom_object(*NRTS, nrt_body(name, zones, owner_uid=uid))
        gpus = [("gpu-0", 0), ("gpu-1", 0), ("gpu-2", 1), ("gpu-3", 1)]
        await custom.create_cluster_custom_object(
            *RESOURCE, "resourceslices", gpu_slice_body(f"{name}-gpus", name, DRIVER, gpus)
        )
        names.append(name)
    return names


async def _run_once(
    api: client.ApiClient, kubeconfig: Path, work: Path, state: list[tuple[int, int]], pin: bool
) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    namespace = f"pin-{tag}"
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    port = free_port()
    pki = extender_pki(work / "pki")
    args = ["--dra-allocator", str(bin_dir() / "toposched-dra-allocate"), "--webhook-port", str(port)]
    args += ["--tls-cert", str(pki.serving.cert), "--tls-key", str(pki.serving.key), "--reservation-timeout", "600"]
    with scheduler_stack(kubeconfig, work, args) as stack:
        assert stack.pki is not None
        await core.create_namespace({"metadata": {"name": namespace}})
        await wait_default_service_account(api, namespace)
        admission = client.AdmissionregistrationV1Api(api)
        await admission.create_mutating_webhook_configuration(
            claim_webhook_body(namespace, port, stack.pki.ca.read_bytes(), namespace)
        )
        await asyncio.sleep(1)
        nodes = await _nodes(api, tag, state)
        template = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu"},
            "spec": {"spec": claim_body("x", DRIVER)["spec"]},
        }
        await custom.create_namespaced_custom_object(*RESOURCE, namespace, "resourceclaimtemplates", template)
        count = PODS_PER_NODE * len(nodes)
        for i in range(count):
            annotations = {"toposched.io/dra-pin-numa": "true" if pin else "false"}
            body = pod_body(
                f"p{i}",
                cpu=4,
                memory="1Gi",
                scheduler="toposched",
                tolerations=[KWOK_TOLERATION],
                node_selector={"toposched-pin": tag},
                image="example.invalid/train:1",
                annotations=annotations,
            )
            await core.create_namespaced_pod(namespace, with_claim(body, template="gpu"))
        placed = await _settle(core, namespace, count)
        misaligned = await _misaligned(core, custom, namespace)
        await admission.delete_mutating_webhook_configuration(namespace)
        await core.delete_namespace(namespace)
        for name in nodes:
            await core.delete_node(name)
            await custom.delete_cluster_custom_object(*RESOURCE, "resourceslices", f"{name}-gpus")
    return {"pods": count, "placed": placed, "gpus": 4 * len(nodes), "gpus_in_use": placed, "misaligned": misaligned}


async def _misaligned(core: client.CoreV1Api, custom: client.CustomObjectsApi, namespace: str) -> int:
    """Placed pods whose GPU is not on the NUMA zone predicted for their CPUs (gpu-0, gpu-1 are on 0)."""
    count = 0
    for pod in (await core.list_namespaced_pod(namespace)).items:
        if not pod.spec.node_name or not pod.status.resource_claim_statuses:
            continue
        name = pod.status.resource_claim_statuses[0].resource_claim_name
        claim = await custom.get_namespaced_custom_object(*RESOURCE, namespace, "resourceclaims", name)
        results = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results") or []
        zones = json.loads((pod.metadata.annotations or {}).get("toposched.io/numa-zones", "[]"))
        gpu_zone = f"node-{0 if results and results[0]['device'] in ('gpu-0', 'gpu-1') else 1}"
        count += gpu_zone not in zones
    return count


async def _settle(core: client.CoreV1Api, namespace: str, count: int) -> int:
    loop = asyncio.get_running_loop()
    placed, since = 0, loop.time()
    while loop.time() - since < SETTLE_SECONDS:
        await asyncio.sleep(1)
        pods = await core.list_namespaced_pod(namespace)
        now = sum(1 for p in pods.items if p.spec.node_name)
        if now != placed:
            placed, since = now, loop.time()
        if placed == count:
            break
    return placed


def run(kubeconfig: Path, work: Path, nodes: int = 12, seed: int = 3, runs: int = 3) -> dict[str, Any]:
    state = free_cpus(nodes, seed)

    async def both() -> dict[str, Any]:
        configuration = client.Configuration()
        await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        async with client.ApiClient(configuration) as api:
            custom = client.CustomObjectsApi(api)
            try:
                await custom.create_cluster_custom_object(*RESOURCE, "deviceclasses", deviceclass_body(DRIVER))
            except client.exceptions.ApiException as exc:
                if exc.status != 409:
                    raise
            found: dict[str, list[dict[str, Any]]] = {"as_written": [], "pinned": []}
            for i in range(runs):  # alternating, so that a slower moment of the machine hits both
                for mode in found:
                    found[mode].append(await _run_once(api, kubeconfig, work / f"{mode}-{i}", state, mode == "pinned"))
        optimum = sum(min(free // 4, 2) for node in state for free in node)
        return {"nodes": nodes, "seed": seed, "free_cpus": state, "optimum": optimum, **found}

    return asyncio.run(both())


if __name__ == "__main__":
    import sys
    import tempfile

    from testkit.paths import REPO

    found = run(
        REPO / ".cluster" / "kubeconfig",
        Path(tempfile.mkdtemp(prefix="toposched-pin-")),
        *(int(a) for a in sys.argv[1:3]),
    )
    print(json.dumps(found, indent=2))
