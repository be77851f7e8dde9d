"""The chart installed for real, as the README says (testkit.chart): on two real kubelet nodes,
hack/install-chart-local.sh imports the images `make images` built and runs `helm upgrade
--install` of charts/toposched with hack/chart-local-cluster.yaml. Every
component then runs as containers on those nodes: the exporter DaemonSet, the operator, schedhook
(the webhooks, two replicas) and the second kube-scheduler from the locally built image (two
replicas, each with the extender beside it, TLS).

Through the release only: the exporter's NRTs agree with the kubelets; a Guaranteed toposched pod
lands where its kubelet admits it (a fragmented node is avoided); an AppGroup's pods, created in
the wrong order, are gated and released in the operator's topology order; `helm upgrade` keeps
the certificates and the extender keeps working; `helm uninstall` leaves only the CRDs and the
user's objects.
"""

import asyncio
import json
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from testkit.builders import appgroup_body, member_labels
from testkit.chart import Release, on_new_nodes, run, tool
from testkit.cluster import wait_default_service_account, wait_for
from testkit.realnode import Topology, scheduled_pod, workload_pod
from testkit.realnode.exporter import nrt_differences
from toposched.apis.appgroup import AppGroup
from toposched.apis.constants import NUMA_ZONES_ANNOTATION, ORDER_GATE

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds", "real_nodes")]

REJECTIONS = ("TopologyAffinityError", "UnexpectedAdmissionError")


@pytest.fixture
async def release(kubeconfig: Path) -> AsyncIterator[Release]:
    tag = uuid.uuid4().hex[:6]
    async with on_new_nodes(kubeconfig, [f"chart-a-{tag}", f"chart-b-{tag}"], Topology.uniform(2, 4, "4Gi")) as release:
        yield release


async def pods_ready(api: client.ApiClient, release: Release, within: float) -> list[Any]:
    """Every pod of the release Ready: 2 exporters, the operator, 2 of schedhook (the webhooks) and
    2 of kube-scheduler (each with its extender beside it), one of each on each node."""
    return await release.pods_ready(
        api, [*["exporter"] * 2, "operator", *["schedhook"] * 2, *["scheduler"] * 2], within
    )


