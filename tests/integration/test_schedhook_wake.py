"""A pod the extender refused is tried again once room frees in the extender's view alone: the real
kube-scheduler with the toposched profile and ``toposched schedhook`` (testkit.schedstack), one kwok
node. kube-scheduler watches no NRT; without the wake it tries such a pod again only at its 5-minute
retry of unschedulable pods. With it, the extender patches ``toposched.io/requeued-at`` on the pod
and kube-scheduler binds it within seconds.
"""

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from testkit.builders import KWOK_TOLERATION, nrt_body, pod_body
from testkit.cluster import ensure_kwok_node, wait_for
from testkit.schedstack import SchedulerStack
from toposched.apis.constants import REQUEUED_AT_ANNOTATION, TOPOLOGY_MANAGER_POLICY_LABEL
from toposched.apis.noderesourcetopology import NodeResourceTopology

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds")]

NRTS = (NodeResourceTopology.GROUP, NodeResourceTopology.VERSION, NodeResourceTopology.PLURAL)
WITHIN = 15.0
"""Seconds from the room freeing to the bind (the wake's tick, kube-scheduler's backoff of 1-10 s)."""


@pytest.fixture(scope="module")
def stack(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchedulerStack]:
    """The extender and a kube-scheduler of a profile of their own (no other test's pods reach them)."""
    profile = f"toposched-wake-{uuid.uuid4().hex[:6]}"
    stack = SchedulerStack(kubeconfig, tmp_path_factory.mktemp("wake"), profile=profile)
    stack.start()
    yield stack
    stack.stop()
    print(stack.log("extender").read_text()[-3000:])


@pytest.fixture
async def node(api: client.ApiClient) -> AsyncIterator[tuple[str, str]]:
    """A NUMA-managed kwok node (its Topology Manager policy labelled) without an NRT yet: name, uid."""
    name = f"wake-{uuid.uuid4().hex[:6]}"
    await ensure_kwok_node(api, name, {"toposched-test": name, TOPOLOGY_MANAGER_POLICY_LABEL: "single-numa-node"})
    core = client.CoreV1Api(api)
    yield name, (await core.read_node(name)).metadata.uid
    await core.delete_node(name)  # its NRT, owned by it, goes too


def nrt(node: tuple[str, str], free: tuple[int, int]) -> dict[str, Any]:
    """Two zones of 4 CPUs, ``free`` of them available on each."""
    return nrt_body(node[0], [{"cpu": (4, 4, cpu), "memory": ("8Gi", "8Gi", "8Gi")} for cpu in free], owner_uid=node[1])


async def create_pod(api: client.ApiClient, namespace: str, stack: SchedulerStack, node: str, cpu: int) -> str:
    body = pod_body(
        "p",
        cpu=cpu,
        memory="1Gi",
        scheduler=stack.profile,
        node_selector={"toposched-test": node},
        tolerations=[KWOK_TOLERATION],
        image="example.invalid/app:1",
    )
    await client.CoreV1Api(api).create_namespaced_pod(namespace, body)
    return "p"


async def refused(api: client.ApiClient, namespace: str, name: str) -> str:
    """The extender's reason, once kube-scheduler has recorded the pod unschedulable."""
    core = client.CoreV1Api(api)

    async def recorded() -> str | None:
        pod = await core.read_namespaced_pod(name, namespace)
        for c in pod.status.conditions or []:
            if c.type == "PodScheduled" and c.reason == "Unschedulable" and "toposched: " in (c.message or ""):
                return str(c.message)
        return None

    return await wait_for(recorded, within=30, what=f"{name} refused by the extender")


async def bound_within(api: client.ApiClient, namespace: str, name: str, since: float) -> tuple[Any, float]:
    """The pod once bound, and the seconds from ``since`` (monotonic) to when that was seen."""
    core = client.CoreV1Api(api)

    async def bound() -> Any:
        pod = await core.read_namespaced_pod(name, namespace)
        return pod if pod.spec.node_name else None

    pod = await wait_for(bound, within=WITHIN, what=f"{name} bound once room freed")
    return pod, time.monotonic() - since


async def test_a_pod_refused_for_numa_room_is_bound_once_the_nrt_shows_room(
    api: client.ApiClient, namespace: str, stack: SchedulerStack, node: tuple[str, str]
) -> None:
    custom = client.CustomObjectsApi(api)
    await custom.create_cluster_custom_object(*NRTS, nrt(node, (2, 2)))
    name = await create_pod(api, namespace, stack, node[0], cpu=3)
    why = await refused(api, namespace, name)
    assert "cannot align" in why, why
    current = await custom.get_cluster_custom_object(*NRTS, node[0])
    room = nrt(node, (4, 2))
    room["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    freed = time.monotonic()
    await custom.replace_cluster_custom_object(*NRTS, node[0], room)
    pod, seconds = await bound_within(api, namespace, name, freed)
    print(f"refused ({why}); bound {seconds:.1f} s after the NRT showed room")
    assert pod.spec.node_name == node[0]
    assert REQUEUED_AT_ANNOTATION in (pod.metadata.annotations or {})


async def test_a_pod_refused_on_a_blind_node_is_bound_once_its_nrt_is_there(
    api: client.ApiClient, namespace: str, stack: SchedulerStack, node: tuple[str, str]
) -> None:
    name = await create_pod(api, namespace, stack, node[0], cpu=2)
    why = await refused(api, namespace, name)
    assert "missing" in why, why
    freed = time.monotonic()
    await client.CustomObjectsApi(api).create_cluster_custom_object(*NRTS, nrt(node, (4, 4)))
    pod, seconds = await bound_within(api, namespace, name, freed)
    print(f"refused ({why}); bound {seconds:.1f} s after its NRT came")
    assert pod.spec.node_name == node[0]
    assert REQUEUED_AT_ANNOTATION in (pod.metadata.annotations or {})


async def test_a_pod_refused_before_an_extender_restart_is_bound_once_the_new_one_acts(
    api: client.ApiClient, namespace: str, stack: SchedulerStack, node: tuple[str, str]
) -> None:
    """Refused, then the extender is killed and room frees while none runs: the new process knows
    nothing of the pod, and kube-scheduler saw no event; the new one adopts it on starting to act."""
    custom = client.CustomObjectsApi(api)
    await custom.create_cluster_custom_object(*NRTS, nrt(node, (2, 2)))
    name = await create_pod(api, namespace, stack, node[0], cpu=3)
    why = await refused(api, namespace, name)
    stack.processes["extender"].kill()
    current = await custom.get_cluster_custom_object(*NRTS, node[0])
    room = nrt(node, (4, 2))
    room["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    await custom.replace_cluster_custom_object(*NRTS, node[0], room)
    await asyncio.to_thread(stack.restart_extender)
    started = time.monotonic()
    pod, seconds = await bound_within(api, namespace, name, started)
    print(f"refused ({why}); bound {seconds:.1f} s after a new extender was Ready")
    # Bound in time is what counts: in a busy shared cluster another event may requeue it first, so
    # the annotation is not required here (alone, without the sweep, it stayed unbound).
    assert pod.spec.node_name == node[0]
