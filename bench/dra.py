"""DRA GPUs beside pinned CPUs, judged by real kubelets and the real kube-scheduler's allocator.

Real nodes of 2 NUMA zones x 8 CPUs (32 GiB per zone, static CPU Manager, ``single-numa-node``),
each with four GPUs published by a real DRA driver (``testkit.dra``) as ResourceSlice devices
whose ``resource.kubernetes.io/numaNode`` is 0, 0, 1, 1: the allocator's first fit takes gpu-0
(NUMA 0) first. On every other node system daemons keep CPUs 0-4 (``reservedSystemCPUs``), so
zone 0 has 3 CPUs for pods: there a pod of 4 or more CPUs gets gpu-0 from the allocator and its
CPUs on NUMA 1 from the kubelet, whose Topology Manager never sees DRA devices. Each pod is
Guaranteed, 2-6 integral CPUs (1 GiB each) and one GPU through a ResourceClaimTemplate.

Columns: kube-scheduler alone; toposched with each ``toposched.io/dra-alignment`` (strict, prefer,
off: one extender, the mode on each pod), and strict with the pods' claims pinned at creation by
the claim webhook (``toposched.io/dra-pin-numa``); scheduler-plugins' NodeResourceTopologyMatch, which
knows nothing of DRA. Per run, from the kubelets only: pods admitted; misaligned pods (a device
PodResources lists for the pod lies, by its slice's ``numaNode``, off every zone of the CPUs its
CPU Manager checkpoint gives the pod); GPUs in use (listed by PodResources for admitted pods);
stranded GPUs (free GPUs whose zone has fewer free CPUs than the smallest pod asks for).
"""

import asyncio
import contextlib
import dataclasses
import random
import subprocess
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from bench import harness, ownpool, scheduler_plugins
from bench.harness import BENCH_LABEL, Harness, SetupError
from bench.ownpool import OwnPool
from bench.realnodes import Pool, kubelet_zones
from testkit.cluster import free_port
from testkit.extender import claim_webhook_body
from testkit.podresources import listed_pod
from testkit.realnode import KubeletSettings, NodeDRA, RealNode, ensure_device_class, workload_pod
from testkit.realnode.accounting import kubelet_figures
from testkit.realnode.dra import STANDARD_NUMA, resource_claim_template
from toposched.apis.constants import DRA_ALIGNMENT_ANNOTATION
from toposched.schedhook.placement.drapin import PIN_ANNOTATION

GPU = "gpu.example.com"
TEMPLATE = "one-gpu"
RESOURCE = ("resource.k8s.io", "v1")
DRA = NodeDRA.parse([f"{GPU}=0,0,1,1"])
FREE = KubeletSettings()
BUSY = dataclasses.replace(FREE, reserved_system_cpus="0-4")
NODE_SHAPE = (
    "2 NUMA zones x 8 CPUs, 32 GiB per zone, 4 DRA GPUs (numaNode 0, 0, 1, 1); CPU 0 reserved, "
    "CPUs 0-4 on every other node (3 CPUs left on its zone 0)"
)
MODES = ("strict", "prefer", "off")
PINNED = "toposched-strict-pinned"
"""Strict, the pods' claims pinned at creation by the claim webhook (toposched.io/dra-pin-numa)."""
TOPOSCHED = {**{f"toposched-{mode}": mode for mode in MODES}, PINNED: "strict"}
"""Column -> the pods' toposched.io/dra-alignment (one extender, the shipped profile)."""
WEBHOOK = "toposched-bench-claims"
SCHEDULERS = ("plain", *TOPOSCHED, scheduler_plugins.NUMA)
PODS_PER_NODE = 3.0
CPU_CHOICES = (2, 3, 4, 5, 6)
SETTLE_SECONDS = 60


