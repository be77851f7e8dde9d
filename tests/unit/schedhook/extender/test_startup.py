"""A cold start's breakdown: each step once, the first list of each kind, one line at Ready."""

import logging

import pytest

from toposched.kube.watch import ListStats
from toposched.schedhook.extender.startup import START_SECONDS, StartUp, summary


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def gauge(step: str) -> float:
    return float(START_SECONDS.labels(step)._value.get())


def test_a_start_is_told_once_at_ready_with_every_step(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    start = StartUp(process_start=98.5, clock=clock)
    start.begin_lists()
    clock.now = 104.0
    start.listed("nodes", ListStats(seconds=3.5, parse_seconds=0.5, pages=1, bytes=3 * 2**20, objects=1000))
    start.stored("nodes", 0.25)
    start.listed("nodes", ListStats(seconds=9.0))  # a later list (a failed watch) is not the start's
    start.stored("nodes", 9.0)
    start.all_listed()
    with start.timed("parse"):
        clock.now = 105.5
    with caplog.at_level(logging.INFO, logger="toposched.schedhook.extender.startup"):
        start.ready()
        start.ready()
    assert [r.getMessage() for r in caplog.records] == [
        "ready in 7.0 s; before lists 1.5 s; nodes 1000 (3.0 MiB) listed in 3.5 s, parse 0.5 s, store 0.2 s; "
        "all listed in 4.0 s; parse 1.5 s"
    ]
    assert {step: gauge(step) for step in ("before_lists", "list_nodes", "store_nodes", "lists", "ready")} == {
        "before_lists": 1.5,
        "list_nodes": 3.5,
        "store_nodes": 0.25,
        "lists": 4.0,
        "ready": 7.0,
    }


@pytest.mark.parametrize(
    ("steps", "lists", "line"),
    [
        pytest.param({}, {}, "ready in 0.0 s; before lists 0.0 s", id="nothing-measured"),
        pytest.param(
            {"ready": 9.1, "before_lists": 1.2, "store_pods": 0.4, "lists": 6.0, "table": 0.5, "knowledge": 0.2},
            {"pods": ListStats(seconds=5.0, parse_seconds=1.0, bytes=2**21, objects=20)},
            "ready in 9.1 s; before lists 1.2 s; pods 20 (2.0 MiB) listed in 5.0 s, parse 1.0 s, store 0.4 s; "
            "all listed in 6.0 s; knowledge 0.2 s, table 0.5 s",
            id="warm-steps-in-their-order",
        ),
    ],
)
def test_the_ready_line(steps: dict[str, float], lists: dict[str, ListStats], line: str) -> None:
    assert summary(steps, lists) == line
