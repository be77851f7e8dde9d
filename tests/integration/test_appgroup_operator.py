"""The AppGroup operator as a real process against the local control plane."""

import asyncio
import copy
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client, watch

from testkit.cluster import (
    OperatorProcess,
    create_appgroup,
    create_member_pod,
    ensure_kwok_node,
    get_appgroup,
    patch_appgroup,
    ready_condition,
    wait_default_service_account,
    wait_for,
)
from testkit.paths import EXAMPLES, UPSTREAM_FIXTURES
from toposched.apis.appgroup import AppGroup

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds")]


def example() -> dict[str, Any]:
    data = yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text())
    assert isinstance(data, dict)
    return data


def order_of(obj: dict[str, Any]) -> list[str]:
    entries = obj["status"]["topologyOrder"]
    return [e["workload"]["selector"] for e in sorted(entries, key=lambda e: e["index"])]


BOUTIQUE_ALTERNATE_KAHN = [
    "frontend",
    "redis-cart",
    "adservice",
    "cartservice",
    "recommendationservice",
    "productcatalogservice",
    "checkoutservice",
    "currencyservice",
    "emailservice",
    "paymentservice",
    "shippingservice",
]


async def status_of(api: client.ApiClient, namespace: str, name: str, generation: int | None = None) -> Any:
    obj = await get_appgroup(api, namespace, name)
    status = obj.get("status", {})
    if generation is not None and status.get("observedGeneration") != generation:
        return None
    return obj if "conditions" in status else None


