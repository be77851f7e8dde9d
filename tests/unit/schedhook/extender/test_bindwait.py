"""A filter waits only for binds that can still come: for a window learned from the lags binds
actually had, and not at all while binds do not come to this extender."""

import asyncio
import time

import pytest

from testkit.builders import node_body, nrt_body, pod_body
from toposched.schedhook.extender.bindwait import IN_VAIN_BEFORE_IDLE, LAGS_BEFORE_LEARNING, BindWindows
from toposched.schedhook.extender.coordinator import Coordinator, ExtenderConfig
from toposched.schedhook.extender.store import ObjectStore


def learned(lag: float, limit: float = 0.25) -> BindWindows:
    """Windows that have seen ``LAGS_BEFORE_LEARNING`` binds, each ``lag`` after its answer."""
    w = BindWindows(limit)
    for i in range(LAGS_BEFORE_LEARNING):
        w.answer(f"old-{i}", 100.0)
        w.bound(f"old-{i}", 100.0 + lag)
    return w


@pytest.mark.parametrize(
    ("windows", "window"),
    [
        pytest.param(BindWindows(0.25), 0.25, id="the-limit-until-lags-are-known"),
        pytest.param(learned(0.002), 0.05, id="never-below-the-floor"),
        pytest.param(learned(0.02), 0.06, id="three-times-the-p99-lag"),
        pytest.param(learned(0.2), 0.25, id="never-above-the-limit"),
    ],
)
def test_the_window(windows: BindWindows, window: float) -> None:
    assert windows.window() == pytest.approx(window)


@pytest.mark.parametrize(
    ("answered", "now", "deadline"),
    [
        pytest.param({}, 10.0, None, id="nothing-answered"),
        pytest.param({"me": 9.99}, 10.0, None, id="only-its-own-earlier-answer"),
        pytest.param({"a": 9.99}, 10.0, 10.04, id="an-answer-10-ms-ago"),
        pytest.param({"a": 9.97, "b": 9.99}, 10.0, 10.04, id="the-latest-window-ends-the-wait"),
        pytest.param({"a": 9.9}, 10.0, None, id="a-closed-window-is-not-waited-for"),
    ],
)
def test_the_deadline(answered: dict[str, float], now: float, deadline: float | None) -> None:
    w = learned(0.002)  # a 50 ms window
    for uid, at in answered.items():
        w.answer(uid, at)
    found = w.deadline("me", now)
    assert found == (None if deadline is None else pytest.approx(deadline))
    assert "a" not in w.answered or now - answered["a"] <= 0.05


def test_without_binds_coming_the_filters_stop_waiting_until_one_does() -> None:
    w = BindWindows(0.25)
    for i in range(IN_VAIN_BEFORE_IDLE):
        w.answer(f"p{i}", float(i))
        assert w.deadline(f"p{i + 1}", i + 0.01) == pytest.approx(i + 0.25)
        w.closed(f"p{i + 1}", i + 0.25)
    w.answer("p9", 10.0)
    assert w.deadline("p10", 10.01) is None  # idle: binds go elsewhere
    w.answer("p11", 11.0)
    w.bound("p11", 11.005)  # a bind came: waits resume
    w.answer("p12", 12.0)
    assert w.deadline("p13", 12.01) == pytest.approx(12.25)


def extender(bind_wait: float) -> Coordinator:
    store = ObjectStore()
    store.listed("nodes", [node_body("n1", allocatable={"cpu": "8", "memory": "16Gi"})])
    store.listed("nrts", [nrt_body("n1", [{"cpu": 4, "memory": "8Gi"}] * 2)])
    for kind in ("appgroups", "networktopologies", "pods"):
        store.listed(kind, [])
    return Coordinator(store, api=None, config=ExtenderConfig(bind_wait=bind_wait))


def pod(i: int) -> dict[str, object]:
    return pod_body(f"p{i}", cpu=1, memory="1Gi", namespace="default", uid=f"u-{i}")


async def test_a_pod_never_bound_delays_the_next_filter_by_the_learned_window_only() -> None:
    b = extender(bind_wait=1.0)
    for i in range(LAGS_BEFORE_LEARNING):  # binds that come 1 ms after their filter's answer
        await b.filter(pod(i), ["n1"])
        b.bind_wait.windows.bound(f"u-{i}", time.monotonic() + 0.001)
    await b.filter(pod(100), ["n1"])  # answered, never bound
    started = time.monotonic()
    await b.filter(pod(101), ["n1"])
    assert time.monotonic() - started < 0.5  # the 50 ms floor, not the 1 s limit


async def test_a_filter_still_waits_for_a_bind_that_comes() -> None:
    b = extender(bind_wait=1.0)
    await b.filter(pod(1), ["n1"])

    async def bind_later() -> None:
        await asyncio.sleep(0.05)
        await b.bind("default", "p1", "u-1", "n1")  # no API client: refused, but it arrived

    binding = asyncio.create_task(bind_later())
    started = time.monotonic()
    await b.filter(pod(2), ["n1"])
    waited = time.monotonic() - started
    await binding
    assert 0.04 < waited < 0.9
