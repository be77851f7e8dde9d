"""End to end: the real kube-scheduler with the toposched profile calling our extender."""

import asyncio
import base64
import json
import os
import ssl
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from testkit.builders import KWOK_TOLERATION, Figures, appgroup_body, member_labels, nrt_body, pod_body, topology_order
from testkit.certs import ExtenderPKI, KeyPair
from testkit.cluster import (
    crd_without_bounds,
    create_accepted,
    ensure_kwok_node,
    free_port,
    wait_default_service_account,
    wait_for,
)
from testkit.extender import REFUSED, call, client_context, ready, scheduler_config
from testkit.paths import EXAMPLES, REPO
from toposched.apis.appgroup import AppGroup
from toposched.apis.constants import REGION_LABEL, ZONE_LABEL
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.operators.appgroup.toposort import sort_spec

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds")]

NRTS = (NodeResourceTopology.GROUP, NodeResourceTopology.VERSION, NodeResourceTopology.PLURAL)


@pytest.fixture(scope="module")
def extender_and_scheduler(
    kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory, pki: ExtenderPKI
) -> Iterator[Path]:
    """``toposched schedhook`` and a second, real kube-scheduler with the toposched profile."""
    work = tmp_path_factory.mktemp("sched")
    port, webhook_port = free_port(), free_port()
    (work / "port").write_text(str(port))
    (work / "webhook-port").write_text(str(webhook_port))
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    (work / "config.yaml").write_text(scheduler_config(kubeconfig, port, pki))
    bin_dir = subprocess.run(
        [str(REPO / "hack" / "build-binaries.sh"), "--print"], check=True, capture_output=True, text=True
    ).stdout.strip()
    commands = {
        "extender": [
            *(sys.executable, "-m", "toposched", "schedhook", "--port", str(port), "--metrics-port", "0"),
            *("--address", "127.0.0.1", "--reservation-timeout", "300", "--order-wait", "20"),
            *("--webhook-port", str(webhook_port), "--tls-cert", str(pki.serving.cert)),
            *("--tls-key", str(pki.serving.key), "--route-label", "toposched-webhook=on"),
            *("--extender-client-ca", str(pki.ca)),
        ],
        "scheduler": [f"{bin_dir}/kube-scheduler", f"--config={work / 'config.yaml'}", "--secure-port=0", "-v=2"],
    }
    procs = []
    for name, command in commands.items():
        with (work / f"{name}.log").open("wb") as log:
            procs.append(subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT))
    yield work
    for proc in procs:
        proc.terminate()
        proc.wait(15)
    print((work / "extender.log").read_text()[-3000:])


def nrt(name: str, available: tuple[int, int], owner_uid: str) -> dict[str, Any]:
    """Two zones of 16 CPUs and 60 GiB, ``available`` CPUs free on each; owned by the node."""
    zones: list[dict[str, Figures]] = [{"cpu": (16, 16, cpu), "memory": ("64Gi", "60Gi", "60Gi")} for cpu in available]
    return nrt_body(name, zones, owner_uid=owner_uid)


@pytest.fixture
async def nodes(api: client.ApiClient) -> AsyncIterator[dict[str, str]]:
    """Two kwok nodes: 'narrow' has 4 + 3 CPUs free per NUMA zone, 'wide' 2 + 8."""
    tag = uuid.uuid4().hex[:6]
    names = {"narrow": f"narrow-{tag}", "wide": f"wide-{tag}"}
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    for short, name in names.items():
        await ensure_kwok_node(api, name, {"toposched-test": tag})
        uid = (await core.read_node(name)).metadata.uid
        body = nrt(name, (4, 3) if short == "narrow" else (2, 8), uid)
        await custom.create_cluster_custom_object(*NRTS, body)
    yield names
    for name in names.values():
        await core.delete_node(name)


