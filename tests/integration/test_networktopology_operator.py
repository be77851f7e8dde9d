"""The NetworkTopology operator as a real process: ConfigMap latencies and kwok nodes in, costs out."""

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio import client

from testkit.builders import appgroup_body, member_labels, networktopology_body, pod_body
from testkit.cluster import (
    crd_without_bounds,
    create_accepted,
    ensure_kwok_node,
    wait_default_service_account,
    wait_for,
)
from toposched.apis.constants import REGION_LABEL, ZONE_LABEL
from toposched.apis.netperf import latency_key
from toposched.apis.networktopology import NetworkTopology

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds")]

G, V, P = NetworkTopology.GROUP, NetworkTopology.VERSION, NetworkTopology.PLURAL


@pytest.fixture
async def nodes(api: client.ApiClient, namespace: str) -> AsyncIterator[dict[str, tuple[str, str]]]:
    """Three kwok nodes in zones unique to this test: {node: (region, zone)}."""
    layout = {
        f"{namespace}-n1": (f"{namespace}-r1", f"{namespace}-z1"),
        f"{namespace}-n2": (f"{namespace}-r1", f"{namespace}-z2"),
        f"{namespace}-n3": (f"{namespace}-r2", f"{namespace}-z3"),
    }
    for name, (region, zone) in layout.items():
        await ensure_kwok_node(api, name, {REGION_LABEL: region, ZONE_LABEL: zone})
    yield layout
    for name in layout:
        await client.CoreV1Api(api).delete_node(name)


def cm_data(namespace: str, values: dict[tuple[str, str], str]) -> dict[str, str]:
    return {latency_key("p90", f"{namespace}-{o}", f"{namespace}-{d}"): v for (o, d), v in values.items()}


async def put_configmap(api: client.ApiClient, namespace: str, data: dict[str, str]) -> None:
    core = client.CoreV1Api(api)
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="netperf-metrics"), data=data)
    try:
        await core.replace_namespaced_config_map("netperf-metrics", namespace, body)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        await core.create_namespaced_config_map(namespace, body)


def user_weight(namespace: str) -> dict[str, Any]:
    return {
        "name": "UserDefined",
        "topologyList": [
            {
                "topologyKey": ZONE_LABEL,
                "originList": [
                    {"origin": f"{namespace}-z1", "costList": [{"destination": f"{namespace}-z2", "networkCost": 9}]}
                ],
            }
        ],
    }


async def create_nt(api: client.ApiClient, namespace: str) -> None:
    body = networktopology_body("net", [user_weight(namespace)])
    await client.CustomObjectsApi(api).create_namespaced_custom_object(G, V, namespace, P, body)


async def get_nt(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    result: dict[str, Any] = await client.CustomObjectsApi(api).get_namespaced_custom_object(G, V, namespace, P, "net")
    return result


def netperf_entries(obj: dict[str, Any], namespace: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(origin, destination) -> cost entry of this test's zones and regions in the NetperfCosts weight."""
    entries = {}
    for weight in obj["spec"]["weights"]:
        if weight["name"] != "NetperfCosts":
            continue
        for topology in weight["topologyList"]:
            for origin in topology["originList"]:
                for cost in origin.get("costList", []):
                    if origin["origin"].startswith(namespace):
                        o = origin["origin"].removeprefix(f"{namespace}-")
                        entries[(o, cost["destination"].removeprefix(f"{namespace}-"))] = cost
    return entries


def netperf_costs(obj: dict[str, Any], namespace: str) -> dict[tuple[str, str], int]:
    return {pair: entry["networkCost"] for pair, entry in netperf_entries(obj, namespace).items()}


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == type_), {})


async def costs_equal(api: client.ApiClient, namespace: str, expected: dict[tuple[str, str], int]) -> Any:
    """The CR once its NetperfCosts are ``expected`` and its status describes that generation."""
    obj = await get_nt(api, namespace)
    settled = obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
    return obj if settled and netperf_costs(obj, namespace) == expected else None


