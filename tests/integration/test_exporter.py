"""The exporter against the local control plane, with a fake kubelet serving real gRPC."""

import asyncio
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from testkit.cluster import ensure_kwok_node, free_port, wait_for
from testkit.paths import REPO
from testkit.podresources import FakeKubelet
from testkit.sysfs import two_socket, write
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.apis.quantity import parse_quantity
from toposched.exporter.kubeletconfig import KubeletConfig
from toposched.exporter.podresources._generated import api_pb2
from toposched.exporter.publisher import NodeGoneError, Publisher
from toposched.exporter.sysfs import read_machine
from toposched.exporter.topology import Inputs, build
from toposched.kube.nodeclient import KubeAPI

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds")]

G, V, P = NodeResourceTopology.GROUP, NodeResourceTopology.VERSION, NodeResourceTopology.PLURAL


@pytest.fixture
async def node(api: client.ApiClient) -> AsyncIterator[str]:
    name = f"nrt-{uuid.uuid4().hex[:8]}"
    await ensure_kwok_node(api, name)
    yield name
    try:
        await client.CoreV1Api(api).delete_node(name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise


async def get_nrt(api: client.ApiClient, name: str) -> dict[str, Any] | None:
    try:
        result: dict[str, Any] = await client.CustomObjectsApi(api).get_cluster_custom_object(G, V, P, name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return result


def nrt_for(tmp_path: Path, node: str, owner: dict[str, str], reserved: str = "") -> NodeResourceTopology:
    kubelet = KubeletConfig(reserved_system_cpus=tuple(int(c) for c in reserved.split(",") if c))
    return build(Inputs(node, read_machine(two_socket(tmp_path)), kubelet, owner=owner))


@pytest.fixture
async def kubeapi(kubeconfig: Path) -> AsyncIterator[KubeAPI]:
    async with KubeAPI.from_kubeconfig(kubeconfig) as api:
        yield api


async def test_create_update_unchanged_conflict_and_node_deletion(
    api: client.ApiClient, kubeapi: KubeAPI, node: str, tmp_path: Path
) -> None:
    publisher = Publisher(kubeapi, node)
    owner = await publisher.owner()
    assert await publisher.publish(nrt_for(tmp_path, node, owner)) is True
    stored = await get_nrt(api, node)
    assert stored is not None
    assert stored["metadata"]["ownerReferences"][0]["uid"] == owner["uid"]
    assert [z["name"] for z in stored["zones"]] == ["node-0", "node-1"]

    # Unchanged -> no write.
    assert await publisher.publish(nrt_for(tmp_path, node, owner)) is False
    assert (await get_nrt(api, node))["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]  # type: ignore[index]

    # Someone else labels it; our update keeps their label.
    await client.CustomObjectsApi(api).patch_cluster_custom_object(
        G, V, P, node, {"metadata": {"labels": {"team": "infra"}}}, _content_type="application/merge-patch+json"
    )
    assert await publisher.publish(nrt_for(tmp_path, node, owner, reserved="0,1")) is True
    updated = await get_nrt(api, node)
    assert updated is not None
    assert updated["metadata"]["labels"] == {"team": "infra"}
    cpu = next(r for r in updated["zones"][0]["resources"] if r["name"] == "cpu")
    assert cpu["allocatable"] == "30"

    # Two writers at once: both finish (the loser re-reads after its 409), the result is one of theirs.
    rivals = [Publisher(kubeapi, node), Publisher(kubeapi, node)]
    contents = [nrt_for(tmp_path / "a", node, owner, "0"), nrt_for(tmp_path / "b", node, owner, "0,1,2")]
    await asyncio.gather(*(p.publish(c) for p, c in zip(rivals, contents, strict=True)))
    final = await get_nrt(api, node)
    assert final is not None
    assert final["zones"] in [c.to_dict()["zones"] for c in contents]

    # The NIC capacity as the node's extended resource.
    await publisher.advertise_bandwidth(25 * 10**9)
    status = (await client.CoreV1Api(api).read_node(node)).status
    assert parse_quantity(status.capacity["network.aware.com/bandwidth"]) == 25 * 10**9
    assert parse_quantity(status.allocatable["network.aware.com/bandwidth"]) == 25 * 10**9

    # The node goes: the NRT is garbage-collected with it, and the publisher says why it stops.
    await client.CoreV1Api(api).delete_node(node)

    async def collected() -> bool:
        return await get_nrt(api, node) is None

    await wait_for(collected, within=60, what="NRT garbage-collected with its node")
    with pytest.raises(NodeGoneError):
        await publisher.owner()


async def http_get(port: int, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\n\r\n".encode())
    answer = await reader.read()
    writer.close()
    await writer.wait_closed()
    return answer


@pytest.fixture
async def daemon(node: str, kubeconfig: Path, kubelet: FakeKubelet, tmp_path: Path) -> AsyncIterator[int]:
    """``toposched exporter`` for ``node`` on a two-socket machine with the static CPU manager,
    reading the fake kubelet: its health port."""
    state = tmp_path / "kubelet"
    write(state / "cpu_manager_state", "{}")
    config = tmp_path / "config.yaml"
    config.write_text("kind: KubeletConfiguration\ncpuManagerPolicy: static\ntopologyManagerPolicy: single-numa-node\n")
    health = free_port()
    log = tmp_path / "toposched.exporter.log"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "NODE_NAME": node}
    args = [
        "--sysfs",
        str(two_socket(tmp_path)),
        "--kubelet-config",
        str(config),
        "--podresources",
        str(kubelet.socket),
    ]
    args += ["--kubelet-state-dir", str(state), "--metrics-port", "0", "--health-port", str(health)]
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "toposched", "exporter", *args, cwd=REPO, env=env, stdout=out, stderr=out
        )
    try:
        yield health
    finally:
        proc.terminate()
        await proc.wait()
        print(log.read_text()[-3000:])


def available_cpu(obj: dict[str, Any] | None, zone: int) -> str | None:
    if obj is None:
        return None
    found: str = next(r["available"] for r in obj["zones"][zone]["resources"] if r["name"] == "cpu")
    return found


async def nrt_with(api: client.ApiClient, node: str, zone_1_cpus: str) -> Any:
    """The node's NRT once zone 1 has ``zone_1_cpus`` CPUs available (else None)."""
    obj = await get_nrt(api, node)
    return obj if available_cpu(obj, 1) == zone_1_cpus else None


async def test_daemon_follows_allocation_changes(
    api: client.ApiClient, node: str, kubelet: FakeKubelet, daemon: int
) -> None:
    obj = await wait_for(partial(nrt_with, api, node, "32"), within=30, what="first NRT")
    attributes = {a["name"]: a["value"] for a in obj["attributes"]}
    assert attributes["topologyManagerPolicy"] == "single-numa-node"
    assert available_cpu(obj, 0) == "30"

    # A pod gets 4 exclusive CPUs on NUMA 1: the NRT follows within a second or so.
    kubelet.pods = [
        api_pb2.PodResources(
            name="db-0",
            namespace="prod",
            containers=[api_pb2.ContainerResources(name="db", cpu_ids=[16, 17, 48, 49])],
        )
    ]
    started = time.monotonic()
    await wait_for(partial(nrt_with, api, node, "28"), within=10, what="NRT after allocation")
    assert time.monotonic() - started < 3

    assert b"200 OK" in await http_get(daemon, "/readyz")
    assert b"200 OK" in await http_get(daemon, "/healthz")

    # The kubelet goes away: the last data stays, readiness turns false.
    await kubelet.stop()
    await asyncio.sleep(3)
    assert b"503" in await http_get(daemon, "/readyz")
    assert available_cpu(await get_nrt(api, node), 1) == "28"
    assert kubelet.list_calls < 10 * (time.monotonic() - started + 5)  # bounded polling
