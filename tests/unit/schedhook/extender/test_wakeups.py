"""The pods the filter refused, woken once room may have freed after their filter: each once per
freeing, again only after its own doubling wait, within a budget a second, oldest refusal first;
forgotten once bound, gone or placeable."""

from collections.abc import Callable
from typing import Any

import pytest

from testkit.builders import node_body, nrt_body, pod_body
from testkit.extender import in_process
from toposched.schedhook.extender.wakeups import Refused, Wakeups, refused_earlier, refused_pod
from toposched.schedhook.placement.evaluate import PlacementConfig, evaluate
from toposched.schedhook.placement.snapshot import snapshot


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


Steps = Callable[[Wakeups, Clock], list[list[str]]]
"""A scenario: what happens, and the names ``due`` handed out at each look."""


def refuse(wakeups: Wakeups, clock: Clock, name: str, looked: float | None = None) -> None:
    wakeups.filtered(f"uid-{name}", ("ns", name), clock.t if looked is None else looked)


def due(wakeups: Wakeups, gone: Callable[[str, Refused], bool] = lambda uid, pod: False) -> list[str]:
    return [pod.name for _, pod in wakeups.due(gone)]


def _refused_then_freed(w: Wakeups, clock: Clock) -> list[list[str]]:
    refuse(w, clock, "a")
    clock.t += 1
    w.freed()
    return [due(w)]


def _freed_before_the_filter(w: Wakeups, clock: Clock) -> list[list[str]]:
    w.freed()
    clock.t += 1
    refuse(w, clock, "a")
    return [due(w)]


def _freed_while_the_filter_was_under_way(w: Wakeups, clock: Clock) -> list[list[str]]:
    """The filter looked at the cluster before the freeing, and is recorded after the round."""
    looked = clock.t
    clock.t += 1
    w.freed()
    first = due(w)
    refuse(w, clock, "a", looked=looked)
    return [first, due(w)]


def _nothing_freed(w: Wakeups, clock: Clock) -> list[list[str]]:
    refuse(w, clock, "a")
    clock.t += 60
    return [due(w)]


def _filtered_again_with_a_node(w: Wakeups, clock: Clock) -> list[list[str]]:
    refuse(w, clock, "a")
    w.filtered("uid-a", None, clock.t)
    clock.t += 1
    w.freed()
    return [due(w)]


def _bound_by_the_extender(w: Wakeups, clock: Clock) -> list[list[str]]:
    refuse(w, clock, "a")
    w.forget("uid-a")
    clock.t += 1
    w.freed()
    return [due(w)]


def _bound_by_another_binder(w: Wakeups, clock: Clock) -> list[list[str]]:
    refuse(w, clock, "a")
    refuse(w, clock, "b")
    clock.t += 1
    w.freed()
    return [due(w, gone=lambda uid, pod: pod.name == "a"), [str(len(w))]]


def _once_per_freeing(w: Wakeups, clock: Clock) -> list[list[str]]:
    refuse(w, clock, "a")
    clock.t += 1
    w.freed()
    first = due(w)
    clock.t += 5
    return [first, due(w)]


def _freed_again_within_its_wait(w: Wakeups, clock: Clock) -> list[list[str]]:
    """Woken, then room frees again half a second later: the pod waits out its second first."""
    refuse(w, clock, "a")
    clock.t += 1
    w.freed()
    looks = [due(w)]
    clock.t += 0.5
    w.freed()
    looks.append(due(w))
    clock.t += 0.5
    looks.append(due(w))
    return looks


def _refused_again_backs_off(w: Wakeups, clock: Clock) -> list[list[str]]:
    """Each wake that ends in another refusal doubles the wait: 1 s, then 2 s."""
    looks = []
    refuse(w, clock, "a")
    for _ in range(2):
        clock.t += 1
        w.freed()
        looks.append(due(w))
        clock.t += 0.1
        refuse(w, clock, "a")
    clock.t += 1
    w.freed()
    looks.append(due(w))  # 1.1 s after the second wake
    clock.t += 1
    looks.append(due(w))  # 2.1 s after it
    return looks


def _a_backlog_within_the_budget(w: Wakeups, clock: Clock) -> list[list[str]]:
    """30 pods refused, room frees: 20 at once (oldest refusal first), the rest as the budget refills."""
    for i in range(30):
        refuse(w, clock, f"p{i:02d}")
    clock.t += 1
    w.freed()
    looks = [due(w)]
    clock.t += 0.25
    looks.append(due(w))
    clock.t += 1
    looks.append(due(w))
    return [[look[0], look[-1], str(len(look))] if look else [] for look in looks]


def _adopted_on_starting_to_act(w: Wakeups, clock: Clock) -> list[list[str]]:
    """Refused by a predecessor at a time unknown: due at once, ahead of this replica's own, then
    kept like any other (once per freeing)."""
    refuse(w, clock, "own")
    clock.t += 1
    w.adopt([("uid-old", ("ns", "old")), ("uid-own", ("ns", "own"))])  # one known already
    first = due(w)
    clock.t += 5
    return [first, due(w)]


