"""The real exporter against a real kubelet: after every admission and deletion the published NRT
equals the kubelet's own accounting (its checkpoints), within the exporter's update period; its
pods fingerprint is the one the extender computes for the pods the kubelet holds; without the
PodResources socket the estimates equal the kubelet's allocatable figures."""

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from testkit.cluster import wait_for, wait_pod_gone, wait_pod_phase
from testkit.realnode import (
    KubeletSettings,
    RealNode,
    RealNodeError,
    Topology,
    Zone,
    add_node,
    leftovers,
    remove_node,
    workload_pod,
)
from testkit.realnode.accounting import differences, kubelet_figures, nrt_figures
from testkit.realnode.exporter import (
    NodeExporter,
    nrt_attributes,
    published_nrt,
    running_exporter,
    start_exporter,
    wait_agreement,
)
from testkit.realnode.topology import GIB
from toposched.apis.constants import (
    NRT_ATTR_CPU_MANAGER_POLICY,
    NRT_ATTR_KUBELET_RESTART,
    NRT_ATTR_MEMORY_MANAGER_POLICY,
    NRT_ATTR_MEMORY_SOURCE,
    NRT_ATTR_PODRESOURCES,
    NRT_ATTR_PODS_FINGERPRINT,
    NRT_ATTR_PODS_FINGERPRINT_METHOD,
)
from toposched.apis.fingerprint import METHOD_EXCLUSIVE, fingerprint
from toposched.exporter.restarts import HOLD
from toposched.schedhook.placement.freshness import accounted
from toposched.schedhook.placement.kubelet.claims import holds_exclusive
from toposched.schedhook.placement.parse import placed_pod, pod_from_spec

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds", "real_nodes")]

PERIOD = 10.0  # the exporter's default --period: every figure must be right within it
# Zone 1 holds 64 x 2Mi hugepages, so hugepages are compared too.
TOPOLOGY = Topology((Zone(4, 4 * GIB), Zone(4, 4 * GIB, hugepages_2mi=64)))


@pytest.fixture
def real_node(kubeconfig: Path) -> Iterator[RealNode]:
    name = f"rx-{uuid.uuid4().hex[:6]}"
    node = add_node(name, TOPOLOGY, KubeletSettings())
    yield node
    remove_node(name)
    assert leftovers(name) == []


async def _fingerprint_matches(api: client.ApiClient, exporter: NodeExporter) -> bool:
    """The NRT's pods fingerprint is what the extender computes for the pods bound to the node and
    not finished (the pods the kubelet holds), counted by the NRT's method."""
    nrt = await asyncio.to_thread(published_nrt, exporter.node)
    assert nrt is not None
    listed = await client.CoreV1Api(api).list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName={exporter.node.name}", _preload_content=False
    )
    held = [
        (pod["metadata"]["namespace"], pod["metadata"]["name"], pod_from_spec(pod["spec"]))
        for pod in json.loads(await listed.read())["items"]
        if placed_pod(pod) is not None
    ]
    attributes = nrt_attributes(nrt)
    cpu, memory = attributes[NRT_ATTR_CPU_MANAGER_POLICY], attributes[NRT_ATTR_MEMORY_MANAGER_POLICY]
    counted = [(ns, name) for ns, name, pod in held if holds_exclusive(pod, cpu, memory)]
    assert attributes[NRT_ATTR_PODS_FINGERPRINT_METHOD] == METHOD_EXCLUSIVE
    return fingerprint(counted) == attributes[NRT_ATTR_PODS_FINGERPRINT] and accounted(
        attributes, held, lag=0
    ) == frozenset(counted)