def guaranteed(name: str, cpu: int | str, node_selector: dict[str, str], **fields: Any) -> dict[str, Any]:
    """A Guaranteed pod (``cpu`` CPUs, 1 GiB) for toposched on kwok nodes; ``fields`` as pod_body takes them."""
    defaults = {"scheduler": "toposched", "tolerations": [KWOK_TOLERATION], "image": "example.invalid/app:1"}
    return pod_body(name, cpu=cpu, memory="1Gi", node_selector=node_selector, **(defaults | fields))


def routed_member(name: str, appgroup: str, workload: str, tag: str) -> dict[str, Any]:
    """A Guaranteed pod of an AppGroup workload without a schedulerName: the webhook routes it."""
    labels = {"toposched-webhook": "on", **member_labels(appgroup, workload)}
    return guaranteed(name, 1, {"toposched-test": tag}, scheduler=None, labels=labels)


async def bound_node(api: client.ApiClient, namespace: str, name: str) -> Any:
    pod = await client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    return pod if pod.spec.node_name else None


@pytest.mark.usefixtures("extender_and_scheduler")
async def test_pods_land_where_the_kubelet_admits_them_and_bursts_spread(
    api: client.ApiClient, namespace: str, nodes: dict[str, str]
) -> None:
    await wait_default_service_account(api, namespace)
    core = client.CoreV1Api(api)
    selector = {"toposched-test": nodes["narrow"].split("-")[1]}
    # 6 CPUs on one NUMA zone: only 'wide' (8 free on node-1) can admit it.
    await core.create_namespaced_pod(namespace, guaranteed("six", 6, selector))
    pod = await wait_for(lambda: bound_node(api, namespace, "six"), within=60, what="pod six bound")
    assert pod.spec.node_name == nodes["wide"]
    assert json.loads(pod.metadata.annotations["toposched.io/numa-zones"]) == ["node-1"]

    # 7 CPUs now fits nowhere: wide's node-1 is reserved for 'six' although its NRT did not change.
    await core.create_namespaced_pod(namespace, guaranteed("seven", 7, selector))

    async def failed_scheduling() -> Any:
        events = await core.list_namespaced_event(namespace, field_selector="involvedObject.name=seven")
        return [e.message for e in events.items if e.reason == "FailedScheduling"]

    messages = await wait_for(failed_scheduling, within=60, what="FailedScheduling for seven")
    assert any("toposched: cannot align container app on one NUMA zone: cpu 7 requested" in m for m in messages), (
        messages
    )
    assert (await core.read_namespaced_pod("seven", namespace)).spec.node_name is None

    # Two 3-CPU pods at once: the reservations spread them over different zones.
    for name in ("burst-a", "burst-b"):
        await core.create_namespaced_pod(namespace, guaranteed(name, 3, selector))
    placed = []
    for name in ("burst-a", "burst-b"):
        pod = await wait_for(partial(bound_node, api, namespace, name), within=60, what=f"{name} bound")
        placed.append((pod.spec.node_name, pod.metadata.annotations["toposched.io/numa-zones"]))
    assert len(set(placed)) == 2, placed


def anyone(pki: ExtenderPKI, identity: KeyPair | None) -> ssl.SSLContext:
    """A caller that trusts the extender's certificate and presents ``identity`` (or none)."""
    context = ssl.create_default_context(cafile=str(pki.ca))
    if identity is not None:
        context.load_cert_chain(identity.cert, identity.key)
    return context


