"""The PodResources client against a fake kubelet serving real gRPC on a unix socket."""

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from testkit.podresources import FakeKubelet, topology
from toposched.exporter.podresources._generated import api_pb2
from toposched.exporter.podresources.client import PodResourcesClient, PodResourcesError
from toposched.exporter.topology import DeviceSet, MemoryBlock


@pytest.fixture
async def kubelet(tmp_path: Path) -> AsyncIterator[FakeKubelet]:
    server = FakeKubelet(tmp_path / "kubelet.sock")
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def client(kubelet: FakeKubelet) -> AsyncIterator[PodResourcesClient]:
    c = PodResourcesClient(kubelet.socket, timeout=2)
    yield c
    await c.close()


async def test_allocatable_and_list(kubelet: FakeKubelet, client: PodResourcesClient) -> None:
    kubelet.allocatable = api_pb2.AllocatableResourcesResponse(
        cpu_ids=[3, 1, 2],
        memory=[api_pb2.ContainerMemory(memory_type="memory", size=1024, topology=topology(1))],
        devices=[api_pb2.ContainerDevices(resource_name="example.com/vf", device_ids=["vf0"], topology=topology(0))],
    )
    kubelet.pods = [
        api_pb2.PodResources(
            name="db-0",
            namespace="prod",
            containers=[
                api_pb2.ContainerResources(
                    name="db",
                    cpu_ids=[2],
                    memory=[api_pb2.ContainerMemory(memory_type="hugepages-1Gi", size=2**30, topology=topology(0, 1))],
                    devices=[api_pb2.ContainerDevices(resource_name="gpu", device_ids=["g0"])],
                )
            ],
        )
    ]
    alloc = await client.allocatable()
    assert alloc.cpu_ids == (1, 2, 3)
    assert alloc.memory == (MemoryBlock("memory", 1024, (1,)),)
    assert alloc.devices == (DeviceSet("example.com/vf", ("vf0",), (0,)),)
    (pod,) = await client.list_pods()
    assert (pod.namespace, pod.name) == ("prod", "db-0")
    (container,) = pod.containers
    assert container.cpu_ids == (2,)
    assert container.memory == (MemoryBlock("hugepages-1Gi", 2**30, (0, 1)),)
    assert container.devices == (DeviceSet("gpu", ("g0",), ()),)  # no topology from the plugin


async def test_allocation_changes_are_seen(kubelet: FakeKubelet, client: PodResourcesClient) -> None:
    assert await client.list_pods() == []
    kubelet.pods = [api_pb2.PodResources(name="a", namespace="n", containers=[api_pb2.ContainerResources(cpu_ids=[5])])]
    (pod,) = await client.list_pods()
    assert pod.containers[0].cpu_ids == (5,)


async def test_rate_limit_is_a_retryable_error(kubelet: FakeKubelet, client: PodResourcesClient) -> None:
    kubelet.rate_limited = True
    with pytest.raises(PodResourcesError, match="rate limit") as info:
        await client.list_pods()
    assert info.value.retry_after > 0


async def test_socket_disappears_and_comes_back(kubelet: FakeKubelet, client: PodResourcesClient) -> None:
    assert await client.list_pods() == []
    await kubelet.stop()  # the kubelet restarts: the socket file is gone
    with pytest.raises(PodResourcesError, match="unavailable"):
        await client.list_pods()
    kubelet.pods = [api_pb2.PodResources(name="back", namespace="n")]
    await kubelet.start()  # a new socket at the same path
    for _ in range(50):
        try:
            pods = await client.list_pods()
            break
        except PodResourcesError:
            await asyncio.sleep(0.2)
    else:
        raise AssertionError("client never reconnected")
    assert [p.name for p in pods] == ["back"]


async def test_no_socket_at_all(tmp_path: Path) -> None:
    c = PodResourcesClient(tmp_path / "absent.sock", timeout=1)
    with pytest.raises(PodResourcesError, match="unavailable"):
        await c.allocatable()
    await c.close()