async def test_nrt_follows_the_kubelet_through_admissions_and_deletions(
    api: client.ApiClient, namespace: str, real_node: RealNode
) -> None:
    core = client.CoreV1Api(api)
    node = real_node.name
    timings: dict[str, float] = {}
    with running_exporter(real_node, period=PERIOD) as exporter:

        async def agree(step: str) -> None:
            try:
                timings[step] = await asyncio.to_thread(wait_agreement, exporter, PERIOD)
            except RealNodeError as exc:
                raise AssertionError(f"after step {step!r}: {exc}") from None
            assert await _fingerprint_matches(api, exporter), step

        await agree("start")
        steps: list[tuple[str, dict[str, Any], str]] = [
            ("two-cpus", workload_pod("a", node=node, cpu=2, memory="512Mi"), "Running"),
            ("hugepages", workload_pod("b", node=node, cpu=3, memory="1Gi", hugepages_2mi="64Mi"), "Running"),
            # Zone 0 has 1 CPU left, zone 1 has 1: 3 exclusive CPUs fit no single zone.
            ("rejected", workload_pod("c", node=node, cpu=3, memory="256Mi"), "Failed"),
            ("shared-pool", workload_pod("d", node=node), "Running"),
        ]
        for step, body, phase in steps:
            await core.create_namespaced_pod(namespace, body)
            pod = await wait_pod_phase(api, namespace, body["metadata"]["name"], {phase})
            if phase == "Failed":
                assert pod.status.reason in ("TopologyAffinityError", "UnexpectedAdmissionError"), pod.status
            await agree(step)
        deleted = set()
        for name in ("a", "b"):
            deleted.add((await core.read_namespaced_pod(name, namespace)).metadata.uid)
            await core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
            await wait_pod_gone(api, namespace, name)
            await agree(f"deleted {name}")

        # The Memory Manager's checkpoint keeps the deleted pods' blocks until the next admission
        # drops them; from then on the files themselves agree with the NRT.
        await core.create_namespaced_pod(namespace, workload_pod("e", node=node, cpu=1, memory="256Mi"))
        await wait_pod_phase(api, namespace, "e", {"Running"})
        await agree("after the next admission")
        memory = real_node.memory_manager_state() or {}
        assert not deleted & set(memory.get("entries") or {})
        nrt = await asyncio.to_thread(published_nrt, real_node)
        assert nrt is not None
        assert differences(kubelet_figures(real_node), nrt_figures(nrt)) == []
        assert exporter.ready()
    print("seconds from the kubelet's decision to an agreeing NRT:", {k: round(v, 2) for k, v in timings.items()})
    assert max(timings.values()) <= PERIOD


async def test_estimates_without_podresources_equal_the_kubelets_allocatable(
    api: client.ApiClient, namespace: str, real_node: RealNode
) -> None:
    """Estimate mode: allocatable per zone (CPUs, memory, hugepages) is the kubelet's own figure.
    Available is not tracked without PodResources (the NRT says so): it stays allocatable."""
    await client.CoreV1Api(api).create_namespaced_pod(
        namespace, workload_pod("held", node=real_node.name, cpu=2, memory="1Gi")
    )
    await wait_pod_phase(api, namespace, "held", {"Running"})
    exporter = start_exporter(real_node, podresources=False)
    try:

        async def estimated() -> Any:
            nrt = await asyncio.to_thread(published_nrt, real_node)
            return nrt if nrt and NRT_ATTR_PODRESOURCES in nrt_attributes(nrt) else None

        nrt = await wait_for(estimated, within=PERIOD + 5, what="an NRT from estimates")
        assert nrt_attributes(nrt)[NRT_ATTR_MEMORY_SOURCE].startswith("estimated")
        await asyncio.to_thread(wait_agreement, exporter, PERIOD, available=False)
        assert not exporter.ready()  # PodResources never answered
    finally:
        exporter.stop()


@pytest.fixture
def unreconciled_node(kubeconfig: Path) -> Iterator[RealNode]:
    """A real node whose CPU Manager never drops stale entries on its own (its reconcile period is
    longer than the test): only an admission does, as right after a restart."""
    name = f"rk-{uuid.uuid4().hex[:6]}"
    node = add_node(name, TOPOLOGY, KubeletSettings(extra={"cpuManagerReconcilePeriod": "30m"}))
    yield node
    remove_node(name)
    assert leftovers(name) == []