async def test_only_the_schedulers_certificate_reaches_the_extender(
    api: client.ApiClient, namespace: str, extender_and_scheduler: Path, pki: ExtenderPKI
) -> None:
    """The issue's reproduction: a pod no scheduler handles, bound by a direct POST /bind to a node."""
    await wait_default_service_account(api, namespace)
    core = client.CoreV1Api(api)
    port = int((extender_and_scheduler / "port").read_text())
    await wait_for(lambda: asyncio.to_thread(ready, port, pki), within=60, what="the extender ready")
    node = f"target-{uuid.uuid4().hex[:6]}"
    await ensure_kwok_node(api, node)
    try:
        created = await core.create_namespaced_pod(namespace, guaranteed("stray", 1, {}, scheduler="nobody"))
        bind = {"PodName": "stray", "PodNamespace": namespace, "PodUID": created.metadata.uid, "Node": node}
        args = {"Pod": api.sanitize_for_serialization(created), "NodeNames": [node]}
        callers: dict[str, ssl.SSLContext | None] = {
            "plain HTTP": None,
            "no certificate": anyone(pki, None),
            "the CA's certificate for another name": anyone(pki, pki.impostor),
            "kube-scheduler's name from another CA": anyone(pki, pki.stranger),
        }
        for who, context in callers.items():
            for verb, body in (("/filter", args), ("/prioritize", args), ("/bind", bind)):
                status, text = await call(port, verb, body, context)
                print(f"{who} {verb}: {status} {text}")
                assert status in (401, 403, REFUSED), (who, verb, status, text)
        await asyncio.sleep(1)
        assert (await core.read_namespaced_pod("stray", namespace)).spec.node_name is None

        # The same requests with kube-scheduler's certificate are served.
        scheduler = client_context(pki)
        status, text = await call(port, "/filter", args, scheduler)
        assert status == 200
        assert json.loads(text)["NodeNames"] == [node]
        status, text = await call(port, "/prioritize", args, scheduler)
        assert status == 200
        assert [p["Host"] for p in json.loads(text)] == [node]
        status, text = await call(port, "/bind", bind, scheduler)
        assert (status, json.loads(text)) == (200, {"Error": ""})
        assert (await core.read_namespaced_pod("stray", namespace)).spec.node_name == node
        # A bind the apiserver refuses (the pod is bound already) is an error for kube-scheduler,
        # not a success (the client raises nothing for an answer it does not preload).
        status, text = await call(port, "/bind", {**bind, "Node": f"{node}-other"}, scheduler)
        assert status == 200
        error = json.loads(text)["Error"]
        assert "409" in error, text
        assert "already assigned" in error, text
    finally:
        await core.delete_node(node)


@pytest.fixture
async def webhooks(
    api: client.ApiClient, namespace: str, extender_and_scheduler: Path, pki: ExtenderPKI
) -> AsyncIterator[None]:
    """Webhook configurations aimed at the test's schedhook, limited to this test's objects."""
    work = extender_and_scheduler
    port = int((work / "webhook-port").read_text())
    ca = base64.b64encode(pki.ca.read_bytes()).decode()
    name = f"toposched-test-{namespace}"
    await client.CoreV1Api(api).patch_namespace(namespace, {"metadata": {"labels": {"toposched-webhook": "on"}}})

    def hook(path: str, resources: list[dict[str, Any]], selector: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": f"{path.strip('/')}.toposched.io",
            "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca},
            "rules": resources,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "timeoutSeconds": 5,
            **selector,
        }

    pods = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]
    appgroups = [
        {
            "apiGroups": ["appgroup.diktyo.x-k8s.io"],
            "apiVersions": ["v1alpha1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["appgroups"],
        }
    ]
    by_label = {"objectSelector": {"matchLabels": {"toposched-webhook": "on"}}}
    by_namespace = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}
    admission = client.AdmissionregistrationV1Api(api)
    await admission.create_mutating_webhook_configuration(
        {"metadata": {"name": name}, "webhooks": [hook("/mutate-pods", pods, by_label)]}
    )
    await admission.create_validating_webhook_configuration(
        {
            "metadata": {"name": name},
            "webhooks": [hook("/validate-pods", pods, by_label), hook("/validate-appgroups", appgroups, by_namespace)],
        }
    )
    await asyncio.sleep(1)  # the apiserver picks up new configurations asynchronously
    yield
    await admission.delete_mutating_webhook_configuration(name)
    await admission.delete_validating_webhook_configuration(name)