@pytest.mark.usefixtures("operator")
async def test_costs_from_measurements_follow_configmap_and_labels(
    api: client.ApiClient, namespace: str, nodes: dict[str, tuple[str, str]]
) -> None:
    await put_configmap(api, namespace, cm_data(namespace, {("n1", "n2"): "2", ("n1", "n3"): "30", ("n2", "n3"): "40"}))
    await create_nt(api, namespace)
    expected = {("z1", "z2"): 2, ("z2", "z1"): 2, ("r1", "r2"): 35, ("r2", "r1"): 35}
    obj = await wait_for(lambda: costs_equal(api, namespace, expected), what="NetperfCosts")
    assert obj["spec"]["weights"][0] == user_weight(namespace)  # the user's entry, untouched and first
    assert condition(obj, "Ready")["status"] == "True"
    assert obj["status"]["nodeCount"] >= 3
    assert obj["status"]["weightCalculationTime"]
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]

    # A ConfigMap change reaches the CR within a second.
    started, changed_at = time.monotonic(), datetime.now(UTC).replace(microsecond=0)
    await put_configmap(api, namespace, cm_data(namespace, {("n1", "n2"): "6", ("n1", "n3"): "30", ("n2", "n3"): "40"}))
    await wait_for(lambda: costs_equal(api, namespace, {**expected, ("z1", "z2"): 6, ("z2", "z1"): 6}), what="new cost")
    assert time.monotonic() - started < 5
    await asyncio.sleep(1)  # the events of those writes come back; none may undo the new status
    calculated = (await get_nt(api, namespace))["status"]["weightCalculationTime"]
    assert datetime.fromisoformat(calculated.replace("Z", "+00:00")) >= changed_at

    # Nothing changed -> nothing written: an unrelated key leaves the object alone.
    before = (await get_nt(api, namespace))["metadata"]["resourceVersion"]
    data = cm_data(namespace, {("n1", "n2"): "6", ("n1", "n3"): "30", ("n2", "n3"): "40"})
    await put_configmap(api, namespace, {**data, "note": "unrelated"})
    await asyncio.sleep(2)
    assert (await get_nt(api, namespace))["metadata"]["resourceVersion"] == before

    # Moving n2 into zone z1 removes the only zone pair of region r1.
    await client.CoreV1Api(api).patch_node(f"{namespace}-n2", {"metadata": {"labels": {ZONE_LABEL: f"{namespace}-z1"}}})
    await wait_for(lambda: costs_equal(api, namespace, {("r1", "r2"): 35, ("r2", "r1"): 35}), what="relabelled")


@pytest.mark.usefixtures("operator", "nodes")
async def test_bad_input_is_reported_and_last_good_costs_stay(api: client.ApiClient, namespace: str) -> None:
    good = cm_data(namespace, {("n1", "n2"): "2", ("n1", "n3"): "30"})
    await put_configmap(api, namespace, good)
    await create_nt(api, namespace)
    expected = {("z1", "z2"): 2, ("z2", "z1"): 2, ("r1", "r2"): 30, ("r2", "r1"): 30}
    await wait_for(lambda: costs_equal(api, namespace, expected), what="NetperfCosts")

    bad_key = latency_key("p90", f"{namespace}-n1", f"{namespace}-n2")
    await put_configmap(api, namespace, {**good, bad_key: "fast", "netperf_p90_latency_microseconds.origin.a": "1"})

    async def degraded() -> Any:
        obj = await get_nt(api, namespace)
        return obj if "fast" in condition(obj, "Degraded").get("message", "") else None

    obj = await wait_for(degraded, what="Degraded condition")
    message = condition(obj, "Degraded")["message"]
    assert bad_key in message
    assert "old microsecond key format" in message
    assert f"kept the last good cost of 2 pairs: {namespace}-z1->{namespace}-z2" in message
    assert netperf_costs(obj, namespace) == expected

    await client.CoreV1Api(api).delete_namespaced_config_map("netperf-metrics", namespace)

    async def unavailable() -> Any:
        obj = await get_nt(api, namespace)
        return obj if condition(obj, "Ready").get("reason") == "MeasurementsUnavailable" else None

    obj = await wait_for(unavailable, what="MeasurementsUnavailable")
    assert "netperf-metrics not found" in condition(obj, "Ready")["message"]
    assert netperf_costs(obj, namespace) == expected

    async def warned() -> bool:
        # The Event follows the status write that made the condition visible.
        events = await client.CoreV1Api(api).list_namespaced_event(namespace)
        return {"Degraded", "MeasurementsUnavailable"} <= {e.reason for e in events.items if e.type == "Warning"}

    await wait_for(warned, what="Warning Events for both problems")


def shop(name: str, bandwidth: str) -> dict[str, Any]:
    """web depends on db with ``bandwidth``."""
    return appgroup_body(name, {"web": ["db"], "db": []}, min_bandwidth=bandwidth)


async def place(api: client.ApiClient, namespace: str, appgroup: str, pods: list[tuple[str, str, str]]) -> None:
    """Member pods of ``appgroup``, bound at once: (pod, workload, node) with the node's short name."""
    for pod, workload, node in pods:
        body = pod_body(
            pod,
            labels=member_labels(appgroup, workload),
            node_name=f"{namespace}-{node}",
            image="example.invalid/app:1",
        )
        await client.CoreV1Api(api).create_namespaced_pod(namespace, body)


