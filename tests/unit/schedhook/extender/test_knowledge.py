"""Where the extender is blind: a NUMA-managed node without its NRT, or with an NRT that leaves
out bound pods; an exclusive pod fails such a node saying why, other pods do not."""

from collections.abc import Callable
from typing import Any

import pytest

from testkit.builders import node_body, nrt_body, pod_body
from toposched.apis.constants import NRT_ATTR_PODS_FINGERPRINT, TOPOLOGY_MANAGER_POLICY_LABEL
from toposched.apis.fingerprint import fingerprint
from toposched.schedhook.extender.clusterview import ClusterView
from toposched.schedhook.extender.knowledge import Knowledge
from toposched.schedhook.extender.store import ObjectStore, store_key
from toposched.schedhook.placement.evaluate import PlacementConfig, evaluate

EXCLUSIVE = pod_body("p", cpu=2, memory="1Gi")  # Guaranteed, integral CPUs
SHARED = pod_body("q", cpu="500m", memory="1Gi", guaranteed=False)


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def extender(clock: Clock, labelled: bool, grace: float = 600) -> ClusterView:
    store = ObjectStore()
    labels = {TOPOLOGY_MANAGER_POLICY_LABEL: "single-numa-node"} if labelled else {}
    node = node_body("n1", allocatable={"cpu": "8", "memory": "16Gi"})
    node["metadata"].setdefault("labels", {}).update(labels)
    store.listed("nodes", [node])
    for kind in ("nrts", "appgroups", "networktopologies", "pods"):
        store.listed(kind, [])
    return ClusterView(store, Knowledge(store, grace, stale_after=30, now=clock))


def nrt(pods: list[tuple[str, str]] | None = None, version: str = "1") -> dict[str, Any]:
    attributes = {} if pods is None else {NRT_ATTR_PODS_FINGERPRINT: fingerprint(pods)}
    body = nrt_body("n1", [{"cpu": 4, "memory": "8Gi"}] * 2, attributes=attributes)
    body["metadata"]["resourceVersion"] = version
    return body


def answer(view: ClusterView, pod: dict[str, Any]) -> tuple[bool, str]:
    result = evaluate(pod, ["n1"], view.snapshot(), PlacementConfig()).node(0)
    return result.fit, result.reason


def judged(view: ClusterView, blind: bool, *said: str) -> None:
    """An exclusive pod fails a blind node, the reason beginning with ``said[0]`` and saying the
    rest; a pod that needs nothing exclusive is judged as before."""
    fit, reason = answer(view, EXCLUSIVE)
    assert fit is not blind
    if blind:
        assert reason.startswith(said[0]), reason
        assert all(part in reason for part in said[1:]), reason
    assert answer(view, SHARED)[0]


Step = Callable[[ClusterView, Clock], None]


def nrt_deleted(view: ClusterView, clock: Clock) -> None:
    view.store.event("nrts", "ADDED", nrt())
    view.snapshot()
    clock.t += 5
    view.store.event("nrts", "DELETED", nrt())


def nothing(view: ClusterView, clock: Clock) -> None:
    pass


def grace_over(view: ClusterView, clock: Clock) -> None:
    nrt_deleted(view, clock)
    view.snapshot()
    clock.t += 601


@pytest.mark.parametrize(
    ("labelled", "step", "blind"),
    [
        pytest.param(True, nothing, True, id="labelled-never-published"),
        pytest.param(False, nothing, False, id="never-numa-managed"),
        pytest.param(False, nrt_deleted, True, id="had-an-nrt-within-the-grace"),
        pytest.param(False, grace_over, False, id="had-an-nrt-grace-over"),
        pytest.param(True, grace_over, True, id="labelled-whatever-the-grace"),
    ],
)
def test_a_node_missing_its_nrt(labelled: bool, step: Step, blind: bool) -> None:
    clock = Clock()
    view = extender(clock, labelled)
    step(view, clock)
    judged(view, blind, "NRT of n1 missing since ", "not publishing")


