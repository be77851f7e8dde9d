"""A pod's filter is kept for its prioritize and bind: what a bind of it reserves, and only the
latest filters."""

import random
from decimal import Decimal

import pytest

from testkit.builders import member_labels, pod_body
from testkit.nrt import nrt
from toposched.schedhook.extender.filtered import KEEP_RESULTS, Filtered, FilterMemory
from toposched.schedhook.placement.evaluate import PlacementConfig, Results, evaluate
from toposched.schedhook.placement.snapshot import snapshot

SNAPSHOT = snapshot(nrts=[nrt("n0", random.Random(0))])


def results(pod: dict[str, object]) -> Results:
    return evaluate(pod, ["n0"], SNAPSHOT, PlacementConfig())


@pytest.mark.parametrize(
    ("pod", "request_", "member"),
    [
        pytest.param(pod_body("p", cpu=2, memory="1Gi"), {"cpu": 2, "memory": 2**30}, None, id="plain"),
        pytest.param(
            pod_body("p", cpu=1, memory="1Gi", labels=member_labels("shop", "web")),
            {"cpu": 1, "memory": 2**30},
            ("shop", "web"),
            id="appgroup-member",
        ),
        pytest.param({"metadata": {"labels": member_labels("shop", "web")}, "spec": 5}, {}, None, id="invalid-pod"),
    ],
)
def test_what_a_bind_reserves(
    pod: dict[str, object], request_: dict[str, int], member: tuple[str, str | None] | None
) -> None:
    kept = Filtered.of(results(pod))
    assert kept.request == {r: Decimal(q) for r, q in request_.items()}
    assert kept.member == member


def test_only_the_latest_filters_are_kept_oldest_forgotten_first() -> None:
    memory = FilterMemory()
    answer = results(pod_body("p", cpu=1, memory="1Gi"))
    for i in range(KEEP_RESULTS + 2):
        memory.keep(f"u-{i}", answer)
    assert len(memory) == KEEP_RESULTS
    assert [memory.get(f"u-{i}") is None for i in range(3)] == [True, True, False]
    memory.keep("u-2", answer)  # filtered again: now the newest
    memory.keep("u-new", answer)
    assert memory.get("u-3") is None
    assert memory.pop("u-2") is not None
    assert memory.pop("u-2") is None  # a bind takes it once