async def test_status_appears_and_follows_spec_edits(
    api: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    await create_appgroup(api, namespace, example())
    obj = await wait_for(lambda: status_of(api, namespace, "online-boutique", 1), what="status")
    assert order_of(obj) == BOUTIQUE_ALTERNATE_KAHN
    assert [e["workload"]["selector"] for e in obj["status"]["topologyOrder"]] == sorted(BOUTIQUE_ALTERNATE_KAHN)
    assert ready_condition(obj) is not None
    assert ready_condition(obj)["status"] == "True"  # type: ignore[index]
    assert obj["status"]["runningWorkloads"] == 0
    assert AppGroup.from_dict(obj).status is not None

    await patch_appgroup(api, namespace, "online-boutique", {"spec": {"topologySortingAlgorithm": "KahnSort"}})
    obj = await wait_for(lambda: status_of(api, namespace, "online-boutique", 2), what="status of generation 2")
    assert order_of(obj)[:4] == ["frontend", "adservice", "recommendationservice", "checkoutservice"]

    # The operator never writes the spec or metadata: its only field manager entry is the status subresource.
    managers = [m for m in obj["metadata"]["managedFields"] if m.get("subresource") == "status"]
    assert managers, obj["metadata"]["managedFields"]
    assert all(
        m.get("subresource") == "status" for m in obj["metadata"]["managedFields"] if "toposched" in m["manager"]
    )
    assert not any(k.startswith("kopf") for k in obj["metadata"].get("annotations", {}))
    assert "finalizers" not in obj["metadata"]


async def test_cycle_is_reported_and_still_ordered(
    api: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    # The upstream Online Boutique example declares traffic both ways, so it is one big cycle.
    body = yaml.safe_load((UPSTREAM_FIXTURES / "appgroup-online-boutique.yaml").read_text())
    await create_appgroup(api, namespace, body)
    obj = await wait_for(lambda: status_of(api, namespace, "online-boutique", 1), what="status")
    ready = ready_condition(obj)
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "DependencyCycle")
    assert "dependency cycle among frontend, cartservice" in ready["message"]
    assert len(obj["status"]["topologyOrder"]) == 11

    async def warning() -> Any:
        events = await client.CoreV1Api(api).list_namespaced_event(namespace)
        return [e for e in events.items if e.reason == "DependencyCycle" and e.type == "Warning"]

    found = await wait_for(warning, what="DependencyCycle event")
    assert found[0].involved_object.name == "online-boutique"


async def test_invalid_spec_keeps_the_last_order(
    api: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    await create_appgroup(api, namespace, example())
    first = await wait_for(lambda: status_of(api, namespace, "online-boutique", 1), what="status")
    workloads = example()["spec"]["workloads"]
    workloads[2]["dependencies"] = [{"workload": {"kind": "Deployment", "name": "ghost", "selector": "ghost"}}]
    await patch_appgroup(api, namespace, "online-boutique", {"spec": {"workloads": workloads}})
    obj = await wait_for(lambda: status_of(api, namespace, "online-boutique", 2), what="status of generation 2")
    ready = ready_condition(obj)
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "no workload has selector 'ghost'" in ready["message"]
    assert obj["status"]["topologyOrder"] == first["status"]["topologyOrder"]
    assert obj["status"]["topologyCalculationTime"] == first["status"]["topologyCalculationTime"]
    # The user's spec is untouched.
    assert obj["spec"]["workloads"] == workloads


async def test_counts_running_pods_of_its_own_namespace(
    api: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    await ensure_kwok_node(api, "kwok-appgroup-0")
    await wait_default_service_account(api, namespace)
    await create_appgroup(api, namespace, example())
    await wait_for(lambda: status_of(api, namespace, "online-boutique", 1), what="status")
    for i, workload in enumerate(["frontend", "cartservice", "redis-cart"]):
        await create_member_pod(api, namespace, f"pod-{i}", "online-boutique", workload)

    async def running(n: int) -> Any:
        obj = await get_appgroup(api, namespace, "online-boutique")
        return obj if obj["status"].get("runningWorkloads") == n else None

    obj = await wait_for(lambda: running(3), within=60, what="3 running pods")
    assert obj["status"]["scheduleStartTime"]
    start = obj["status"]["scheduleStartTime"]
    await client.CoreV1Api(api).delete_namespaced_pod("pod-0", namespace, grace_period_seconds=0)
    obj = await wait_for(lambda: running(2), within=60, what="2 running pods")
    assert obj["status"]["scheduleStartTime"] == start  # the first bind time does not move


async def _watch_status_writes(api: client.ApiClient, namespace: str, counts: Counter[str]) -> None:
    """Count, per AppGroup, the MODIFIED events that changed its status."""
    objects = client.CustomObjectsApi(api)
    seen: dict[str, Any] = {}
    async with watch.Watch().stream(
        objects.list_namespaced_custom_object,
        AppGroup.GROUP,
        AppGroup.VERSION,
        namespace,
        AppGroup.PLURAL,
        timeout_seconds=120,
    ) as stream:
        async for event in stream:
            obj = event["object"]
            name = obj["metadata"]["name"]
            status = obj.get("status")
            if event["type"] == "MODIFIED" and status != seen.get(name):
                counts[name] += 1
            seen[name] = status


async def test_killed_mid_reconcile_converges_without_duplicate_writes(
    api: client.ApiClient, namespace: str, kubeconfig: Path, tmp_path: Path
) -> None:
    writes: Counter[str] = Counter()
    watcher = asyncio.create_task(_watch_status_writes(api, namespace, writes))
    await asyncio.sleep(0.5)
    log = tmp_path / "operator.log"
    first = OperatorProcess(kubeconfig, namespace, log, identity="op-restart", lease="toposched-restart")
    first.start()
    names = [f"app-{i:02d}" for i in range(30)]
    try:
        await wait_for(lambda: _lease_holder(api, namespace, "toposched-restart"), what="first operator leads")
        for name in names:
            body = copy.deepcopy(example())
            body["metadata"]["name"] = name
            await create_appgroup(api, namespace, body)
        # Kill it while it is still working through the burst.
        await wait_for(lambda: _count_with_status(api, namespace, names, minimum=1), what="first writes")
        first.kill()
        done_before_kill = await _count_with_status(api, namespace, names, minimum=0)

        second = OperatorProcess(kubeconfig, namespace, log, identity="op-restart", lease="toposched-restart")
        second.start()
        try:
            await wait_for(
                lambda: _count_with_status(api, namespace, names, minimum=len(names)), within=60, what="all statuses"
            )
            await asyncio.sleep(2)  # let any stray duplicate write surface in the watch
            assert all(writes[n] == 1 for n in names), (done_before_kill, writes)
            # A converged operator finds nothing to write.
            await asyncio.sleep(1)
            assert second.metric("toposched_status_writes_total") == len(names) - done_before_kill
        finally:
            second.stop()
    finally:
        first.kill()
        watcher.cancel()
        print(log.read_text()[-4000:])


async def _lease_holder(api: client.ApiClient, namespace: str, name: str) -> str | None:
    try:
        lease = await client.CoordinationV1Api(api).read_namespaced_lease(name, namespace)
    except client.ApiException:
        return None
    return str(lease.spec.holder_identity) if lease.spec.holder_identity else None


async def _count_with_status(api: client.ApiClient, namespace: str, names: list[str], minimum: int) -> int | None:
    listed = await client.CustomObjectsApi(api).list_namespaced_custom_object(
        AppGroup.GROUP, AppGroup.VERSION, namespace, AppGroup.PLURAL
    )
    count = sum(
        1 for item in listed["items"] if item["metadata"]["name"] in names and "topologyOrder" in item.get("status", {})
    )
    return count if count >= minimum else None


@pytest.fixture
async def two_replicas(kubeconfig: Path, namespace: str, tmp_path: Path) -> AsyncIterator[list[OperatorProcess]]:
    procs = [
        OperatorProcess(kubeconfig, namespace, tmp_path / f"op-{x}.log", identity=f"replica-{x}", lease="toposched-ha")
        for x in ("a", "b")
    ]
    for p in procs:
        p.start()
    yield procs
    for p in procs:
        p.stop()


async def test_two_replicas_write_once_and_fail_over(
    api: client.ApiClient, namespace: str, two_replicas: list[OperatorProcess]
) -> None:
    writes: Counter[str] = Counter()
    watcher = asyncio.create_task(_watch_status_writes(api, namespace, writes))
    try:
        holder = await wait_for(lambda: _lease_holder(api, namespace, "toposched-ha"), what="a leader")
        await asyncio.sleep(0.5)
        await create_appgroup(api, namespace, example())
        await wait_for(lambda: status_of(api, namespace, "online-boutique", 1), what="status")
        await asyncio.sleep(2)
        assert writes["online-boutique"] == 1

        # The leader dies; the follower takes the lease once it expires and acts on the next edit.
        leader = next(p for p in two_replicas if p.identity == holder)
        leader.kill()
        await patch_appgroup(api, namespace, "online-boutique", {"spec": {"topologySortingAlgorithm": "TarjanSort"}})
        await wait_for(lambda: status_of(api, namespace, "online-boutique", 2), within=60, what="failover status")
        new_holder = await _lease_holder(api, namespace, "toposched-ha")
        assert new_holder is not None
        assert new_holder != holder
    finally:
        watcher.cancel()
