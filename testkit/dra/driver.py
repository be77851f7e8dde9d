"""The driver process: per driver of the node, a registration socket in the kubelet's
plugins_registry and a DRAPlugin socket in its plugins directory, and the driver's slices,
published once the kubelet registered it and kept published; SIGHUP re-reads the configuration.

A kubelet that starts finds the registration sockets already there and registers the drivers
again (GetInfo, NotifyRegistrationStatus), and deletes the node's slices: the next look publishes
them again. The servers live as long as their driver is configured; a driver dropped from the
configuration closes its sockets (the kubelet's plugin watcher unregisters it) and its slices go.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Sequence
from pathlib import Path

import grpc

from testkit.dra._generated import dra_pb2_grpc, registration_pb2_grpc
from testkit.dra.publisher import SlicePublisher
from testkit.dra.service import DRAPluginService, RegistrationService
from testkit.realnode.dra import NodeDRA
from testkit.realnode.dra_driver import ERROR, SERVING, STOPPED, DriverConfig
from testkit.realnode.layout import dra_plugin_socket, dra_registration_socket
from testkit.realnode.sidecar import format_call
from testkit.realnode.signalled import SignalledLoop
from toposched.kube.nodeclient import KubeAPI

TICK = 0.5
"""How often the slices in the API are compared with the configuration (seconds)."""


def log(method: str, resource: str, ids: Sequence[str], **detail: object) -> None:
    print(format_call(method, resource, tuple(ids), **detail), flush=True)


class Endpoint:
    """One driver's two servers. The DRAPlugin one starts first: the kubelet dials it as soon as
    it has read the registration."""

    def __init__(self, driver: str, kubelet_dir: Path) -> None:
        self.driver = driver
        self.registration = dra_registration_socket(kubelet_dir, driver)
        self.plugin = dra_plugin_socket(kubelet_dir, driver)
        self.servers: list[grpc.aio.Server] = []
        self.registered = False

    async def serve(self, registration: RegistrationService, plugin: DRAPluginService) -> None:
        for socket in (self.plugin, self.registration):
            socket.parent.mkdir(parents=True, exist_ok=True)
            socket.unlink(missing_ok=True)
        dra_server = grpc.aio.server()
        dra_pb2_grpc.add_DRAPluginServicer_to_server(plugin, dra_server)  # type: ignore[no-untyped-call]
        registration_server = grpc.aio.server()
        registration_pb2_grpc.add_RegistrationServicer_to_server(registration, registration_server)  # type: ignore[no-untyped-call]
        for server, socket in ((dra_server, self.plugin), (registration_server, self.registration)):
            server.add_insecure_port(f"unix:{socket}")
            await server.start()
            self.servers.append(server)

    async def close(self) -> None:
        """Registration socket first: the kubelet unregisters the driver before its endpoint goes."""
        for server in reversed(self.servers):
            await server.stop(grace=0.2)
        self.servers.clear()
        for socket in (self.registration, self.plugin):
            socket.unlink(missing_ok=True)
        self.registered = False


class DriverProcess:
    """Serves the drivers of ``config`` (see testkit.realnode.dra_driver) to the kubelet whose
    root dir is ``kubelet_dir`` and publishes their slices with ``kubeconfig``'s identity."""

    def __init__(self, config: Path, kubelet_dir: Path, kubeconfig: Path) -> None:
        self.config_path = config
        self.kubelet_dir = kubelet_dir
        self.config = DriverConfig.read(config)
        self.publisher = SlicePublisher(KubeAPI.from_kubeconfig(kubeconfig), self.config.node, log)
        self.endpoints: dict[str, Endpoint] = {}
        self.gone: set[str] = set()
        self.loop = SignalledLoop(TICK, {signal.SIGHUP: "reload"})

    async def run(self) -> None:
        """Serve until SIGTERM or SIGINT, then close every socket (the slices stay)."""
        try:
            await self.serve(self.config.dra)
            await self.loop.run(self._look)
        finally:
            for endpoint in self.endpoints.values():
                await endpoint.close()
                log(STOPPED, endpoint.driver, (), pid=os.getpid())

    async def _look(self) -> None:
        if self.loop.asked_for("reload"):
            await self.reload()
        await self.publish()

    def _registered(self, driver: str, registered: bool) -> None:
        endpoint = self.endpoints.get(driver)
        if endpoint is not None:
            endpoint.registered = endpoint.registered or registered
            self.loop.poke()

    def _known(self, driver: str) -> set[str]:
        node = self.config.node
        return {f"{s.pool_name(node)}/{d.name}" for s in self.config.dra.of_driver(driver) for d in s.devices}

    async def serve(self, dra: NodeDRA) -> None:
        """Serve every driver of ``dra`` not served yet."""
        for driver in dra.drivers():
            if driver in self.endpoints:
                continue
            endpoint = Endpoint(driver, self.kubelet_dir)
            registration = RegistrationService(driver, self._registered, log)
            plugin = DRAPluginService(driver, self.publisher, functools.partial(self._known, driver), log)
            await endpoint.serve(registration, plugin)
            self.endpoints[driver] = endpoint
            self.gone.discard(driver)
            log(SERVING, driver, (), registration=endpoint.registration.name, generation=self.config.generation)

    async def reload(self) -> None:
        """Serve and publish what the configuration says now (SIGHUP)."""
        try:
            config = DriverConfig.read(self.config_path)
        except (OSError, ValueError, KeyError) as exc:
            log(ERROR, "", (), message=f"cannot read {self.config_path}, keeping what is published: {exc}")
            return
        self.config = config
        for driver in set(self.endpoints) - set(config.dra.drivers()):
            await self.endpoints.pop(driver).close()
            self.gone.add(driver)
            log(STOPPED, driver, (), generation=config.generation)
        await self.serve(config.dra)

    async def publish(self) -> None:
        """One look at each registered driver's slices, and at those of drivers dropped."""
        slices = self.config.slices()
        for driver, endpoint in self.endpoints.items():
            if endpoint.registered:
                wanted = [s for s in slices if s["spec"]["driver"] == driver]
                await self.publisher.sync(driver, wanted, self.config.generation)
        for driver in sorted(self.gone):
            await self.publisher.sync(driver, [], self.config.generation)
            if driver not in self.publisher.errors:
                self.gone.discard(driver)