def chain_appgroup(second_dep: str = "first") -> dict[str, Any]:
    """second depends on ``second_dep``, which is not a workload unless it is "first"."""
    return appgroup_body("chain", {"second": [second_dep], "first": []})


async def create_ordered_appgroup(
    api: client.ApiClient, namespace: str, body: dict[str, Any], order: list[str]
) -> None:
    """The AppGroup, and the status.topologyOrder an operator would write for it (none runs here)."""
    custom = client.CustomObjectsApi(api)
    where = (AppGroup.GROUP, AppGroup.VERSION, namespace, AppGroup.PLURAL)
    await custom.create_namespaced_custom_object(*where, body)
    await custom.patch_namespaced_custom_object_status(
        *where,
        body["metadata"]["name"],
        {"status": {"topologyOrder": topology_order(order)}},
        _content_type="application/merge-patch+json",
    )
    await asyncio.sleep(1)  # the extender's cache sees the AppGroup and its order


def scheduled_at(pod: Any) -> Any:
    """When kube-scheduler bound the pod: its PodScheduled condition's transition."""
    return next(
        c.last_transition_time for c in pod.status.conditions if c.type == "PodScheduled" and c.status == "True"
    )


@pytest.mark.usefixtures("webhooks")
async def test_webhooks_validate_route_and_release_in_order(
    api: client.ApiClient, namespace: str, nodes: dict[str, str]
) -> None:
    await wait_default_service_account(api, namespace)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    tag = nodes["narrow"].split("-")[1]

    spec = {"scheduling.koordinator.sh/numa-topology-spec": '{"numaTopologyPolicy": "Single"}'}
    bad = guaranteed("bad", 1, {"toposched-test": tag}, labels={"toposched-webhook": "on"}, annotations=spec)
    with pytest.raises(client.ApiException) as info:
        await core.create_namespaced_pod(namespace, bad)
    assert "numaTopologyPolicy 'Single' is not one of" in info.value.body

    with pytest.raises(client.ApiException) as info:
        await custom.create_namespaced_custom_object(
            AppGroup.GROUP, AppGroup.VERSION, namespace, AppGroup.PLURAL, chain_appgroup("ghost")
        )
    assert "no workload has selector 'ghost'" in info.value.body

    # A valid AppGroup whose order says: first, then second.
    await create_ordered_appgroup(api, namespace, chain_appgroup(), ["first", "second"])

    # Created in the wrong order, without a schedulerName: routed by label, gated, released in order.
    for workload in ("second", "first"):
        created = await core.create_namespaced_pod(namespace, routed_member(f"{workload}-0", "chain", workload, tag))
        assert created.spec.scheduler_name == "toposched"
        assert [g.name for g in created.spec.scheduling_gates] == ["toposched.io/topology-order"]
        await asyncio.sleep(0.5)

    first = await wait_for(lambda: bound_node(api, namespace, "first-0"), within=30, what="first-0 bound")
    second = await wait_for(lambda: bound_node(api, namespace, "second-0"), within=30, what="second-0 bound")
    assert scheduled_at(first) <= scheduled_at(second)


