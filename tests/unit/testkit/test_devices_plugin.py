"""The device plugin process (python -m testkit.deviceplugin) against a stand-in for the kubelet's
side of the device plugin API: registration, the calls the kubelet makes, changes by SIGHUP, a
kubelet restart, and SIGTERM. The real kubelet's side is in tests/integration/test_realnode_devices.py."""

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest

from testkit.deviceplugin._generated import api_pb2, api_pb2_grpc
from testkit.deviceplugin.service import env_name, preferred_allocation
from testkit.paths import REPO
from testkit.realnode.device_plugin import PluginCall, endpoint_name, parse_calls, write_config
from testkit.realnode.devices import NodeDevices

DEVICES = NodeDevices.parse(["example.com/gpu:preferred=0,0,1,1!", "example.com/fpga=-"])


class Registrations(api_pb2_grpc.RegistrationServicer):
    """The kubelet's Registration service on kubelet.sock, recording what registers."""

    def __init__(self, directory: Path) -> None:
        self.socket = directory / "kubelet.sock"
        self.requests: asyncio.Queue[api_pb2.RegisterRequest] = asyncio.Queue()
        self.server: grpc.aio.Server | None = None

    async def start(self) -> None:
        self.server = grpc.aio.server()
        api_pb2_grpc.add_RegistrationServicer_to_server(self, self.server)  # type: ignore[no-untyped-call]
        self.server.add_insecure_port(f"unix:{self.socket}")
        await self.server.start()

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=0)
        self.socket.unlink(missing_ok=True)

    async def Register(self, request: api_pb2.RegisterRequest, context: object) -> api_pb2.Empty:  # noqa: N802
        await self.requests.put(request)
        return api_pb2.Empty()

    async def next(self, within: float = 10) -> api_pb2.RegisterRequest:
        return await asyncio.wait_for(self.requests.get(), within)


class Running:
    def __init__(self, directory: Path, proc: asyncio.subprocess.Process, log: Path) -> None:
        self.directory, self.proc, self.log = directory, proc, log

    def calls(self, method: str) -> list[PluginCall]:
        return [c for c in parse_calls(self.log.read_text()) if c.method == method]

    def stub(self, resource: str) -> tuple[grpc.aio.Channel, api_pb2_grpc.DevicePluginStub]:
        channel = grpc.aio.insecure_channel(f"unix:{self.directory / endpoint_name(resource)}")
        return channel, api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]


@pytest.fixture
async def kubelet() -> AsyncIterator[Registrations]:
    directory = Path(tempfile.mkdtemp(prefix="tsdp-", dir="/tmp"))  # unix socket paths are short
    registrations = Registrations(directory)
    await registrations.start()
    yield registrations
    await registrations.stop()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
async def plugin(kubelet: Registrations) -> AsyncIterator[Running]:
    config, log = kubelet.socket.parent / "devices.json", kubelet.socket.parent / "plugin.log"
    write_config(config, 1, DEVICES)
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "testkit.deviceplugin", "--config", str(config),
            "--socket-dir", str(kubelet.socket.parent), cwd=REPO, stdout=out, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
    running = Running(kubelet.socket.parent, proc, log)
    yield running
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def _eventually(check: Callable[[], bool], within: float = 5) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def _registered(kubelet: Registrations) -> dict[str, api_pb2.RegisterRequest]:
    first, second = await kubelet.next(), await kubelet.next()
    return {r.resource_name: r for r in (first, second)}