def test_an_nrt_that_leaves_out_a_bound_pod_turns_stale_and_recovers() -> None:
    clock = Clock()
    view = extender(clock, labelled=True)
    view.store.event("nrts", "ADDED", nrt([]))
    bound = pod_body("old", namespace="ns", node_name="n1", cpu=1, memory="1Gi")
    view.store.event("pods", "ADDED", bound)
    view.store.pods.bound_at[store_key("ns", "old")] = clock.t
    assert answer(view, EXCLUSIVE)[0]  # an NRT a little behind is the usual
    clock.t += 31
    fit, reason = answer(view, EXCLUSIVE)
    assert not fit
    assert reason.startswith("NRT of n1 is stale: 1 pod(s) bound since ")
    view.store.event("nrts", "MODIFIED", nrt([("ns", "old")], version="2"))
    assert answer(view, EXCLUSIVE)[0]


def _restarted(view: ClusterView, clock: Clock) -> None:
    """The running pod ``old`` counted, then the kubelet restarts: its NRT counts no pod (and shows
    every CPU free) until it has admitted ``old`` again from its checkpoint."""
    view.store.event("pods", "ADDED", pod_body("old", namespace="ns", node_name="n1", cpu=3, memory="1Gi"))
    view.store.event("nrts", "MODIFIED", nrt([("ns", "old")], version="2"))
    assert answer(view, EXCLUSIVE)[0]
    clock.t += 1
    view.store.event("nrts", "MODIFIED", nrt([], version="3"))
    view.snapshot()


def _readmitted(view: ClusterView, clock: Clock) -> None:
    view.store.event("nrts", "MODIFIED", nrt([("ns", "old")], version="4"))


def _ended(view: ClusterView, clock: Clock) -> None:
    view.store.event("pods", "DELETED", pod_body("old", namespace="ns", node_name="n1"))


def _terminating(view: ClusterView, clock: Clock) -> None:
    body = pod_body("old", namespace="ns", node_name="n1", cpu=3, memory="1Gi")
    body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    view.store.event("pods", "MODIFIED", body)


def _unknown_set(view: ClusterView, clock: Clock) -> None:
    view.store.event("nrts", "MODIFIED", nrt([("ns", "other")], version="4"))


@pytest.mark.parametrize(
    ("then", "blind"),
    [
        pytest.param(nothing, True, id="right-after-the-restart"),
        pytest.param(_unknown_set, True, id="an-nrt-of-no-known-set-changes-nothing"),
        pytest.param(_readmitted, False, id="the-pod-counted-again"),
        pytest.param(_ended, False, id="the-pod-ended"),
        pytest.param(_terminating, False, id="the-pod-being-deleted"),
    ],
)
def test_an_nrt_that_went_back_blinds_the_node_at_once_until_it_counts_the_pods_again(then: Step, blind: bool) -> None:
    """The chaos run's kubelet restart (seed 11): a pod bound a second after it found no CPU hint."""
    clock = Clock()
    view = extender(clock, labelled=True)
    _restarted(view, clock)
    then(view, clock)
    judged(view, blind, "NRT of n1 went back at ", "no longer counts 1 pod(s) still running there")


def test_a_node_turning_blind_is_told_once_each_time() -> None:
    clock = Clock()
    told: list[tuple[str, str]] = []
    store = extender(clock, labelled=True).store
    knowledge = Knowledge(store, now=clock, turned_blind=lambda node, why: told.append((node["metadata"]["name"], why)))
    assert set(knowledge.blind_nodes()) == {"n1"}  # labelled, never published
    knowledge.blind_nodes()
    assert [name for name, _ in told] == ["n1"]
    assert told[0][1].startswith("NRT of n1 missing since ")
    store.event("nrts", "ADDED", nrt())
    assert knowledge.blind_nodes() == {}
    store.event("nrts", "DELETED", nrt())
    knowledge.blind_nodes()
    assert [name for name, _ in told] == ["n1", "n1"]
