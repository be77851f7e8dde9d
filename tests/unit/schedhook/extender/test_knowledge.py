"""Where the extender is blind: a NUMA-managed node without its NRT, or with an NRT that leaves
out bound pods; an exclusive pod fails such a node saying why, other pods do not."""

from collections.abc import Callable
from typing import Any

import pytest

from testkit.builders import node_body, nrt_body, pod_body
from toposched.apis.constants import NRT_ATTR_PODS_FINGERPRINT, TOPOLOGY_MANAGER_POLICY_LABEL
from toposched.apis.fingerprint import fingerprint
from toposched.schedhook.extender.binder import Binder
from toposched.schedhook.extender.store import ObjectStore
from toposched.schedhook.placement.evaluate import PlacementConfig, evaluate

EXCLUSIVE = pod_body("p", cpu=2, memory="1Gi")  # Guaranteed, integral CPUs
SHARED = pod_body("q", cpu="500m", memory="1Gi", guaranteed=False)


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def extender(clock: Clock, labelled: bool, grace: float = 600) -> Binder:
    store = ObjectStore()
    labels = {TOPOLOGY_MANAGER_POLICY_LABEL: "single-numa-node"} if labelled else {}
    node = node_body("n1", allocatable={"cpu": "8", "memory": "16Gi"})
    node["metadata"].setdefault("labels", {}).update(labels)
    store.listed("nodes", [node])
    for kind in ("nrts", "appgroups", "networktopologies", "pods"):
        store.listed(kind, [])
    binder = Binder(store, api=None, weights_name="NetperfCosts", nrt_grace=grace, stale_after=30)
    binder.knowledge.now = clock
    return binder


def nrt(pods: list[tuple[str, str]] | None = None, version: str = "1") -> dict[str, Any]:
    attributes = {} if pods is None else {NRT_ATTR_PODS_FINGERPRINT: fingerprint(pods)}
    body = nrt_body("n1", [{"cpu": 4, "memory": "8Gi"}] * 2, attributes=attributes)
    body["metadata"]["resourceVersion"] = version
    return body


def answer(binder: Binder, pod: dict[str, Any]) -> tuple[bool, str]:
    result = evaluate(pod, ["n1"], binder.snapshot(), PlacementConfig()).node(0)
    return result.fit, result.reason


Step = Callable[[Binder, Clock], None]


def nrt_deleted(binder: Binder, clock: Clock) -> None:
    binder.store.event("nrts", "ADDED", nrt())
    binder.snapshot()
    clock.t += 5
    binder.store.event("nrts", "DELETED", nrt())


def nothing(binder: Binder, clock: Clock) -> None:
    pass


def grace_over(binder: Binder, clock: Clock) -> None:
    nrt_deleted(binder, clock)
    binder.snapshot()
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
    binder = extender(clock, labelled)
    step(binder, clock)
    fit, reason = answer(binder, EXCLUSIVE)
    assert fit is not blind
    if blind:
        assert reason.startswith("NRT of n1 missing since ")
        assert "not publishing" in reason
    assert answer(binder, SHARED)[0]  # a pod that needs nothing exclusive is judged as before


def test_an_nrt_that_leaves_out_a_bound_pod_turns_stale_and_recovers() -> None:
    clock = Clock()
    binder = extender(clock, labelled=True)
    binder.store.event("nrts", "ADDED", nrt([]))
    bound = pod_body("old", namespace="ns", node_name="n1", cpu=1, memory="1Gi")
    binder.store.event("pods", "ADDED", bound)
    binder.store.pods.bound_at["ns/old"] = clock.t
    assert answer(binder, EXCLUSIVE)[0]  # an NRT a little behind is the usual
    clock.t += 31
    fit, reason = answer(binder, EXCLUSIVE)
    assert not fit
    assert reason.startswith("NRT of n1 is stale: 1 pod(s) bound since ")
    binder.store.event("nrts", "MODIFIED", nrt([("ns", "old")], version="2"))
    assert answer(binder, EXCLUSIVE)[0]