@pytest.mark.timeout(60)
async def test_it_registers_each_resource_and_answers_the_kubelets_calls(
    kubelet: Registrations, plugin: Running
) -> None:
    requests = await _registered(kubelet)
    gpu = requests["example.com/gpu"]
    assert (gpu.version, gpu.endpoint) == ("v1beta1", endpoint_name("example.com/gpu"))
    assert gpu.options.get_preferred_allocation_available
    assert not requests["example.com/fpga"].options.get_preferred_allocation_available

    channel, stub = plugin.stub("example.com/gpu")
    async with channel:
        options = await stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=5)
        assert options.get_preferred_allocation_available
        assert not options.pre_start_required
        stream = stub.ListAndWatch(api_pb2.Empty())
        listed = await asyncio.wait_for(stream.read(), 5)
        assert [(d.ID, d.health, [n.ID for n in d.topology.nodes]) for d in listed.devices] == [
            ("gpu-0", "Healthy", [0]), ("gpu-1", "Healthy", [0]), ("gpu-2", "Healthy", [1]),
            ("gpu-3", "Unhealthy", [1]),
        ]  # fmt: skip

        ask = api_pb2.ContainerPreferredAllocationRequest(
            available_deviceIDs=["gpu-0", "gpu-1", "gpu-2"], must_include_deviceIDs=["gpu-0"], allocation_size=2
        )
        preferred = await stub.GetPreferredAllocation(
            api_pb2.PreferredAllocationRequest(container_requests=[ask]), timeout=5
        )
        assert list(preferred.container_responses[0].deviceIDs) == ["gpu-0", "gpu-2"]
        allocated = await stub.Allocate(
            api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["gpu-2"])]),
            timeout=5,
        )
        response = allocated.container_responses[0]
        assert dict(response.envs) == {"TOPOSCHED_DEVICES_EXAMPLE_COM_GPU": "gpu-2"}
        assert not response.mounts
        assert not response.devices
        await stub.PreStartContainer(api_pb2.PreStartContainerRequest(devices_ids=["gpu-2"]), timeout=5)

        # SIGHUP: the new list goes out on the open stream.
        write_config(plugin.directory / "devices.json", 2, DEVICES.with_health("example.com/gpu", "gpu-0", False))
        plugin.proc.send_signal(signal.SIGHUP)
        updated = await asyncio.wait_for(stream.read(), 5)
        assert [d.health for d in updated.devices] == ["Unhealthy", "Healthy", "Healthy", "Unhealthy"]
        stream.cancel()

    fpga_channel, fpga = plugin.stub("example.com/fpga")
    async with fpga_channel:
        stream = fpga.ListAndWatch(api_pb2.Empty())
        listed = await asyncio.wait_for(stream.read(), 5)
        assert [(d.ID, d.HasField("topology")) for d in listed.devices] == [("fpga-0", False)]
        stream.cancel()

    await _eventually(lambda: bool(plugin.calls("ListAndWatch")) and bool(plugin.calls("ListAndWatchUpdate")))
    assert [c.ids for c in plugin.calls("Allocate")] == [("gpu-2",)]
    assert [c.ids for c in plugin.calls("GetPreferredAllocation")] == [("gpu-0", "gpu-2")]
    assert plugin.calls("GetPreferredAllocation")[0].detail["must"] == "gpu-0"
    assert [c.ids for c in plugin.calls("PreStartContainer")] == [("gpu-2",)]
    assert [c.generation for c in plugin.calls("ListAndWatchUpdate")] == [2]


@pytest.mark.timeout(60)
async def test_a_restarted_kubelet_gets_new_sockets_and_registrations(kubelet: Registrations, plugin: Running) -> None:
    await _registered(kubelet)
    # Both calls answered first: a kubelet stopped while the plugin still waits for an answer
    # makes that registration fail (and be retried), which is not what this test is about.
    await _eventually(lambda: len(plugin.calls("Register")) == 2)
    # What a kubelet does when it starts: remove every socket of the directory, listen anew.
    await kubelet.stop()
    for socket in plugin.directory.glob("*.sock"):
        socket.unlink()
    await kubelet.start()
    again = await _registered(kubelet)
    assert set(again) == {"example.com/gpu", "example.com/fpga"}
    assert all((plugin.directory / r.endpoint).is_socket() for r in again.values())
    await _eventually(lambda: len(plugin.calls("Register")) == 4)  # logged once the call returned

    # SIGUSR1: registered once more, on the same sockets.
    served = {p: p.stat().st_ino for p in plugin.directory.glob("tsdp-*.sock")}
    plugin.proc.send_signal(signal.SIGUSR1)
    assert set(await _registered(kubelet)) == {"example.com/gpu", "example.com/fpga"}
    assert {p: p.stat().st_ino for p in plugin.directory.glob("tsdp-*.sock")} == served

    plugin.proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(plugin.proc.wait(), 10) == 0
    assert sorted(p.name for p in plugin.directory.glob("*.sock")) == ["kubelet.sock"]


@pytest.mark.timeout(60)
async def test_changed_options_register_again_and_a_removed_resource_stops(
    kubelet: Registrations, plugin: Running
) -> None:
    await _registered(kubelet)
    changed = NodeDevices.parse(["example.com/gpu:prestart=0"])
    write_config(plugin.directory / "devices.json", 2, changed)
    os.kill(plugin.proc.pid, signal.SIGHUP)
    request = await kubelet.next()
    assert request.resource_name == "example.com/gpu"
    assert request.options.pre_start_required
    assert not request.options.get_preferred_allocation_available
    assert not (plugin.directory / endpoint_name("example.com/fpga")).exists()
    await _eventually(lambda: [c.resource for c in plugin.calls("Stopped")] == ["example.com/fpga"])


def test_the_preferred_allocation_keeps_what_must_be_in_and_counts_ids_naturally() -> None:
    assert preferred_allocation(["gpu-2", "gpu-10", "gpu-9"], [], 2) == ["gpu-10", "gpu-9"]
    assert preferred_allocation(["a", "b", "c"], ["a"], 3) == ["a", "c", "b"]
    assert preferred_allocation(["a"], [], 3) == ["a"]
    assert env_name("example.com/my-gpu.v2") == "TOPOSCHED_DEVICES_EXAMPLE_COM_MY_GPU_V2"


def test_the_services_have_the_kubelets_method_paths() -> None:
    """The kubelet calls /v1beta1.Registration/Register and /v1beta1.DevicePlugin/<method>."""
    services = {s.full_name: [m.name for m in s.methods] for s in api_pb2.DESCRIPTOR.services_by_name.values()}
    assert services == {
        "v1beta1.Registration": ["Register"],
        "v1beta1.DevicePlugin": [
            "GetDevicePluginOptions", "ListAndWatch", "GetPreferredAllocation", "Allocate", "PreStartContainer",
        ],
    }  # fmt: skip