def _cpus_available(nrt: dict[str, Any] | None) -> list[int] | None:
    if nrt is None:
        return None
    figures = nrt_figures(nrt, ["cpu"])
    return [figures[zone]["cpu"][1] for zone in sorted(figures)]


async def test_a_restarted_kubelet_holds_a_deleted_pods_cpus_for_its_first_pods(
    api: client.ApiClient, namespace: str, unreconciled_node: RealNode
) -> None:
    """A pod deleted shortly before its kubelet restarts keeps its CPUs in the kubelet's checkpoint.
    Running, the kubelet drops them at the next admission, and the NRT counts them free; a started
    kubelet admits its first pods from the apiserver before it drops anything, and a pod among them
    that needs those CPUs is rejected (chaos, seed 11: a TopologyAffinityError). So from the kubelet
    going away until it has admitted its first pods the NRT counts them held, and says so."""
    core = client.CoreV1Api(api)
    real_node = unreconciled_node
    node = real_node.name
    with running_exporter(real_node, period=PERIOD) as exporter:
        # Zone 1 (CPUs 4-7) full with "f", then zone 0 (CPUs 1-3, CPU 0 reserved) with "a".
        for name, cpus in (("f", 4), ("a", 3)):
            await core.create_namespaced_pod(namespace, workload_pod(name, node=node, cpu=cpus, memory="256Mi"))
            await wait_pod_phase(api, namespace, name, {"Running"})
        await asyncio.to_thread(wait_agreement, exporter, PERIOD)
        assert _cpus_available(await asyncio.to_thread(published_nrt, real_node)) == [0, 0]

        uid = (await core.read_namespaced_pod("a", namespace)).metadata.uid
        await core.delete_namespaced_pod("a", namespace, grace_period_seconds=0)
        await wait_pod_gone(api, namespace, "a")

        async def free_in_zone_0(count: int) -> dict[str, Any] | None:
            nrt = await asyncio.to_thread(published_nrt, real_node)
            available = _cpus_available(nrt)
            return nrt if available and available[0] == count else None

        await wait_for(lambda: free_in_zone_0(3), within=PERIOD, what="a's CPUs counted free while the kubelet runs")
        assert uid in ((real_node.cpu_manager_state() or {}).get("entries") or {})  # held until the next admission

        real_node.stop_kubelet(kill=True)
        stopped = asyncio.get_running_loop().time()
        held = await wait_for(lambda: free_in_zone_0(0), within=5, what="a's CPUs held once the kubelet is gone")
        print(f"held in the NRT {asyncio.get_running_loop().time() - stopped:.1f} s after the kubelet stopped")
        assert NRT_ATTR_KUBELET_RESTART in nrt_attributes(held)

        # Bound while the kubelet is away: among its first pods, it finds a's CPUs held.
        await core.create_namespaced_pod(namespace, workload_pod("b", node=node, cpu=2, memory="256Mi"))
        await asyncio.to_thread(real_node.start_kubelet)
        pod = await wait_pod_phase(api, namespace, "b", {"Failed", "Running"})
        assert pod.status.reason == "TopologyAffinityError", pod.status
        await asyncio.to_thread(wait_agreement, exporter, PERIOD)

        # Once the hold is over a's CPUs count free again, and the next pod gets them.
        back = await wait_for(lambda: free_in_zone_0(3), within=HOLD + PERIOD, what="the hold to end")
        assert NRT_ATTR_KUBELET_RESTART not in nrt_attributes(back)
        await core.create_namespaced_pod(namespace, workload_pod("c", node=node, cpu=2, memory="256Mi"))
        pod = await wait_pod_phase(api, namespace, "c", {"Failed", "Running"})
        assert pod.status.phase == "Running", pod.status
        assert real_node.numa_zones(real_node.assigned_cpus(pod.metadata.uid)["app"]) == ["node-0"]
        await asyncio.to_thread(wait_agreement, exporter, PERIOD)
