"""End to end on real kubelets: pods go through the second kube-scheduler and the extender to a
real node, whose kubelet admits them on the NUMA zone the extender predicted; where kube-scheduler
alone lands a pod on a fragmented node and the kubelet rejects it, toposched places it elsewhere;
and the kubelet's real rejections of a ReplicaSet's pods are handed back to the ReplicaSet.

Two real nodes per test (2 NUMA zones x 4 CPUs, CPU 0 reserved, single-numa-node), each with the
real exporter; the pods may go only to these two (required node affinity), so no kwok node and
no other real node is a candidate.
"""

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from testkit.cluster import wait_default_service_account, wait_for
from testkit.realnode import RealNode, Topology, add_node, leftovers, remove_node, scheduled_pod, workload_pod
from testkit.realnode.exporter import NodeExporter, start_exporter, wait_agreement
from testkit.schedstack import SchedulerStack, scheduler_stack
from toposched.apis.constants import NUMA_ZONES_ANNOTATION

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds", "real_nodes")]

REJECTIONS = ("TopologyAffinityError", "UnexpectedAdmissionError")


@pytest.fixture(scope="module")
def stack(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchedulerStack]:
    """The extender (remediation on) and kube-scheduler with the shipped toposched profile."""
    work = tmp_path_factory.mktemp("stack")
    with scheduler_stack(kubeconfig, work) as running:
        yield running
    print((work / "extender.log").read_text()[-3000:])


class Pair:
    """Two real nodes with their exporters: ``frag`` and ``roomy``."""

    def __init__(self, frag: RealNode, roomy: RealNode) -> None:
        self.frag, self.roomy = frag, roomy
        self.exporters: dict[str, NodeExporter] = {}

    def names(self) -> list[str]:
        return [self.frag.name, self.roomy.name]

    def start_exporter(self, node: RealNode) -> NodeExporter:
        self.exporters[node.name] = start_exporter(node)
        return self.exporters[node.name]

    def stop(self) -> None:
        for exporter in self.exporters.values():
            exporter.stop()


@pytest.fixture
async def pair(kubeconfig: Path) -> AsyncIterator[Pair]:
    tag = uuid.uuid4().hex[:6]
    topology = Topology.uniform(2, 4, "4Gi")
    frag, roomy = await asyncio.gather(
        asyncio.to_thread(add_node, f"frag-{tag}", topology), asyncio.to_thread(add_node, f"roomy-{tag}", topology)
    )
    nodes = Pair(frag, roomy)
    try:
        yield nodes
    finally:
        nodes.stop()
        for node in (frag, roomy):
            await asyncio.to_thread(remove_node, node.name)
            assert leftovers(node.name) == []


async def _phase(api: client.ApiClient, namespace: str, name: str, phases: set[str], within: float = 60) -> Any:
    core = client.CoreV1Api(api)

    async def reached() -> Any:
        found = await core.read_namespaced_pod(name, namespace)
        return found if found.status.phase in phases else None

    return await wait_for(reached, within=within, what=f"pod {name} in {sorted(phases)}")


async def fragment(api: client.ApiClient, namespace: str, pair: Pair) -> None:
    """frag: 2 + 2 exclusive CPUs leave zones with 1 and 2 free (3 in all, none holds 3).
    roomy: 3 CPUs fill zone 0, zone 1 keeps 4."""
    core = client.CoreV1Api(api)
    placed = [("frag-a", pair.frag, 2), ("frag-b", pair.frag, 2), ("roomy-a", pair.roomy, 3)]
    for name, node, cpu in placed:
        await core.create_namespaced_pod(namespace, workload_pod(name, node=node.name, cpu=cpu, memory="256Mi"))
        await _phase(api, namespace, name, {"Running"})


