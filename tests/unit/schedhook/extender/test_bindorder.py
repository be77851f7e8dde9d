"""A node's binding calls go out in the order their zones were predicted; other nodes do not wait."""

import asyncio

import pytest

from toposched.schedhook.extender.bindorder import NodeBindOrder

Call = tuple[str, str, float, bool]  # (pod, node, seconds the API call takes, whether it fails)


async def run(calls: list[Call], wait: float = 10.0) -> list[str]:
    """Enter each call's turn in list order (as bind does, right after reserving) and return
    when each API call started (its pod) and ended (its pod and a dot)."""
    order = NodeBindOrder(wait=wait)
    started: list[str] = []

    async def bind(pod: str, node: str, seconds: float, fails: bool) -> None:
        async with order.turn(node):
            started.append(pod)
            await asyncio.sleep(seconds)
            started.append(f"{pod}.")
            if fails:
                raise RuntimeError("the apiserver said no")

    results = await asyncio.gather(*(bind(*c) for c in calls), return_exceptions=True)
    assert all(r is None or isinstance(r, RuntimeError) for r in results)
    return started


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        pytest.param(
            [("a", "n1", 0.05, False), ("b", "n1", 0.0, False)],
            ["a", "a.", "b", "b."],
            id="same-node-second-waits-for-slow-first",
        ),
        pytest.param(
            [("a", "n1", 0.05, False), ("b", "n2", 0.0, False), ("c", "n1", 0.0, False)],
            ["a", "b", "b.", "a.", "c", "c."],
            id="other-node-does-not-wait",
        ),
        pytest.param(
            [("a", "n1", 0.02, True), ("b", "n1", 0.0, False)],
            ["a", "a.", "b", "b."],
            id="a-failed-call-still-lets-the-next-go",
        ),
        pytest.param(
            [("a", "n1", 0.03, False), ("b", "n1", 0.02, False), ("c", "n1", 0.0, False)],
            ["a", "a.", "b", "b.", "c", "c."],
            id="three-in-a-row",
        ),
    ],
)
async def test_a_nodes_calls_run_one_at_a_time_in_prediction_order(calls: list[Call], expected: list[str]) -> None:
    assert await run(calls) == expected


async def test_a_node_with_nothing_in_flight_forgets_its_turns() -> None:
    order = NodeBindOrder()
    async with order.turn("n1"):
        pass
    assert not order._last


async def test_a_hung_call_holds_the_next_one_back_only_as_long_as_the_wait() -> None:
    order = NodeBindOrder(wait=0.05)
    release = asyncio.Event()
    second_started = asyncio.Event()

    async def hung() -> None:
        async with order.turn("n1"):
            await release.wait()

    async def second() -> None:
        async with order.turn("n1"):
            second_started.set()

    first = asyncio.create_task(hung())
    await asyncio.sleep(0)
    await asyncio.wait_for(asyncio.gather(second(), second_started.wait()), 1)
    release.set()
    await first
