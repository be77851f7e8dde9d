"""The extender's DRA prediction with the real allocator helper, without a cluster: bad input gets
an explained *unknown* or a refusal, never a crash, never a blocked pod, and the time is bounded."""

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.builders import claim_body, deviceclass_body, gpu_slice_body, nrt_body, pod_body, with_claim
from testkit.extender import in_process
from testkit.schedstack import bin_dir
from toposched.schedhook.extender.coordinator import Coordinator

DRIVER = "gpu.predict.example"


def helper() -> str:
    return str(bin_dir() / "toposched-dra-allocate")


def nrt(name: str) -> dict[str, Any]:
    return nrt_body(name, [{"cpu": (8, 8, free), "memory": ("32Gi", "30Gi", "30Gi")} for free in (1, 8)])


def cluster(devices: list[tuple[str, int | None]], claims: list[dict[str, Any]]) -> Coordinator:
    return in_process(
        {
            "nrts": [nrt("n1")],
            "resourceslices": [gpu_slice_body("n1-gpus", "n1", DRIVER, devices)],
            "deviceclasses": [deviceclass_body(DRIVER)],
            "resourceclaims": claims,
        },
        dra_allocator=helper(),
    )


def pod(claim: str = "c") -> dict[str, Any]:
    return with_claim(pod_body("p", namespace="ns", uid="u", cpu=4, memory="1Gi"), claim=claim)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def filter_once(loop: asyncio.AbstractEventLoop, coordinator: Coordinator, body: dict[str, Any]) -> Any:
    async def call() -> Any:
        try:
            return (await coordinator.filter(body, ["n1"])).node(0)
        finally:
            await coordinator.devices.close()

    return loop.run_until_complete(call())


def test_first_fit_off_the_cpus_fails_with_the_device_named(loop: asyncio.AbstractEventLoop) -> None:
    found = filter_once(loop, cluster([("gpu-0", 0), ("gpu-1", 1)], [claim_body("c", DRIVER, "ns")]), pod())
    assert not found.fit
    assert found.reason == "gpu-0 of claim ns/c on NUMA 0, CPUs would be on NUMA 1"


def test_a_device_class_deleted_mid_run_is_unknown_and_blocks_nothing(loop: asyncio.AbstractEventLoop) -> None:
    coordinator = cluster([("gpu-0", 0)], [claim_body("c", DRIVER, "ns")])

    async def call() -> Any:
        try:
            await coordinator.filter(pod(), ["n1"])  # the helper holds the class now
            coordinator.view.store.event("deviceclasses", "DELETED", deviceclass_body(DRIVER))
            return (await coordinator.filter(pod(), ["n1"])).node(0)
        finally:
            await coordinator.devices.close()

    found = loop.run_until_complete(call())
    assert found.fit  # the scheduler itself would not pass the node: nothing here blocks it
    assert found.devices.verdict == "unknown"


def test_a_claim_the_allocator_fails_on_is_unknown_with_its_error(loop: asyncio.AbstractEventLoop) -> None:
    broken = claim_body("c", DRIVER, "ns")
    broken["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": 'device.attributes["gpu.predict.example"].model == "x"'}}  # unguarded: a runtime error
    ]
    found = filter_once(loop, cluster([("gpu-0", 0)], [broken]), pod())
    assert found.fit
    assert found.devices.verdict == "unknown"
    assert "the allocator failed" in found.devices.reason


def test_a_claim_not_seen_yet_is_unknown(loop: asyncio.AbstractEventLoop) -> None:
    found = filter_once(loop, cluster([("gpu-0", 0)], []), pod("missing"))
    assert found.fit
    assert found.devices.reason == "claim gpu of the pod: not seen yet"


def test_ten_thousand_devices_on_one_node_answer_in_bounded_time(loop: asyncio.AbstractEventLoop) -> None:
    devices: list[tuple[str, int | None]] = [(f"gpu-{i}", i % 2) for i in range(10_000)]
    coordinator = cluster(devices, [claim_body("c", DRIVER, "ns")])
    started = time.monotonic()
    found = filter_once(loop, coordinator, pod())
    assert time.monotonic() - started < 30
    assert not found.fit  # gpu-0, on NUMA 0: first fit, off the CPUs
    assert "gpu-0 of claim ns/c" in found.reason


def test_the_helper_killed_is_started_again_with_the_state(loop: asyncio.AbstractEventLoop) -> None:
    coordinator = cluster([("gpu-0", 1)], [claim_body("c", DRIVER, "ns")])

    async def call() -> Any:
        try:
            await coordinator.filter(pod(), ["n1"])
            process = coordinator.devices.predictor.allocator._process
            assert process is not None
            process.kill()
            await process.wait()
            await asyncio.sleep(0.1)
            return (await coordinator.filter(pod(), ["n1"])).node(0)
        finally:
            await coordinator.devices.close()

    found = loop.run_until_complete(call())
    assert found.fit
    assert found.devices.verdict == "aligned"


def test_without_the_helper_devices_are_unknown(loop: asyncio.AbstractEventLoop) -> None:
    coordinator = in_process(
        {"nrts": [nrt("n1")], "resourceclaims": [claim_body("c", DRIVER, "ns")]},
        dra_allocator="/nonexistent/toposched-dra-allocate",
    )
    found = filter_once(loop, coordinator, pod())
    assert found.fit
    assert found.devices.verdict == "unknown"
    assert "did not answer" in found.devices.reason