@pytest.mark.usefixtures("stack")
async def test_toposched_places_where_kube_scheduler_alone_is_rejected(
    api: client.ApiClient, namespace: str, pair: Pair
) -> None:
    await wait_default_service_account(api, namespace)
    core = client.CoreV1Api(api)
    exporters = [pair.start_exporter(pair.frag), pair.start_exporter(pair.roomy)]
    await fragment(api, namespace, pair)
    for exporter in exporters:
        await asyncio.to_thread(wait_agreement, exporter, 15)

    # kube-scheduler alone: the node totals fit, the affinity prefers frag; its kubelet rejects.
    await core.create_namespaced_pod(
        namespace, scheduled_pod("alone", 3, "default-scheduler", pair.names(), pair.frag.name)
    )
    alone = await _phase(api, namespace, "alone", {"Failed", "Running"})
    assert alone.spec.node_name == pair.frag.name
    assert alone.status.phase == "Failed"
    assert alone.status.reason in REJECTIONS, alone.status

    # The same pod through toposched: frag's NRT shows no zone with 3 CPUs, roomy's zone 1 has 4.
    await core.create_namespaced_pod(namespace, scheduled_pod("placed", 3, "toposched", pair.names(), pair.frag.name))
    placed = await _phase(api, namespace, "placed", {"Running", "Failed"})
    assert placed.status.phase == "Running", placed.status
    assert placed.spec.node_name == pair.roomy.name
    predicted = json.loads(placed.metadata.annotations[NUMA_ZONES_ANNOTATION])
    assert predicted == ["node-1"]
    assert pair.roomy.numa_zones(pair.roomy.assigned_cpus(placed.metadata.uid)["app"]) == predicted

    # A pod that fits frag's zone 1 goes there, on the zone the annotation names.
    await core.create_namespaced_pod(namespace, scheduled_pod("small", 2, "toposched", [pair.frag.name]))
    small = await _phase(api, namespace, "small", {"Running", "Failed"})
    assert small.status.phase == "Running", small.status
    predicted = json.loads(small.metadata.annotations[NUMA_ZONES_ANNOTATION])
    assert pair.frag.numa_zones(pair.frag.assigned_cpus(small.metadata.uid)["app"]) == predicted == ["node-1"]


async def fragment_behind_a_stale_nrt(api: client.ApiClient, namespace: str, pair: Pair) -> None:
    """:func:`fragment`, with frag's exporter stopped before: its NRT still shows empty zones."""
    stale = pair.start_exporter(pair.frag)
    roomy = pair.start_exporter(pair.roomy)
    await asyncio.to_thread(wait_agreement, stale, 15)
    stale.stop()
    await fragment(api, namespace, pair)
    await asyncio.to_thread(wait_agreement, roomy, 15)


def replica_set(app: str, template: dict[str, Any]) -> dict[str, Any]:
    """One replica of ``template``, whose labels must be ``app: <app>``."""
    selector = {"matchLabels": {"app": app}}
    return {"metadata": {"name": app}, "spec": {"replicas": 1, "selector": selector, "template": template}}


@pytest.mark.usefixtures("stack")
async def test_real_rejections_of_a_replicaset_are_remediated(
    api: client.ApiClient, namespace: str, pair: Pair
) -> None:
    """frag's exporter is stopped while frag fills up, so its NRT still shows empty zones: the
    extender sends the ReplicaSet's pod there and the kubelet rejects it. The ReplicaSet replaces
    a failed pod at once (it does not count Failed pods), so pods keep failing on frag until its
    NRT is current again; then the replacement goes to roomy and runs. The remediation deletes the
    failed pods, one per owner per backoff period, each with an Event."""
    await wait_default_service_account(api, namespace)
    core = client.CoreV1Api(api)
    await fragment_behind_a_stale_nrt(api, namespace, pair)
    template = scheduled_pod("ignored", 3, "toposched", pair.names(), pair.frag.name)
    template["metadata"] = {"labels": {"app": "db"}}
    await client.AppsV1Api(api).create_namespaced_replica_set(namespace, replica_set("db", template))

    async def db_pods() -> list[Any]:
        return list((await core.list_namespaced_pod(namespace, label_selector="app=db")).items)

    async def rejected() -> Any:
        return next((p for p in await db_pods() if p.status.phase == "Failed"), None)

    failed = await wait_for(rejected, within=60, what="the kubelet to reject the ReplicaSet's pod")
    assert failed.spec.node_name == pair.frag.name
    assert failed.status.reason == "TopologyAffinityError", failed.status
    await asyncio.to_thread(wait_agreement, pair.start_exporter(pair.frag), 15)  # frag's NRT is current again

    async def replacement_runs() -> Any:
        return next((p for p in await db_pods() if p.status.phase == "Running"), None)

    replacement = await wait_for(replacement_runs, within=60, what="a replacement Running")
    assert replacement.spec.node_name == pair.roomy.name
    predicted = json.loads(replacement.metadata.annotations[NUMA_ZONES_ANNOTATION])
    assert pair.roomy.numa_zones(pair.roomy.assigned_cpus(replacement.metadata.uid)["app"]) == predicted

    async def remediated() -> Any:
        events = (await core.list_namespaced_event(namespace)).items
        return [e for e in events if e.reason == "TopologyAffinityRemediation"]

    events = await wait_for(remediated, within=30, what="the remediation's Event")
    assert "deleted so that ReplicaSet/db recreates it" in events[0].message
    names = {p.metadata.name for p in await db_pods()}
    assert events[0].involved_object.name not in names  # deleted
    rejections = [e for e in (await core.list_namespaced_event(namespace)).items if e.reason in REJECTIONS]
    print(f"real rejections before frag's NRT was current: {len({e.involved_object.name for e in rejections})}")