async def test_topology_affinity_errors_are_handed_back_to_their_controller(
    api: client.ApiClient, namespace: str, extender_and_scheduler: Path
) -> None:
    await wait_default_service_account(api, namespace)
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    nowhere = {"toposched-test": "nowhere"}  # never scheduled: the status we write stays as written
    template = {
        "metadata": {"labels": {"app": "owned"}},
        "spec": {"nodeSelector": nowhere, "containers": [{"name": "c", "image": "example.invalid/c:1"}]},
    }
    await apps.create_namespaced_replica_set(
        namespace,
        {
            "metadata": {"name": "owner"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "owned"}}, "template": template},
        },
    )

    async def owned_pod() -> Any:
        pods = await core.list_namespaced_pod(namespace, label_selector="app=owned")
        return pods.items[0].metadata.name if pods.items else None

    owned = await wait_for(owned_pod, what="the ReplicaSet's pod")
    await core.create_namespaced_pod(namespace, {"metadata": {"name": "standalone"}, "spec": template["spec"]})
    failed = {"status": {"phase": "Failed", "reason": "TopologyAffinityError", "message": "cannot align"}}
    for name in (owned, "standalone"):
        await core.patch_namespaced_pod_status(name, namespace, failed)

    async def owned_gone() -> bool:
        pods = await core.list_namespaced_pod(namespace)
        return owned not in [p.metadata.name for p in pods.items]

    await wait_for(owned_gone, within=30, what="the owned failed pod deleted")

    async def standalone_event() -> Any:
        events = await core.list_namespaced_event(namespace, field_selector="involvedObject.name=standalone")
        return [e for e in events.items if e.reason == "TopologyAffinityRemediation"]

    await wait_for(standalone_event, within=30, what="an Event on the standalone pod")
    assert (await core.read_namespaced_pod("standalone", namespace)).status.phase == "Failed"


@pytest.fixture
async def regions(api: client.ApiClient) -> AsyncIterator[tuple[str, dict[str, tuple[str, str]]]]:
    """Two regions x two zones x two kwok nodes, labelled for this test alone: (tag, {node: (region, zone)})."""
    tag = uuid.uuid4().hex[:6]
    where: dict[str, tuple[str, str]] = {}
    try:
        for region in ("r1", "r2"):
            for zone in (f"{region}-a", f"{region}-b"):
                for i in range(2):
                    name = f"ob-{tag}-{zone}-{i}"
                    labels = {"toposched-test": tag, REGION_LABEL: f"{tag}-{region}", ZONE_LABEL: f"{tag}-{zone}"}
                    await ensure_kwok_node(api, name, labels)
                    where[name] = (region, zone)
        yield tag, where
    finally:
        for name in where:
            await client.CoreV1Api(api).delete_node(name)


def regional_costs(namespace: str, tag: str) -> dict[str, Any]:
    """The example NetworkTopology with user-defined costs for the regions' nodes: 50 between the
    regions, 5 between the zones of one region."""
    topology: dict[str, Any] = yaml.safe_load((EXAMPLES / "networktopology.yaml").read_text())
    costs: dict[str, tuple[dict[str, list[str]], int]] = {
        REGION_LABEL: ({"r1": ["r2"], "r2": ["r1"]}, 50),
        ZONE_LABEL: ({"r1-a": ["r1-b"], "r1-b": ["r1-a"], "r2-a": ["r2-b"], "r2-b": ["r2-a"]}, 5),
    }

    def origin(name: str, targets: list[str], cost: int) -> dict[str, Any]:
        return {
            "origin": f"{tag}-{name}",
            "costList": [{"destination": f"{tag}-{d}", "networkCost": cost} for d in targets],
        }

    topology_list = [
        {"topologyKey": key, "originList": [origin(o, targets, cost) for o, targets in pairs.items()]}
        for key, (pairs, cost) in costs.items()
    ]
    topology["metadata"] = {"name": "ob", "namespace": namespace}
    topology["spec"]["weights"] = [{"name": "UserDefined", "topologyList": topology_list}]
    return topology


def edges_leaving_their_zone(appgroup: dict[str, Any], placed: dict[str, tuple[str, str]]) -> list[tuple[str, str]]:
    """The dependencies between pods in different zones; each one within its maxNetworkCost."""

    def cost(a: str, b: str) -> int:
        (region_a, zone_a), (region_b, zone_b) = placed[a], placed[b]
        return 1 if zone_a == zone_b else 5 if region_a == region_b else 50

    outside = []
    for item in appgroup["spec"]["workloads"]:
        for dep in item.get("dependencies") or []:
            source, target = item["workload"]["selector"], dep["workload"]["selector"]
            assert cost(source, target) <= dep["maxNetworkCost"], placed
            if cost(source, target) > 1:
                outside.append((source, target))
    return outside


