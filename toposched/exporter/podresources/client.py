"""The kubelet PodResources v1 API over gRPC on its unix socket.

The exporter mounts the socket's *directory*, so a kubelet restart that recreates the socket is
survived: gRPC reconnects to the same path by itself. Calls have a deadline; the kubelet's rate
limit (ResourceExhausted) and a missing socket (Unavailable) become PodResourcesError with a
retry hint, which the daemon turns into backoff.
"""

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from toposched.exporter.podresources._generated import api_pb2, api_pb2_grpc
from toposched.exporter.topology import Allocatable, ClaimDevice, ContainerUse, DeviceSet, MemoryBlock, PodUse

MAX_MESSAGE = 16 * 2**20


class PodResourcesError(RuntimeError):
    def __init__(self, message: str, retry_after: float, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.unreachable = unreachable
        """No kubelet answers on the socket (gone, restarting or hung)."""


def _numa(topology: Any) -> tuple[int, ...]:
    return tuple(sorted(n.ID for n in topology.nodes)) if topology is not None else ()


def _memory(blocks: Any) -> tuple[MemoryBlock, ...]:
    return tuple(
        MemoryBlock(m.memory_type, int(m.size), _numa(m.topology if m.HasField("topology") else None)) for m in blocks
    )


def _devices(devices: Any) -> tuple[DeviceSet, ...]:
    return tuple(
        DeviceSet(d.resource_name, tuple(d.device_ids), _numa(d.topology if d.HasField("topology") else None))
        for d in devices
    )


def _claims(dynamic: Any) -> tuple[ClaimDevice, ...]:
    return tuple(
        ClaimDevice(d.claim_namespace, d.claim_name, r.driver_name, r.pool_name, r.device_name)
        for d in dynamic
        for r in d.claim_resources
    )


def to_allocatable(response: api_pb2.AllocatableResourcesResponse) -> Allocatable:
    return Allocatable(
        cpu_ids=tuple(sorted(response.cpu_ids)),
        memory=_memory(response.memory),
        devices=_devices(response.devices),
    )


def to_pods(response: api_pb2.ListPodResourcesResponse) -> list[PodUse]:
    return [
        PodUse(
            namespace=p.namespace,
            name=p.name,
            containers=tuple(
                ContainerUse(
                    cpu_ids=tuple(sorted(c.cpu_ids)),
                    memory=_memory(c.memory),
                    devices=_devices(c.devices),
                    name=c.name,
                    claims=_claims(c.dynamic_resources),
                )
                for c in p.containers
            ),
        )
        for p in response.pod_resources
    ]


class PodResourcesClient:
    def __init__(
        self, socket: Path, timeout: float = 10.0, observe: Callable[[str, float], None] | None = None
    ) -> None:
        self.socket = socket
        self.timeout = timeout
        self._observe = observe
        self._channel = grpc.aio.insecure_channel(
            f"unix://{socket}",
            # A kubelet back from a restart is seen within a second, however long it was away.
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE),
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", 1000),
            ],
        )
        self._stub = api_pb2_grpc.PodResourcesListerStub(self._channel)  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, method: str, request: Any) -> Any:
        started = time.perf_counter()
        try:
            return await getattr(self._stub, method)(request, timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise PodResourcesError(f"kubelet rate limit on {method}: {exc.details()}", retry_after=1.0) from None
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise PodResourcesError(
                    f"kubelet PodResources at {self.socket} unavailable ({code.name}): {exc.details()}",
                    retry_after=0.5,
                    unreachable=True,
                ) from None
            raise PodResourcesError(f"{method} failed ({code.name}): {exc.details()}", retry_after=5.0) from None
        finally:
            if self._observe is not None:
                self._observe(method, time.perf_counter() - started)

    async def allocatable(self) -> Allocatable:
        return to_allocatable(await self._call("GetAllocatableResources", api_pb2.AllocatableResourcesRequest()))

    async def list_pods(self) -> list[PodUse]:
        return to_pods(await self._call("List", api_pb2.ListPodResourcesRequest()))