def metrics(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return str(answer.read().decode())


async def phase(api: client.ApiClient, namespace: str, name: str, within: float = 90) -> Any:
    core = client.CoreV1Api(api)

    async def decided() -> Any:
        pod = await core.read_namespaced_pod(name, namespace)
        return pod if pod.status.phase in ("Running", "Failed") else None

    return await wait_for(decided, within=within, what=f"pod {name} Running or Failed")


def secret_data(release: Release, name: str) -> dict[str, str]:
    out = run(tool("kubectl"), "get", "secret", name, "-n", release.namespace, "-o", "json",
              kubeconfig=release.kubeconfig)  # fmt: skip
    data: dict[str, str] = json.loads(out)["data"]
    return data


async def test_the_chart_runs_on_real_nodes(api: client.ApiClient, namespace: str, release: Release) -> None:
    try:
        await scenario(api, namespace, release)
    except BaseException:
        print(await asyncio.to_thread(release.debug, namespace))
        raise


async def scenario(api: client.ApiClient, namespace: str, release: Release) -> None:
    await installed_and_ready(api, release)
    await placed_where_the_kubelet_admits_it(api, namespace, release)
    await appgroup_released_in_order(api, namespace, release)
    await upgrade_keeps_the_certificates(api, namespace, release)
    await uninstall_leaves_the_crds_and_the_users_objects(api, namespace, release)


async def installed_and_ready(api: client.ApiClient, release: Release) -> None:
    """helm install: every pod Ready on the host network, without a restart, its metrics served, and
    each node's NRT, published by the DaemonSet's exporter, in agreement with its kubelet."""
    started = time.monotonic()
    await asyncio.to_thread(release.install)
    pods = await pods_ready(api, release, within=240)
    print(f"release Ready {time.monotonic() - started:.1f} s after helm install")
    assert all(p.spec.host_network for p in pods)
    exporters = {p.spec.node_name for p in pods if p.metadata.labels["app.kubernetes.io/component"] == "exporter"}
    assert exporters == {node.name for node in release.nodes}
    assert all(s.restart_count == 0 for p in pods for s in p.status.container_statuses), [
        (p.metadata.name, [s.restart_count for s in p.status.container_statuses]) for p in pods
    ]

    # The metrics endpoints answer, at the pod's (node's) address.
    ports = {"operator": 9090, "exporter": 9091, "schedhook": 9092}
    for pod in pods:
        port = ports.get(pod.metadata.labels["app.kubernetes.io/component"])
        if port:
            text = await asyncio.to_thread(metrics, f"http://{pod.status.pod_ip}:{port}/metrics")
            assert "# TYPE" in text, pod.metadata.name
    await wait_for(partial(nrts_agree, release), within=60, what="the NRTs to agree with the kubelets")


async def nrts_agree(release: Release) -> bool:
    return not any([await asyncio.to_thread(nrt_differences, node) for node in release.nodes])


async def placed_where_the_kubelet_admits_it(api: client.ApiClient, namespace: str, release: Release) -> None:
    """Fragment a (zones keep 1 and 2 free CPUs), fill b's zone 0 (zone 1 keeps 4): a 3-CPU pod
    fits a's totals, but only b's zone 1 can admit it."""
    core = client.CoreV1Api(api)
    a, b = release.nodes
    await wait_default_service_account(api, namespace)
    for name, node, cpu in (("frag-a", a, 2), ("frag-b", a, 2), ("fill", b, 3)):
        await core.create_namespaced_pod(namespace, workload_pod(name, node=node.name, cpu=cpu, memory="256Mi"))
        assert (await phase(api, namespace, name)).status.phase == "Running"
    await wait_for(partial(nrts_agree, release), within=60, what="the NRTs to show the fragmentation")

    names = [a.name, b.name]
    await core.create_namespaced_pod(namespace, scheduled_pod("placed", 3, "toposched", names, prefer=a.name))
    placed = await phase(api, namespace, "placed")
    assert placed.status.phase == "Running", (placed.status.reason, placed.status.message)
    assert placed.spec.node_name == b.name
    predicted = json.loads(placed.metadata.annotations[NUMA_ZONES_ANNOTATION])
    assert b.numa_zones(b.assigned_cpus(placed.metadata.uid)["app"]) == predicted == ["node-1"]


async def appgroup_released_in_order(api: client.ApiClient, namespace: str, release: Release) -> None:
    """The release's operator writes an AppGroup's order, its webhook gates the pods (created in the
    wrong order), its gate controller releases them in that order."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    where = (AppGroup.GROUP, AppGroup.VERSION, namespace, AppGroup.PLURAL)
    await custom.create_namespaced_custom_object(
        *where, appgroup_body("shop", {"frontend": ["backend"], "backend": []})
    )

    async def ordered() -> list[str] | None:
        group = await custom.get_namespaced_custom_object(*where, "shop")
        order = (group.get("status") or {}).get("topologyOrder") or []
        return [o["workload"]["selector"] for o in sorted(order, key=lambda o: o["index"])] or None

    order = await wait_for(ordered, within=30, what="the AppGroup's topologyOrder")
    for workload in reversed(order):
        body = scheduled_pod(f"{workload}-0", 1, "toposched", [node.name for node in release.nodes])
        body["metadata"]["labels"] = member_labels("shop", workload)
        created = await core.create_namespaced_pod(namespace, body)
        assert [g.name for g in created.spec.scheduling_gates or []] == [ORDER_GATE]
        await asyncio.sleep(1.1)  # PodScheduled times have whole seconds
    members = [await phase(api, namespace, f"{w}-0") for w in order]
    assert [m.status.phase for m in members] == ["Running", "Running"]

    def scheduled_at(pod: Any) -> Any:
        return next(c.last_transition_time for c in pod.status.conditions if c.type == "PodScheduled")

    assert scheduled_at(members[0]) <= scheduled_at(members[1]), order


async def upgrade_keeps_the_certificates(api: client.ApiClient, namespace: str, release: Release) -> None:
    """helm upgrade: the certificates are kept, and the new pods serve with them."""
    core = client.CoreV1Api(api)
    tls = secret_data(release, "toposched-schedhook-tls"), secret_data(release, "toposched-scheduler-tls")
    await asyncio.to_thread(release.install, "--set", "schedhook.orderWait=20")
    assert (secret_data(release, "toposched-schedhook-tls"), secret_data(release, "toposched-scheduler-tls")) == tls

    async def rolled() -> bool:
        deployment = await client.AppsV1Api(api).read_namespaced_deployment("toposched-schedhook", release.namespace)
        wanted = deployment.spec.replicas
        return bool(deployment.status.updated_replicas == wanted and deployment.status.ready_replicas == wanted)

    await wait_for(rolled, within=120, what="schedhook rolled out after the upgrade")
    await pods_ready(api, release, within=120)
    for name in ("frag-a", "frag-b"):  # room for one more
        await core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    names = [node.name for node in release.nodes]
    await core.create_namespaced_pod(namespace, scheduled_pod("after-upgrade", 1, "toposched", names))
    assert (await phase(api, namespace, "after-upgrade")).status.phase == "Running"


async def uninstall_leaves_the_crds_and_the_users_objects(
    api: client.ApiClient, namespace: str, release: Release
) -> None:
    """helm uninstall: nothing of the release is left; the CRDs and the user's objects stay."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    await asyncio.to_thread(release.helm, "uninstall", "--wait", "--timeout", "120s")

    async def pods_gone() -> bool:  # the garbage collector deletes them after their ReplicaSets
        return not (await core.list_namespaced_pod(release.namespace)).items

    await wait_for(pods_gone, within=60, what="the release's pods deleted")
    left = run(
        tool("kubectl"),
        "get",
        "clusterroles,clusterrolebindings,mutatingwebhookconfigurations,validatingwebhookconfigurations,"
        "rolebindings,roles,deployments,daemonsets,services,secrets,serviceaccounts,configmaps,"
        "networkpolicies,validatingadmissionpolicies,validatingadmissionpolicybindings,pods",
        "-A",
        "-l",
        f"app.kubernetes.io/instance={release.name}",
        "-o",
        "name",
        kubeconfig=release.kubeconfig,
    )
    assert left.strip() == ""
    assert await custom.get_namespaced_custom_object(
        AppGroup.GROUP, AppGroup.VERSION, namespace, AppGroup.PLURAL, "shop"
    )
    assert (await core.read_namespaced_pod("placed", namespace)).status.phase == "Running"