@pytest.mark.usefixtures("webhooks")
async def test_online_boutique_is_released_in_order_and_lands_near_its_dependencies(
    api: client.ApiClient, namespace: str, regions: tuple[str, dict[str, tuple[str, str]]]
) -> None:
    """Two regions x two zones of kwok nodes with costs; the pods, created all at once in reverse
    order, are gated, released in topology order and placed next to the workloads they talk to."""
    await wait_default_service_account(api, namespace)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    tag, where = regions
    topology = regional_costs(namespace, tag)
    await custom.create_namespaced_custom_object(
        NetworkTopology.GROUP, NetworkTopology.VERSION, namespace, NetworkTopology.PLURAL, topology
    )
    boutique = yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text())
    order = sort_spec(AppGroup.model_validate(boutique).spec).order
    await create_ordered_appgroup(api, namespace, boutique, order)  # the costs are in the cache by then too

    for workload in reversed(order):
        body = routed_member(workload, "online-boutique", workload, tag)
        created = await core.create_namespaced_pod(namespace, body)
        assert [g.name for g in created.spec.scheduling_gates] == ["toposched.io/topology-order"]

    async def all_bound() -> dict[str, Any] | None:
        pods = {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}
        return pods if len(pods) == len(order) and all(p.spec.node_name for p in pods.values()) else None

    pods = await wait_for(all_bound, within=120, what="every Online Boutique pod bound")
    scheduled = {name: scheduled_at(p) for name, p in pods.items()}
    assert [scheduled[w] for w in order] == sorted(scheduled[w] for w in order), scheduled

    # Every dependency within its maxNetworkCost, and nearly all inside one zone. (Not all: the
    # order places redis-cart before any pod that talks to it, so it may land apart, and
    # cartservice then ties between the frontend's zone and redis-cart's.) At random, about
    # three quarters of the 15 edges would leave their zone.
    placed = {name: where[p.spec.node_name] for name, p in pods.items()}
    outside = edges_leaving_their_zone(boutique, placed)
    assert len(outside) <= 3, (outside, placed)


async def filter_call(
    work: Path, pki: ExtenderPKI, pod: dict[str, Any], names: list[str]
) -> tuple[int | str, dict[str, Any]]:
    """POST /filter to the running extender, as kube-scheduler does (once it is ready)."""
    port = int((work / "port").read_text())
    await wait_for(lambda: asyncio.to_thread(ready, port, pki), within=60, what="the extender ready")
    status, text = await call(port, "/filter", {"Pod": pod, "NodeNames": names}, client_context(pki))
    return status, json.loads(text) if status == 200 else {"text": text}


def unbounded_nrt(name: str, owner_uid: str) -> dict[str, Any]:
    """An NRT the CRD took before it had bounds: every quantity of zone node-0 is 1e999999."""
    body = nrt(name, (8, 8), owner_uid)
    for resource in body["zones"][0]["resources"]:
        resource.update(capacity="1e999999", allocatable="1e999999", available="1e999999")
    return body