@pytest.mark.usefixtures("operator")
async def test_bandwidth_allocated_follows_placements(
    api: client.ApiClient, namespace: str, nodes: dict[str, tuple[str, str]]
) -> None:
    await put_configmap(api, namespace, cm_data(namespace, {("n1", "n2"): "2", ("n1", "n3"): "30"}))
    await create_nt(api, namespace)
    await client.CustomObjectsApi(api).create_namespaced_custom_object(
        "appgroup.diktyo.x-k8s.io", "v1alpha1", namespace, "appgroups", shop("shop", "100Mi")
    )
    await wait_default_service_account(api, namespace)
    await place(api, namespace, "shop", [("web-0", "web", "n1"), ("db-0", "db", "n2"), ("db-1", "db", "n3")])
    core = client.CoreV1Api(api)

    def allocated(obj: dict[str, Any]) -> dict[tuple[str, str], Any]:
        return {pair: e.get("bandwidthAllocated") for pair, e in netperf_entries(obj, namespace).items()}

    async def booked() -> Any:
        got = allocated(await get_nt(api, namespace))
        return got if got.get(("z1", "z2")) == 104857600 else None

    got = await wait_for(booked, what="bandwidthAllocated")
    # web@z1 -> db@z2 within region r1, and web@r1 -> db@r2 across regions; nothing the other way.
    assert got[("r1", "r2")] == 104857600
    assert got[("z2", "z1")] == 0
    await core.delete_namespaced_pod("db-1", namespace, grace_period_seconds=0)

    async def released() -> Any:
        got = allocated(await get_nt(api, namespace))
        return got if got.get(("r1", "r2")) == 0 else None

    await wait_for(released, within=60, what="released bandwidth")


@pytest.mark.usefixtures("operator", "nodes")
async def test_an_appgroup_of_1e999999999_bits_is_reported_and_costs_go_on(
    api: client.ApiClient, kubectl: list[str], namespace: str
) -> None:
    """Issue 15 item 5: an AppGroup with minBandwidth 1e999999999 (accepted before the CRD had
    bounds) made every NetworkTopology reconcile fail, while the status said "ConfigMap not found"."""
    custom = client.CustomObjectsApi(api)
    huge = shop("huge", "1e999999999")
    probe = {**shop("probe", "1e999999999"), "metadata": {"name": "probe", "namespace": namespace}}
    with crd_without_bounds(kubectl, "appgroup.diktyo.x-k8s.io_appgroups.yaml", probe):
        await create_accepted(
            lambda: custom.create_namespaced_custom_object(  # type: ignore[no-any-return]
                "appgroup.diktyo.x-k8s.io", "v1alpha1", namespace, "appgroups", huge
            )
        )
    await custom.create_namespaced_custom_object(
        "appgroup.diktyo.x-k8s.io", "v1alpha1", namespace, "appgroups", shop("shop", "100Mi")
    )
    await wait_default_service_account(api, namespace)
    await place(api, namespace, "huge", [("huge-web-0", "web", "n1"), ("huge-db-0", "db", "n3")])
    await place(api, namespace, "shop", [("web-0", "web", "n1"), ("db-0", "db", "n2")])
    await put_configmap(api, namespace, cm_data(namespace, {("n1", "n2"): "2", ("n1", "n3"): "30"}))
    await create_nt(api, namespace)

    async def published() -> Any:
        obj = await get_nt(api, namespace)
        allocated = {pair: e.get("bandwidthAllocated") for pair, e in netperf_entries(obj, namespace).items()}
        settled = obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
        return obj if settled and allocated.get(("z1", "z2")) == 104857600 else None

    obj = await wait_for(published, within=60, what="NetperfCosts with the valid AppGroup's bandwidth")
    assert condition(obj, "Ready")["status"] == "True"
    assert netperf_entries(obj, namespace)[("r1", "r2")]["bandwidthAllocated"] == 0  # huge is left out

    async def reported() -> Any:
        body = await client.CustomObjectsApi(api).get_namespaced_custom_object(
            "appgroup.diktyo.x-k8s.io", "v1alpha1", namespace, "appgroups", "huge"
        )
        return body if condition(body, "Ready").get("reason") == "InvalidSpec" else None

    body = await wait_for(reported, within=30, what="the unreadable AppGroup's InvalidSpec condition")
    assert condition(body, "Ready")["message"] == (
        "invalid spec: spec.workloads[0].dependencies[0].minBandwidth: '1e999999999' is more than any machine "
        "has (at most 8Pi)"
    )
    assert body["spec"]["workloads"][0]["dependencies"][0]["minBandwidth"] == "1e999999999"  # never rewritten

    async def warned() -> Any:
        events = await client.CoreV1Api(api).list_namespaced_event(namespace, field_selector="involvedObject.name=huge")
        return [e for e in events.items if e.reason == "InvalidSpec"]

    await wait_for(warned, within=30, what="an InvalidSpec Event on the AppGroup")


@pytest.mark.usefixtures("operator", "nodes")
async def test_a_configmap_name_no_configmap_can_have_is_said_so(api: client.ApiClient, namespace: str) -> None:
    """Upstream's own example names netperfMetrics: the CRD takes it; the status says what is wrong."""
    body = networktopology_body("net", [user_weight(namespace)], configmap="netperfMetrics")
    await client.CustomObjectsApi(api).create_namespaced_custom_object(G, V, namespace, P, body)

    async def said() -> Any:
        obj = await get_nt(api, namespace)
        return obj if condition(obj, "Ready").get("reason") == "InvalidSpec" else None

    obj = await wait_for(said, what="InvalidSpec")
    assert "spec.configmapName 'netperfMetrics' is not a ConfigMap name" in condition(obj, "Ready")["message"]
    assert obj["spec"]["weights"] == [user_weight(namespace)]