def dra_pods(count: int, column: str, tag: str, seed: int) -> list[dict[str, Any]]:
    """Guaranteed pods of 2-6 integral CPUs (1 GiB each) and one DRA GPU, for the pool's nodes;
    a toposched column's pods go to the toposched profile with the column's alignment."""
    rng = random.Random(seed)
    pods = []
    for i in range(count):
        cpu = rng.choice(CPU_CHOICES)
        body = workload_pod(f"d{i:04d}", cpu=cpu, memory=f"{cpu}Gi", claims={"gpu": TEMPLATE})
        body["spec"].update(schedulerName=column, nodeSelector={BENCH_LABEL: tag})
        if column in TOPOSCHED:
            body["spec"]["schedulerName"] = "toposched"
            body["metadata"]["annotations"] = {
                DRA_ALIGNMENT_ANNOTATION: TOPOSCHED[column],
                PIN_ANNOTATION: "true" if column == PINNED else "false",
            }
        pods.append(body)
    return pods


# what the kubelets say -----------------------------------------------------------------------


def slice_zones(node: RealNode) -> dict[tuple[str, str, str], tuple[int, ...]]:
    """(driver, pool, device) -> its NUMA node, as the node's ResourceSlices in the API say
    (``resource.kubernetes.io/numaNode``); () where it says none or -1."""
    out: dict[tuple[str, str, str], tuple[int, ...]] = {}
    for found in node.dra_driver.slices():
        spec = found["spec"]
        for device in spec.get("devices") or ():
            numa = ((device.get("attributes") or {}).get(STANDARD_NUMA) or {}).get("int")
            key = (spec["driver"], spec["pool"]["name"], device["name"])
            out[key] = (numa,) if isinstance(numa, int) and numa >= 0 else ()
    return out


async def claimed_devices(node: RealNode, namespace: str, pod: str) -> list[tuple[str, str, str]] | None:
    """(driver, pool, device) of every DRA device the kubelet's PodResources List gives the pod
    (None: the pod is not listed)."""
    found = await listed_pod(node.pod_resources_socket, namespace, pod)
    if found is None:
        return None
    return sorted({(d.driver, d.pool, d.device) for c in found.containers for d in c.claims})


@dataclasses.dataclass(frozen=True)
class GPUPlace:
    """A pod's DRA devices against its pinned CPUs, as the node's kubelet and slices say."""

    cpu_zones: tuple[int, ...]
    devices: tuple[tuple[str, tuple[int, ...]], ...]
    """(device name, its NUMA zones) of each device PodResources lists for the pod."""

    @property
    def misaligned(self) -> bool:
        """A device whose zone is known lies off every zone of the pod's CPUs."""
        return any(zones and not set(zones) & set(self.cpu_zones) for _, zones in self.devices)


async def gpu_place(
    node: RealNode, pod: dict[str, Any], zones: dict[tuple[str, str, str], tuple[int, ...]], within: float = 30
) -> GPUPlace:
    """The pod's CPU zones and DRA devices once PodResources lists a device for it (the kubelet
    prepares the claims while it starts the pod), or after ``within`` seconds."""
    meta = pod["metadata"]
    deadline = time.monotonic() + within
    while True:
        listed = await claimed_devices(node, meta["namespace"], meta["name"])
        if listed or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    cpus = tuple(int(z.removeprefix("node-")) for z in kubelet_zones(node, pod))
    return GPUPlace(cpus, tuple((device, zones.get((d, p, device), ())) for d, p, device in listed or ()))


class DRAJudge:
    """The scenario's figures (``realnodes.RunJudge``): the claim template in each run's namespace,
    and the DRA devices of the admitted pods against their pinned CPUs."""

    async def before(self, h: Harness, pool: Pool, namespace: str) -> None:
        await create_template(h, namespace)
        await wait_released(h, pool.nodes)

    async def figures(
        self, pool: Pool, admitted: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]]
    ) -> tuple[dict[str, int], list[dict[str, Any]]]:
        smallest = min(int(p["spec"]["containers"][0]["resources"]["limits"]["cpu"]) for p in pods)
        active = {p["metadata"]["uid"] for p in admitted}
        figures = {"misaligned_pods": 0, "gpus": 0, "gpus_in_use": 0, "stranded_gpus": 0, "gpus_unlisted": 0}
        examples: list[dict[str, Any]] = []
        for node in pool.nodes.values():
            zones = slice_zones(node)
            used: set[str] = set()
            for pod in (p for p in admitted if p["spec"].get("nodeName") == node.name):
                place = await gpu_place(node, pod, zones)
                used |= {device for device, _ in place.devices}
                figures["gpus_unlisted"] += not place.devices
                if place.misaligned:
                    figures["misaligned_pods"] += 1
                    examples.append(_example(node, pod, place))
            free_cpus = {int(z.removeprefix("node-")): f["cpu"][1] for z, f in kubelet_figures(node, active).items()}
            figures["gpus"] += len(zones)
            figures["gpus_in_use"] += len(used)
            figures["stranded_gpus"] += sum(
                all(free_cpus[z] < smallest for z in numa or free_cpus)
                for (_, _, device), numa in zones.items()
                if device not in used
            )
        return figures, examples[:5]