async def publish_nrts(api: client.ApiClient, kubectl: list[str], good: list[str], bad: str, tag: str) -> None:
    """NRTs of the good nodes, and the bad node's :func:`unbounded_nrt`, written while the CRD
    has no bounds (as clusters had it before them)."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    for name in good:
        uid = (await core.read_node(name)).metadata.uid
        await custom.create_cluster_custom_object(*NRTS, nrt(name, (4, 8), uid))
    uid = (await core.read_node(bad)).metadata.uid
    probe = unbounded_nrt(f"probe-{tag}", uid)
    with crd_without_bounds(kubectl, "topology.node.k8s.io_noderesourcetopologies.yaml", probe):
        await create_accepted(lambda: custom.create_cluster_custom_object(*NRTS, unbounded_nrt(bad, uid)))


async def test_an_nrt_of_1e999999_fails_only_its_node_with_the_reason(
    api: client.ApiClient, kubectl: list[str], namespace: str, extender_and_scheduler: Path, pki: ExtenderPKI
) -> None:
    """Issue 15 item 4: such an NRT made every /filter answer 500, stopping all toposched scheduling."""
    await wait_default_service_account(api, namespace)
    core = client.CoreV1Api(api)
    tag = uuid.uuid4().hex[:6]
    names = [f"good-a-{tag}", f"good-b-{tag}", f"bad-{tag}"]
    for name in names:
        await ensure_kwok_node(api, name, {"toposched-test": tag})
    try:
        await publish_nrts(api, kubectl, names[:2], names[2], tag)
        pod = guaranteed("p", 2, {"toposched-test": tag}, namespace=namespace, uid=f"u-{tag}")

        async def answered() -> Any:
            status, answer = await filter_call(extender_and_scheduler, pki, pod, names)
            assert status == 200, answer  # before: 500 for every pod
            return answer if names[2] in answer["FailedNodes"] else None

        answer = await wait_for(answered, within=30, what="the extender's answer about the bad node")
        assert answer["Error"] == ""
        assert sorted(answer["NodeNames"]) == sorted(names[:2])
        assert answer["FailedNodes"][names[2]].startswith(
            f"toposched: invalid NodeResourceTopology {names[2]}: zones[0].resources[0].capacity: "
            "'1e999999' is more than any machine has (at most 8Pi)"
        )

        # End to end: a pod binds to a good node, and the bad NRT has a Warning Event saying why.
        await core.create_namespaced_pod(namespace, guaranteed("placed", 6, {"toposched-test": tag}))
        bound = await wait_for(lambda: bound_node(api, namespace, "placed"), within=60, what="pod bound")
        assert bound.spec.node_name in names[:2]

        async def warned() -> Any:
            events = await core.list_namespaced_event("default", field_selector=f"involvedObject.name={names[2]}")
            return [e.message for e in events.items if e.reason == "InvalidObject"]

        (message, *_) = await wait_for(warned, within=30, what="an InvalidObject Event on the bad NRT")
        assert "NodeResourceTopology ignored by the scheduler extender: zones[0].resources[0].capacity" in message
    finally:
        for name in names:
            await core.delete_node(name)


async def test_a_pod_asking_for_1e999999_cpus_gets_a_reason_not_a_500(
    api: client.ApiClient, namespace: str, nodes: dict[str, str], extender_and_scheduler: Path, pki: ExtenderPKI
) -> None:
    """Issue 15 item 6: the apiserver accepts cpu 1e999999; the extender answered such a pod 500."""
    await wait_default_service_account(api, namespace)
    core = client.CoreV1Api(api)
    body = guaranteed("greedy", "1e999999", {"toposched-test": nodes["narrow"].split("-")[1]})
    await core.create_namespaced_pod(namespace, body)
    response = await core.read_namespaced_pod("greedy", namespace, _preload_content=False)
    stored = json.loads(await response.read())  # the pod exactly as kube-scheduler sends it
    assert stored["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "1e999999"
    status, answer = await filter_call(extender_and_scheduler, pki, stored, list(nodes.values()))
    assert status == 200
    assert answer["Error"] == (  # the apiserver copied the limits to the requests, read first
        "toposched: invalid pod: spec.containers[0].resources.requests.cpu: "
        "'1e999999' is more than any machine has (at most 8Pi)"
    )
    assert answer["NodeNames"] == []

    # The extender goes on answering the others.
    good = guaranteed("fine", 2, {}, namespace=namespace, uid="u-fine")
    status, answer = await filter_call(extender_and_scheduler, pki, good, list(nodes.values()))
    assert (status, answer["Error"]) == (200, "")
    assert sorted(answer["NodeNames"]) == sorted(nodes.values())
