"""Only the replica whose kube-scheduler holds the Lease acts, as the apiserver says: a standby, one
that has not read the Lease, or one that has seen no renewal for too long refuses the verbs."""

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from toposched.schedhook.extender.acting import Acting, acting_only, holds

ME = "toposched-scheduler-7d9f-abcde"


def lease(holder: str | None, version: str, duration: int = 15) -> dict[str, Any]:
    spec: dict[str, Any] = {"leaseDurationSeconds": duration}
    if holder is not None:
        spec["holderIdentity"] = holder
    return {"metadata": {"name": "toposched-scheduler", "resourceVersion": version}, "spec": spec}


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize(
    ("holder", "expected"),
    [
        pytest.param(f"{ME}_5b1c2e40-8d6e-4a0f-9d43-3b7a1c9b2f11", True, id="client-go-identity"),
        pytest.param(ME, True, id="exactly-the-hostname"),
        pytest.param("toposched-scheduler-7d9f-abcdef_1", False, id="a-longer-hostname"),
        pytest.param("", False, id="no-holder"),
    ],
)
def test_holds(holder: str, expected: bool) -> None:
    assert holds(holder, ME) is expected


def _never_read(acting: Acting, clock: Clock) -> None:
    pass


def _leads(acting: Acting, clock: Clock) -> None:
    acting.observed(lease(f"{ME}_1", "1"))


def _renewing(acting: Acting, clock: Clock) -> None:
    for version in range(20):  # kube-scheduler renews every 2 s
        acting.observed(lease(f"{ME}_1", str(version)))
        clock.t += 2


def _standby(acting: Acting, clock: Clock) -> None:
    acting.observed(lease("toposched-scheduler-other_1", "1"))


def _renewals_stop(acting: Acting, clock: Clock) -> None:
    """The same record read again and again (or no read at all): no renewal seen for 11 s of a 15 s Lease."""
    _leads(acting, clock)
    for _ in range(11):
        clock.t += 1
        acting.observed(lease(f"{ME}_1", "1"))


def _clock_jumps(acting: Acting, clock: Clock) -> None:
    """The wall clock jumping changes nothing: only the monotonic time since a renewal was seen counts."""
    _leads(acting, clock)
    clock.t += 3
    acting.observed(lease(f"{ME}_1", "2"))


def _lost(acting: Acting, clock: Clock) -> None:
    _leads(acting, clock)
    clock.t += 16
    acting.observed(lease("toposched-scheduler-other_1", "9"))


@pytest.mark.parametrize(
    ("step", "why"),
    [
        pytest.param(_never_read, "has not read its kube-scheduler's Lease yet", id="lease-never-read"),
        pytest.param(_leads, "", id="its-scheduler-leads"),
        pytest.param(_renewing, "", id="renewed-every-2s"),
        pytest.param(_clock_jumps, "", id="renewed-after-a-clock-jump"),
        pytest.param(_standby, "is a standby: toposched-scheduler-other_1 holds", id="standby"),
        pytest.param(_renewals_stop, "last seen renewed 11 s ago", id="no-renewal-seen-apiserver-away"),
        pytest.param(_lost, "is a standby", id="another-took-over"),
    ],
)
def test_why_not(step: Callable[[Acting, Clock], None], why: str) -> None:
    clock = Clock()
    acting = Acting(ME, now=clock)
    step(acting, clock)
    if why:
        assert why in acting.why_not()
    else:
        assert acting.why_not() == ""


@pytest.fixture
async def guarded() -> AsyncIterator[tuple[Acting, str]]:
    acting = Acting(ME)

    async def verb(request: web.Request) -> web.Response:
        return web.json_response({"Error": ""})

    app = web.Application(middlewares=[acting_only(acting)])
    app.add_routes([web.post("/bind", verb), web.get("/readyz", verb)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield acting, f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def test_a_standby_refuses_the_verbs_but_answers_the_probes(guarded: tuple[Acting, str]) -> None:
    acting, url = guarded
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/bind", json={}) as r:
            assert r.status == 503
            assert "has not read its kube-scheduler's Lease" in (await r.json())["Error"]
        async with session.get(f"{url}/readyz") as r:
            assert r.status == 200
        acting.observed(lease(f"{ME}_1", "1"))
        async with session.post(f"{url}/bind", json={}) as r:
            assert r.status == 200


async def test_a_refused_call_reads_the_lease_again(guarded: tuple[Acting, str]) -> None:
    """Its kube-scheduler took the Lease since the last poll: the first call reads it again and is
    answered; calls at the same moment share one read, and a failed read keeps refusing."""
    acting, url = guarded
    reads: list[str] = []
    holder = "toposched-scheduler-other_1"

    async def read() -> None:
        reads.append(holder)
        if holder == "away":
            raise OSError("the apiserver is away")
        acting.observed(lease(holder, str(len(reads))))

    acting.reads_with(read)
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/bind", json={}) as r:
            assert r.status == 503
            assert "is a standby" in (await r.json())["Error"]
        holder = f"{ME}_2"
        await asyncio.sleep(0.15)  # REREAD after the last read
        answers = await asyncio.gather(*(session.post(f"{url}/bind", json={}) for _ in range(5)))
        assert [a.status for a in answers] == [200] * 5
        assert reads == ["toposched-scheduler-other_1", f"{ME}_2"]

    stranger = Acting(ME)
    stranger.reads_with(read)
    holder = "away"
    await stranger.reread()
    assert "has not read its kube-scheduler's Lease yet" in stranger.why_not()
