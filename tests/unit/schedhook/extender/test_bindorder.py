"""A node's binding calls go out in the order their zones were predicted, except calls in a row of
one kind (shape and zones), which go together; other nodes do not wait."""

import asyncio

import pytest

from toposched.schedhook.extender.bindorder import NodeBindOrder

Call = tuple[str, str, float, bool] | tuple[str, str, float, bool, str]
"""(pod, node, seconds the API call takes, whether it fails[, its kind: shape and zones])."""


async def run(calls: list[Call], wait: float = 10.0) -> list[str]:
    """Enter each call's turn in list order (as bind does, right after reserving) and return
    when each API call started (its pod) and ended (its pod and a dot)."""
    order = NodeBindOrder(wait=wait)
    started: list[str] = []

    async def bind(pod: str, node: str, seconds: float, fails: bool, kind: str | None = None) -> None:
        async with order.turn(node, kind):
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
        pytest.param(
            [("a", "n1", 0.05, False, "k1"), ("b", "n1", 0.0, False, "k1")],
            ["a", "b", "b.", "a."],
            id="same-kind-in-a-row-go-together",
        ),
        pytest.param(
            [("a", "n1", 0.05, False, "k1"), ("b", "n1", 0.03, False, "k1"), ("c", "n1", 0.0, False, "k2")],
            ["a", "b", "b.", "a.", "c", "c."],
            id="another-kind-waits-for-the-whole-run",
        ),
        pytest.param(
            [("a", "n1", 0.03, False, "k1"), ("b", "n1", 0.02, False, "k2"), ("c", "n1", 0.0, False, "k2")],
            ["a", "a.", "b", "c", "c.", "b."],
            id="a-run-waits-for-the-kind-before-it",
        ),
        pytest.param(
            [("a", "n1", 0.03, False, "k1"), ("b", "n1", 0.03, False, "k2"), ("c", "n1", 0.0, False, "k1")],
            ["a", "a.", "b", "b.", "c", "c."],
            id="a-kind-seen-before-another-does-not-join-its-old-run",
        ),
        pytest.param(
            [("a", "n1", 0.03, False), ("b", "n1", 0.0, False)],
            ["a", "a.", "b", "b."],
            id="no-kind-is-like-no-other",
        ),
        pytest.param(
            [("a", "n1", 0.03, True, "k1"), ("b", "n1", 0.0, False, "k1"), ("c", "n1", 0.0, False, "k2")],
            ["a", "b", "b.", "a.", "c", "c."],
            id="a-failed-call-of-a-run-still-lets-the-next-kind-go",
        ),
    ],
)
async def test_a_nodes_calls_go_in_prediction_order_one_kind_together(calls: list[Call], expected: list[str]) -> None:
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
