"""Which gated AppGroup pods may be scheduled now: topology order, timeouts, no order yet."""

from datetime import UTC, datetime, timedelta

import pytest

from toposched.schedhook.controllers.order_gates import GatedPod, Release, to_release

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ORDER = {"frontend": 1, "cart": 2, "redis": 3}


def gp(name: str, workload: str, gated: bool = True, bound: bool = False, age: float = 0) -> GatedPod:
    return GatedPod(name, workload, NOW - timedelta(seconds=age), gated, bound)


@pytest.mark.parametrize(
    ("pods", "order", "released"),
    [
        ([gp("f", "frontend"), gp("c", "cart"), gp("r", "redis")], ORDER, [Release("f", "order")]),
        (
            [gp("f", "frontend", gated=False, bound=True), gp("c", "cart"), gp("r", "redis")],
            ORDER,
            [Release("c", "order")],
        ),
        ([gp("f", "frontend", gated=False), gp("c", "cart", age=31)], ORDER, [Release("c", "timeout")]),
        (
            [gp("c", "cart"), gp("r", "redis")],
            ORDER,
            [Release("c", "order")],
        ),  # no frontend pod exists: nothing to wait for
        ([gp("x", "stranger")], ORDER, [Release("x", "no-order")]),
        ([gp("c", "cart")], None, [Release("c", "no-order")]),
    ],
    ids=[
        "first-workload-first",
        "next-after-bound",
        "timeout",
        "missing-earlier-pods",
        "unknown-workload",
        "no-order-yet",
    ],
)
def test_release_in_topology_order(pods: list[GatedPod], order: dict[str, int] | None, released: list[Release]) -> None:
    assert to_release(pods, order, NOW, timedelta(seconds=30)) == released


def test_young_pods_settle_first() -> None:
    pods = [gp("c", "cart", age=1), gp("f", "frontend", age=3)]
    released = to_release(pods, ORDER, NOW, timedelta(seconds=30), settle=timedelta(seconds=2))
    assert released == [Release("f", "order")]