def _example(node: RealNode, pod: dict[str, Any], place: GPUPlace) -> dict[str, Any]:
    return {
        "what": "DRA device off the pinned CPUs",
        "pod": pod["metadata"]["name"],
        "node": node.name,
        "cpu": pod["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "kubelet_zones": [f"node-{z}" for z in place.cpu_zones],
        "devices": {device: list(zones) for device, zones in place.devices},
    }


async def create_template(h: Harness, namespace: str) -> None:
    """The pods' ResourceClaimTemplate (one GPU) in ``namespace``, unless it is there."""
    try:
        await client.CustomObjectsApi(h.api).create_namespaced_custom_object(
            *RESOURCE, namespace, "resourceclaimtemplates", resource_claim_template(TEMPLATE, GPU)
        )
    except client.ApiException as exc:
        if exc.status != 409:
            raise


async def wait_released(h: Harness, pools: Collection[str], within: float = SETTLE_SECONDS) -> None:
    """Until no claim holds a device of ``pools`` (the nodes' own pools): an earlier run's claims
    are deallocated and deleted after their pods went."""
    custom = client.CustomObjectsApi(h.api)
    deadline = time.monotonic() + within
    while True:
        listed = await custom.list_cluster_custom_object(*RESOURCE, "resourceclaims")
        held = [c["metadata"]["name"] for c in listed["items"] if any(r.get("pool") in pools for r in _results(c))]
        if not held:
            return
        if time.monotonic() > deadline:
            raise SetupError(f"claims still hold GPUs of {', '.join(sorted(pools))} after {within:.0f} s: {held[:5]}")
        await asyncio.sleep(0.5)


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or ())


async def start_schedulers(h: Harness) -> None:
    """kube-scheduler alone and with the extender (as shipped, its DRA allocator and claim webhook
    included: the webhook pins the claims of the pinned column's pods only)."""
    await asyncio.to_thread(ensure_device_class, GPU)
    port = free_port()
    tls = ["--tls-cert", str(h.pki.serving.cert), "--tls-key", str(h.pki.serving.key), "--webhook-port", str(port)]
    await h.start_toposched(tls)
    admission = client.AdmissionregistrationV1Api(h.api)
    with contextlib.suppress(client.ApiException):  # one left by a run that did not end
        await admission.delete_mutating_webhook_configuration(WEBHOOK)
    await admission.create_mutating_webhook_configuration(claim_webhook_body(WEBHOOK, port, h.pki.ca.read_bytes()))
    h.start_plain()
    await asyncio.sleep(3)


SCENARIO = OwnPool(
    section="dra",
    pods_per_node=PODS_PER_NODE,
    schedulers=SCHEDULERS,
    node_shape=NODE_SHAPE,
    pod_shape="one DRA GPU (a claim from a template) and 2-6 integral CPUs (1 GiB each)",
    make_pods=dra_pods,
    settings=(FREE, BUSY),
    dra=DRA,
    judge=DRAJudge(),
    start=start_schedulers,
    extra={"devices_per_node": 4, "stranded_below_cpus": min(CPU_CHOICES), "modes": dict(TOPOSCHED)},
)


def run(kubeconfig: Path, work: Path, full: bool, real_nodes: int) -> dict[str, Any]:
    """The DRA scenario (``results.json``'s ``dra``)."""
    try:
        return ownpool.run(kubeconfig, work, SCENARIO, full, real_nodes)
    finally:  # its extender is gone: claims must not wait for it
        kubectl = [f"{harness.bin_dir()}/kubectl", f"--kubeconfig={kubeconfig}"]
        subprocess.run([*kubectl, "delete", "mutatingwebhookconfiguration", WEBHOOK, "--ignore-not-found"], check=False)