def _refused_again_is_the_newest(w: Wakeups, clock: Clock) -> list[list[str]]:
    refuse(w, clock, "a")
    refuse(w, clock, "b", looked=clock.t + 0.1)
    refuse(w, clock, "a", looked=clock.t + 0.2)
    clock.t += 1
    w.freed()
    return [due(w)]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        pytest.param(_refused_then_freed, [["a"]], id="refused-then-room-frees"),
        pytest.param(_freed_before_the_filter, [[]], id="room-freed-before-its-filter-looked"),
        pytest.param(_freed_while_the_filter_was_under_way, [[], ["a"]], id="room-freed-while-its-filter-ran"),
        pytest.param(_nothing_freed, [[]], id="nothing-freed-nothing-woken"),
        pytest.param(_filtered_again_with_a_node, [[]], id="filtered-again-with-a-node-forgotten"),
        pytest.param(_bound_by_the_extender, [[]], id="bound-by-the-extender-forgotten"),
        pytest.param(_bound_by_another_binder, [["b"], ["1"]], id="bound-by-another-binder-forgotten"),
        pytest.param(_once_per_freeing, [["a"], []], id="woken-once-per-freeing"),
        pytest.param(_freed_again_within_its_wait, [["a"], [], ["a"]], id="freed-again-waits-out-its-second"),
        pytest.param(_refused_again_backs_off, [["a"], ["a"], [], ["a"]], id="refused-again-waits-twice-as-long"),
        pytest.param(
            _a_backlog_within_the_budget,
            [["p00", "p19", "20"], ["p20", "p24", "5"], ["p25", "p29", "5"]],
            id="a-backlog-within-20-a-second",
        ),
        pytest.param(_refused_again_is_the_newest, [["b", "a"]], id="oldest-refusal-first"),
        pytest.param(_adopted_on_starting_to_act, [["old", "own"], []], id="adopted-on-acting-woken-once-first"),
    ],
)
def test_which_refused_pods_are_woken(steps: Steps, expected: list[list[str]]) -> None:
    clock = Clock()
    assert steps(Wakeups(now=clock), clock) == expected


def test_the_oldest_refusals_are_forgotten_beyond_the_limit() -> None:
    clock = Clock()
    wakeups = Wakeups(keep=2, now=clock)
    for name in "abc":
        refuse(wakeups, clock, name)
    assert (len(wakeups), "uid-a" in wakeups, "uid-c" in wakeups) == (2, False, True)


NODE = nrt_body("n1", [{"cpu": 2, "memory": "8Gi"}] * 2)


def _pod(cpu: int) -> dict[str, Any]:
    return pod_body("p", namespace="ns", uid="uid-p", cpu=cpu, memory="1Gi")


@pytest.mark.parametrize(
    ("pod", "names", "expected"),
    [
        pytest.param(_pod(1), ["n1"], None, id="a-node-fits"),
        pytest.param(_pod(3), ["n1"], ("ns", "p"), id="no-zone-has-room"),
        pytest.param(_pod(3), [], None, id="no-candidates"),
        pytest.param({"metadata": {"name": "p", "uid": "u"}, "spec": 5}, ["n1"], None, id="the-pod-cannot-be-read"),
    ],
)
def test_which_filters_leave_a_pod_to_wake(
    pod: dict[str, Any], names: list[str], expected: tuple[str, str] | None
) -> None:
    results = evaluate(pod, names, snapshot(nrts=[NODE]), PlacementConfig())
    assert refused_pod(pod, results) == expected


async def test_the_coordinator_keeps_the_pods_its_filter_refused_until_one_fits_or_binds() -> None:
    coordinator = in_process({"nodes": [node_body("n1")], "nrts": [NODE]})
    kept = []
    for pod in (_pod(3), _pod(1), _pod(3)):
        await coordinator.filter(pod, ["n1"])
        kept.append("uid-p" in coordinator.wakeups)
    await coordinator.bind("ns", "p", "uid-p", "n1")  # no API here: refused, but kube-scheduler chose a node
    assert [*kept, "uid-p" in coordinator.wakeups] == [True, False, True, False]


REFUSED = "0/3 nodes are available: 3 toposched: cannot align container"


def _held(reason: str = "Unschedulable", message: str = REFUSED, **meta: Any) -> dict[str, Any]:
    """An unbound pod with the PodScheduled condition kube-scheduler writes."""
    pod = pod_body("p", namespace="ns", uid="uid-p", cpu=1, memory="1Gi")
    pod["metadata"].update(meta)
    pod["status"] = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": reason, "message": message}]}
    return pod


def _bound_pod() -> dict[str, Any]:
    pod = _held()
    pod["spec"]["nodeName"] = "n1"
    return pod


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(_held(), ("uid-p", ("ns", "p")), id="refused-by-the-extender"),
        pytest.param(_held(message="0/3 nodes are available: 3 Insufficient cpu."), None, id="refused-by-a-plugin"),
        pytest.param(_held(reason="SchedulingGated", message="toposched: gated"), None, id="gated"),
        pytest.param(_held(deletionTimestamp="2026-01-01T00:00:00Z"), None, id="being-deleted"),
        pytest.param(_bound_pod(), None, id="bound"),
        pytest.param({"metadata": {"name": "p", "namespace": "ns"}, "status": _held()["status"]}, None, id="no-uid"),
        pytest.param({"metadata": {"uid": "u", "name": "p", "namespace": "ns"}}, None, id="no-status"),
        pytest.param(
            {"metadata": {"uid": "u", "name": "p", "namespace": "ns"}, "status": {"conditions": ["x"]}},
            None,
            id="a-condition-not-an-object",
        ),
    ],
)
def test_which_unbound_pods_a_replica_adopts_on_starting_to_act(
    pod: dict[str, Any], expected: tuple[str, tuple[str, str]] | None
) -> None:
    assert refused_earlier(pod) == expected
