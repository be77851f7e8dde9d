"""The DevicePlugin service of one resource: what the kubelet calls on the plugin's socket.

Nothing is mounted and no device node is made: ``Allocate`` answers one response per container
with only an environment variable naming the devices, so pods under the oracle's no-runtime
RuntimeClass and busybox containers both run. ``GetPreferredAllocation`` prefers the highest
ids (the kubelet, without a preference, takes any of the aligned devices), which makes its
influence visible.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from testkit.deviceplugin._generated import api_pb2, api_pb2_grpc
from testkit.realnode.device_plugin import (
    ALLOCATE,
    LIST_AND_WATCH,
    LIST_AND_WATCH_UPDATE,
    OPTIONS,
    PRE_START,
    PREFERRED,
)
from testkit.realnode.devices import DeviceResource, natural_key

ENV_PREFIX = "TOPOSCHED_DEVICES_"


class Log(Protocol):
    def __call__(self, method: str, resource: str, ids: Sequence[str], **detail: object) -> None: ...


def env_name(resource: str) -> str:
    """The variable ``Allocate`` sets: ``TOPOSCHED_DEVICES_EXAMPLE_COM_GPU`` for example.com/gpu."""
    return ENV_PREFIX + re.sub(r"[^A-Z0-9]", "_", resource.upper())


def preferred_allocation(available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
    """The must-include devices, then the highest other available ids, ``size`` in all (fewer
    only when too few are available)."""
    chosen = list(dict.fromkeys(must_include))
    others = sorted(set(available) - set(chosen), key=natural_key, reverse=True)
    return chosen + others[: max(0, size - len(chosen))]


def options(resource: DeviceResource) -> api_pb2.DevicePluginOptions:
    return api_pb2.DevicePluginOptions(
        pre_start_required=resource.pre_start_required,
        get_preferred_allocation_available=resource.preferred_allocation,
    )


def device_list(resource: DeviceResource) -> api_pb2.ListAndWatchResponse:
    """The list as the kubelet reads it: a device without zones has no TopologyInfo at all (an
    empty one would hide it from PodResources, which reports a device once per zone)."""
    devices = []
    for device in resource.devices:
        fields: dict[str, Any] = {"ID": device.id, "health": device.health}
        if device.numa:
            fields["topology"] = api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=z) for z in device.numa])
        devices.append(api_pb2.Device(**fields))
    return api_pb2.ListAndWatchResponse(devices=devices)


class Served:
    """One resource as the plugin serves it now; open ListAndWatch streams wait for a change."""

    def __init__(self, resource: DeviceResource, generation: int) -> None:
        self.resource = resource
        self.generation = generation
        self.changed = asyncio.Event()

    def update(self, resource: DeviceResource, generation: int) -> None:
        """Serve ``resource`` from now on; streams send the list again when its devices changed."""
        devices_changed = resource.devices != self.resource.devices
        self.resource, self.generation = resource, generation
        if devices_changed:
            self.changed.set()
            self.changed = asyncio.Event()


class DevicePluginService(api_pb2_grpc.DevicePluginServicer):
    """v1beta1.DevicePlugin for one resource; every call is logged with the ids it names."""

    def __init__(self, served: Served, log: Log) -> None:
        self.served = served
        self.log = log

    @property
    def name(self) -> str:
        return self.served.resource.name

    async def GetDevicePluginOptions(self, request: api_pb2.Empty, context: Any) -> api_pb2.DevicePluginOptions:  # noqa: N802
        answer = options(self.served.resource)
        self.log(
            OPTIONS,
            self.name,
            (),
            preferred=answer.get_preferred_allocation_available,
            prestart=answer.pre_start_required,
        )
        return answer

    async def ListAndWatch(  # noqa: N802
        self, request: api_pb2.Empty, context: Any
    ) -> AsyncIterator[api_pb2.ListAndWatchResponse]:
        method = LIST_AND_WATCH
        while True:
            changed = self.served.changed
            resource, generation = self.served.resource, self.served.generation
            unhealthy = [d.id for d in resource.devices if not d.healthy]
            self.log(method, self.name, resource.ids(), unhealthy=",".join(unhealthy) or "-", generation=generation)
            yield device_list(resource)
            method = LIST_AND_WATCH_UPDATE
            await changed.wait()

    async def GetPreferredAllocation(  # noqa: N802
        self, request: api_pb2.PreferredAllocationRequest, context: Any
    ) -> api_pb2.PreferredAllocationResponse:
        responses = []
        for ask in request.container_requests:
            chosen = preferred_allocation(ask.available_deviceIDs, ask.must_include_deviceIDs, ask.allocation_size)
            self.log(
                PREFERRED,
                self.name,
                chosen,
                available=",".join(ask.available_deviceIDs) or "-",
                must=",".join(ask.must_include_deviceIDs) or "-",
                size=ask.allocation_size,
            )
            responses.append(api_pb2.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        return api_pb2.PreferredAllocationResponse(container_responses=responses)

    async def Allocate(self, request: api_pb2.AllocateRequest, context: Any) -> api_pb2.AllocateResponse:  # noqa: N802
        responses = []
        for ask in request.container_requests:
            ids = list(ask.devices_ids)
            known = set(self.served.resource.ids())
            unknown = [i for i in ids if i not in known]
            self.log(ALLOCATE, self.name, ids, unknown=",".join(unknown) or "-")
            responses.append(api_pb2.ContainerAllocateResponse(envs={env_name(self.name): ",".join(ids)}))
        return api_pb2.AllocateResponse(container_responses=responses)

    async def PreStartContainer(  # noqa: N802
        self, request: api_pb2.PreStartContainerRequest, context: Any
    ) -> api_pb2.PreStartContainerResponse:
        self.log(PRE_START, self.name, list(request.devices_ids))
        return api_pb2.PreStartContainerResponse()
