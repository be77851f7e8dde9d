"""The plugin process: one gRPC server per resource on its own socket, registered with the
kubelet, kept registered across kubelet restarts, changed by SIGHUP; SIGUSR1 registers every
resource once more, on the sockets it serves (the kubelet then holds two streams).

A kubelet that starts removes every socket in its device-plugins directory and creates a new
``kubelet.sock``: the plugin notices (the socket's inode and change time differ from those it
registered with, or its own socket is gone), serves again on a fresh socket and registers again,
as real plugins do. When a resource must register again with the same kubelet (its options
changed, or its socket vanished), the old server stops first and the plugin waits a moment: the
kubelet, when an old stream ends, disconnects whichever client holds the resource's name, and
must not take the new one for the old.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

import grpc

from testkit.deviceplugin._generated import api_pb2, api_pb2_grpc
from testkit.deviceplugin.service import DevicePluginService, Served, options
from testkit.realnode.device_plugin import (
    API_VERSION,
    ERROR,
    KUBELET_SOCKET,
    REGISTER,
    endpoint_name,
    format_call,
    read_config,
)
from testkit.realnode.devices import DeviceResource, DevicesError
from testkit.realnode.signalled import SignalledLoop

TICK = 0.2
"""How often the kubelet's socket and the plugin's own are looked at (seconds)."""
SETTLE = 0.5
"""Pause between stopping a resource's server and registering it again with the same kubelet."""
REGISTER_TIMEOUT = 15.0
"""The kubelet dials the plugin back within Register, with a 10 s timeout of its own."""
RETRY_MAX = 5.0

Identity = tuple[int, int]


def log(method: str, resource: str, ids: Sequence[str], **detail: object) -> None:
    print(format_call(method, resource, tuple(ids), **detail), flush=True)


def socket_identity(path: Path) -> Identity | None:
    """(inode, change time) of a socket file: a recreated one differs even if its inode is reused."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_ctime_ns


class Endpoint:
    """One resource: its server on its socket, and the kubelet it registered with."""

    def __init__(self, served: Served, socket_dir: Path) -> None:
        self.served = served
        self.socket = socket_dir / endpoint_name(served.resource.name)
        self.server: grpc.aio.Server | None = None
        self.registered_with: Identity | None = None
        self.failures = 0
        self.next_attempt = 0.0

    @property
    def name(self) -> str:
        return self.served.resource.name

    async def serve(self) -> None:
        self.socket.unlink(missing_ok=True)
        self.server = grpc.aio.server()
        api_pb2_grpc.add_DevicePluginServicer_to_server(DevicePluginService(self.served, log), self.server)  # type: ignore[no-untyped-call]
        self.server.add_insecure_port(f"unix:{self.socket}")
        await self.server.start()

    async def close(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=0.2)
            self.server = None
        self.socket.unlink(missing_ok=True)
        self.registered_with = None

    async def register(self, kubelet_socket: Path) -> None:
        """One Register call; raises grpc.aio.AioRpcError when the kubelet refuses or is not there."""
        resource = self.served.resource
        request = api_pb2.RegisterRequest(
            version=API_VERSION,
            endpoint=self.socket.name,
            resource_name=resource.name,
            options=options(resource),
        )
        async with grpc.aio.insecure_channel(f"unix:{kubelet_socket}") as channel:
            stub = api_pb2_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
            await stub.Register(request, timeout=REGISTER_TIMEOUT)


class Plugin:
    """Serves the devices of ``config`` (see testkit.realnode.device_plugin) in ``socket_dir``."""

    def __init__(self, config: Path, socket_dir: Path) -> None:
        self.config = config
        self.socket_dir = socket_dir
        self.kubelet_socket = socket_dir / KUBELET_SOCKET
        self.endpoints: dict[str, Endpoint] = {}
        self.loop = SignalledLoop(TICK, {signal.SIGHUP: "reload", signal.SIGUSR1: "reregister"})

    async def run(self) -> None:
        """Serve until SIGTERM or SIGINT (a registration in flight is abandoned), then close
        every socket."""
        generation, devices = read_config(self.config)
        for resource in devices.resources:
            self.endpoints[resource.name] = Endpoint(Served(resource, generation), self.socket_dir)
        try:
            await self.loop.run(self._look)
        finally:
            for endpoint in self.endpoints.values():
                await endpoint.close()
                log("Stopped", endpoint.name, (), endpoint=endpoint.socket.name, pid=os.getpid())

    async def _look(self) -> None:
        if self.loop.asked_for("reload"):
            await self.reload()
        if self.loop.asked_for("reregister"):
            await self.register_again()
        await self.keep_registered()

    async def reload(self) -> None:
        """Serve what the devices file says now (SIGHUP)."""
        try:
            generation, devices = read_config(self.config)
        except (OSError, ValueError, KeyError, DevicesError) as exc:
            log(ERROR, "", (), message=f"cannot read {self.config}, keeping the devices served: {exc}")
            return
        for name in set(self.endpoints) - set(devices.names()):
            gone = self.endpoints.pop(name)
            await gone.close()
            log("Stopped", name, (), endpoint=gone.socket.name, generation=generation)
        for resource in devices.resources:
            endpoint = self.endpoints.get(resource.name)
            if endpoint is None:
                self.endpoints[resource.name] = Endpoint(Served(resource, generation), self.socket_dir)
                continue
            old = endpoint.served.resource
            endpoint.served.update(resource, generation)
            if _options(old) != _options(resource):
                await endpoint.close()  # registers again, with the new options, on the next look
                await asyncio.sleep(SETTLE)

    async def register_again(self) -> None:
        """Register every served resource again without stopping its server (SIGUSR1)."""
        kubelet = socket_identity(self.kubelet_socket)
        for endpoint in self.endpoints.values():
            if endpoint.server is not None and kubelet is not None:
                await self._register(endpoint, kubelet, serve=False)

    async def keep_registered(self) -> None:
        """Serve and register every resource that is not registered with the running kubelet."""
        kubelet = socket_identity(self.kubelet_socket)
        for endpoint in list(self.endpoints.values()):
            current = endpoint.registered_with is not None and endpoint.registered_with == kubelet
            if current and endpoint.socket.exists():
                continue
            if kubelet is None or time.monotonic() < endpoint.next_attempt:
                continue
            if current:  # the same kubelet still holds a stream to the socket that vanished
                await endpoint.close()
                await asyncio.sleep(SETTLE)
            await self._register(endpoint, kubelet)

    async def _register(self, endpoint: Endpoint, kubelet: Identity, *, serve: bool = True) -> None:
        if serve:
            await endpoint.close()
            await endpoint.serve()
            log("Serving", endpoint.name, (), endpoint=endpoint.socket.name, pid=os.getpid())
        try:
            await endpoint.register(self.kubelet_socket)
        except grpc.aio.AioRpcError as exc:
            endpoint.failures += 1
            delay = min(RETRY_MAX, TICK * 2**endpoint.failures)
            endpoint.next_attempt = time.monotonic() + delay
            log(ERROR, endpoint.name, (), message=f"Register failed ({exc.code().name}: {exc.details()}); "
                f"again in {delay:.1f} s")  # fmt: skip
            return
        endpoint.registered_with = kubelet
        endpoint.failures = 0
        log(REGISTER, endpoint.name, (), endpoint=endpoint.socket.name, generation=endpoint.served.generation)


def _options(resource: DeviceResource) -> tuple[bool, bool]:
    return resource.preferred_allocation, resource.pre_start_required
