"""A fake kubelet: a real grpc.aio server on a unix socket serving PodResourcesLister v1.

Tests set what it answers (allocatable resources, pods) and make it misbehave (rate limit).
:func:`listed_pod` asks a kubelet (a real node's, say) what it lists of one pod.
"""

from pathlib import Path

import grpc

from toposched.exporter.podresources._generated import api_pb2, api_pb2_grpc
from toposched.exporter.podresources.client import PodResourcesClient
from toposched.exporter.topology import PodUse


async def listed_pod(socket: Path, namespace: str, name: str) -> PodUse | None:
    """The pod as one List call on the kubelet's PodResources ``socket`` says (None: not listed)."""
    resources = PodResourcesClient(socket, timeout=5)
    try:
        pods = await resources.list_pods()
    finally:
        await resources.close()
    return next((p for p in pods if (p.namespace, p.name) == (namespace, name)), None)


def topology(*numa: int) -> api_pb2.TopologyInfo:
    return api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=n) for n in numa])


class FakeKubelet(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.allocatable = api_pb2.AllocatableResourcesResponse()
        self.pods: list[api_pb2.PodResources] = []
        self.rate_limited = False
        self.list_calls = 0
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        self._server = grpc.aio.server()
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(self, self._server)  # type: ignore[no-untyped-call]
        self._server.add_insecure_port(f"unix://{self.socket}")
        await self._server.start()

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=0)
            self._server = None
        self.socket.unlink(missing_ok=True)

    async def List(self, request: object, context: grpc.aio.ServicerContext) -> api_pb2.ListPodResourcesResponse:  # noqa: N802
        self.list_calls += 1
        if self.rate_limited:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "rejected by rate limit")
        return api_pb2.ListPodResourcesResponse(pod_resources=self.pods)

    async def GetAllocatableResources(  # noqa: N802
        self, request: object, context: grpc.aio.ServicerContext
    ) -> api_pb2.AllocatableResourcesResponse:
        if self.rate_limited:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "rejected by rate limit")
        return self.allocatable

    async def Get(  # noqa: N802
        self, request: api_pb2.GetPodResourcesRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.GetPodResourcesResponse:
        for pod in self.pods:
            if pod.name == request.pod_name and pod.namespace == request.pod_namespace:
                return api_pb2.GetPodResourcesResponse(pod_resources=pod)
        await context.abort(grpc.StatusCode.NOT_FOUND, "pod not found")
        raise AssertionError("unreachable")
