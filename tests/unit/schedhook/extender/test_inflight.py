"""Binds in flight rebuilt from the cluster: a pod bound with predicted zones that its NRT does not
account for yet is held from its annotation by an extender that did not bind it (a standby that
took over, one started again), until the NRT accounts for it."""

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from testkit.builders import node_body, nrt_body, pod_body
from toposched.apis.constants import NRT_ATTR_PODS_FINGERPRINT, NUMA_ZONES_ANNOTATION
from toposched.apis.fingerprint import fingerprint
from toposched.schedhook.extender.clusterview import ClusterView
from toposched.schedhook.extender.reservations import Reservation
from toposched.schedhook.extender.store import ObjectStore, store_key
from toposched.schedhook.placement.evaluate import PlacementConfig, evaluate

ZONE = {"cpu": 3, "memory": "8Gi"}
"""Each of the two zones: 3 exclusive CPUs (a 2 x 4 node with CPU 0 reserved has 3 and 4)."""


def nrt(pods: list[str] | None, version: str = "1") -> dict[str, Any]:
    attributes = {} if pods is None else {NRT_ATTR_PODS_FINGERPRINT: fingerprint(("ns", p) for p in pods)}
    body = nrt_body("n1", [ZONE, ZONE], attributes=attributes)
    body["metadata"]["resourceVersion"] = version
    return body


def bound(name: str, zones: list[str] | None = None, cpu: int = 2) -> dict[str, Any]:
    annotations = {NUMA_ZONES_ANNOTATION: json.dumps(zones)} if zones else None
    body = pod_body(name, namespace="ns", uid=f"uid-{name}", node_name="n1", cpu=cpu, memory="1Gi")
    body["metadata"]["annotations"] = annotations or {}
    return body


def cluster(nrt_body_: dict[str, Any], pods: list[dict[str, Any]]) -> ClusterView:
    store = ObjectStore()
    store.listed("nodes", [node_body("n1", allocatable={"cpu": "8", "memory": "16Gi"})])
    store.listed("nrts", [nrt_body_])
    store.listed("pods", pods)
    for kind in ("appgroups", "networktopologies"):
        store.listed(kind, [])
    return ClusterView(store)


def held(view: ClusterView) -> dict[str, tuple[int, ...]]:
    return {r.pod: r.numa for r in view.settle()}


@pytest.mark.parametrize(
    ("nrt_now", "pods", "expected"),
    [
        pytest.param(nrt([]), [bound("a", ["node-1"])], {"uid-a": (1,)}, id="bound-not-yet-accounted"),
        pytest.param(nrt(["a"]), [bound("a", ["node-1"])], {}, id="accounted"),
        pytest.param(nrt([]), [bound("a")], {}, id="no-zones-predicted"),
        pytest.param(nrt(None), [bound("a", ["node-1"])], {}, id="no-fingerprint-cannot-tell"),
        pytest.param(
            nrt(["a"]), [bound("a", ["node-0"]), bound("b", ["node-1"])], {"uid-b": (1,)}, id="one-bind-behind"
        ),
        # The NRT still counts pod x, deleted since: it is of no set of the node's pods, and says
        # nothing of a or b (holding both again made the node look full).
        pytest.param(nrt(["a", "x"]), [bound("a", ["node-0"]), bound("b", ["node-1"])], {}, id="of-no-set-cannot-tell"),
    ],
)
def test_a_new_leader_holds_the_binds_its_nrt_leaves_out(
    nrt_now: dict[str, Any], pods: list[dict[str, Any]], expected: dict[str, tuple[int, ...]]
) -> None:
    assert held(cluster(nrt_now, pods)) == expected


def _accounted(view: ClusterView) -> None:
    view.store.event("nrts", "MODIFIED", nrt(["a"], version="2"))


def _deleted(view: ClusterView) -> None:
    view.store.event("pods", "DELETED", bound("a", ["node-1"]))


def _kubelet_restarted(view: ClusterView) -> None:
    _accounted(view)
    view.settle()
    view.store.event("nrts", "MODIFIED", nrt([], version="3"))  # it shows node-1 free again


def _let_go(view: ClusterView) -> None:
    """Deleted gracefully: its kubelet let go of it once its containers stopped, seconds before
    the pod object is gone, and its NRT counts its zone free."""
    _accounted(view)
    view.settle()
    deleting = bound("a", ["node-1"])
    deleting["metadata"]["deletionTimestamp"] = "2026-11-28T09:00:00Z"
    view.store.event("pods", "MODIFIED", deleting)
    view.store.event("nrts", "MODIFIED", nrt([], version="3"))


@pytest.mark.parametrize(
    ("then", "expected"),
    [
        pytest.param(lambda view: None, {"uid-a": (1,)}, id="still-in-flight"),
        pytest.param(_let_go, {}, id="being-deleted-and-let-go-not-held-again"),
        pytest.param(_accounted, {}, id="its-nrt-accounts-for-it"),
        pytest.param(_deleted, {}, id="the-pod-deleted"),
        pytest.param(_kubelet_restarted, {"uid-a": (1,)}, id="held-again-when-the-nrt-went-back"),
    ],
)
def test_a_rebuilt_reservation_ends_as_the_ledger_says(
    then: Callable[[ClusterView], None], expected: dict[str, tuple[int, ...]]
) -> None:
    view = cluster(nrt([]), [bound("a", ["node-1"])])
    view.settle()
    then(view)
    assert held(view) == expected


def test_the_ledger_s_own_reservation_is_not_held_twice() -> None:
    view = cluster(nrt([]), [])
    mine = Reservation("uid-a", "n1", (0,), {"cpu": Decimal(2)}, key=store_key("ns", "a"))
    view.ledger.reserve(mine)
    view.store.event("pods", "ADDED", bound("a", ["node-0"]))
    view.settle()
    assert view.ledger.by_pod == {"uid-a": mine}


def test_a_standby_that_took_over_does_not_give_away_zones_bound_a_moment_before() -> None:
    """The acting replica bound ``a`` (2 CPUs) to node-1 and was lost before the NRT showed it: the
    new leader sees node-1 with 1 CPU left, so a 2-CPU pod goes to node-0."""
    view = cluster(nrt([]), [bound("a", ["node-1"])])
    result = evaluate(pod_body("next", cpu=2, memory="1Gi"), ["n1"], view.snapshot(), PlacementConfig()).node(0)
    assert result.fit
    assert result.numa_zones == ["node-0"]
    third = pod_body("third", cpu=3, memory="1Gi")
    view.ledger.reserve(Reservation("uid-next", "n1", (0,), {"cpu": Decimal(2)}, key=store_key("ns", "next")))
    assert not evaluate(third, ["n1"], view.snapshot(), PlacementConfig()).node(0).fit
