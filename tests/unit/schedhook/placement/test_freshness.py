"""Reservations end when the NRT's pods fingerprint shows it accounts for the pod."""

import time
from decimal import Decimal
from typing import Any

import pytest

from testkit.builders import nrt_body, pod_body
from toposched.apis.fingerprint import METHOD_ALL, METHOD_EXCLUSIVE, fingerprint
from toposched.schedhook.extender.clusterview import ClusterView
from toposched.schedhook.extender.reservations import Reservation
from toposched.schedhook.extender.store import GONE_SECONDS, ObjectStore, store_key
from toposched.schedhook.placement.freshness import accounted, left_out, matched, went_back
from toposched.schedhook.placement.kubelet.claims import holds_exclusive
from toposched.schedhook.placement.model import Pod
from toposched.schedhook.placement.parse import pod_from_spec


def pod(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> Pod:
    resources = {"requests": requests or {}, "limits": limits or {}}
    return pod_from_spec({"containers": [{"name": "c", "resources": resources}]})


GUARANTEED_2 = pod(limits={"cpu": "2", "memory": "1Gi"})
GUARANTEED_HALF = pod(limits={"cpu": "500m", "memory": "1Gi"})
BURSTABLE_GPU = pod(requests={"cpu": "1", "example.com/gpu": "1"})
BEST_EFFORT = pod()


@pytest.mark.parametrize(
    ("p", "cpu_manager", "memory_manager", "expected"),
    [
        pytest.param(GUARANTEED_2, "static", "None", True, id="integral-cpus-static"),
        pytest.param(GUARANTEED_2, "none", "None", False, id="integral-cpus-no-cpu-manager"),
        pytest.param(GUARANTEED_2, "none", "Static", True, id="pinned-memory"),
        pytest.param(GUARANTEED_HALF, "static", "None", False, id="fractional-cpus"),
        pytest.param(BURSTABLE_GPU, "none", "None", True, id="a-device"),
        pytest.param(BEST_EFFORT, "static", "Static", False, id="best-effort"),
    ],
)
def test_exclusive(p: Pod, cpu_manager: str, memory_manager: str, expected: bool) -> None:
    assert holds_exclusive(p, cpu_manager, memory_manager) is expected


PODS = [("ns", "a", GUARANTEED_2), ("ns", "b", BEST_EFFORT)]


def published(pods: list[tuple[str, str]], method: str) -> dict[str, str]:
    return {"nodeTopologyPodsFingerprint": fingerprint(pods), "nodeTopologyPodsFingerprintMethod": method}


A, B = ("ns", "a"), ("ns", "b")


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        pytest.param({}, None, id="no-fingerprint"),
        pytest.param(published([A, B], METHOD_ALL), {A, B}, id="all-pods"),
        pytest.param(published([A], METHOD_EXCLUSIVE) | {"cpuManagerPolicy": "static"}, {A}, id="exclusive-only"),
        pytest.param(published([A], METHOD_ALL), {A}, id="nrt-one-bind-behind"),
        pytest.param(published([], METHOD_ALL), set(), id="nrt-two-binds-behind"),
        pytest.param(published([B], METHOD_ALL), set(), id="no-prefix-matches"),
    ],
)
def test_accounted(attributes: dict[str, str], expected: set[tuple[str, str]] | None) -> None:
    assert accounted(attributes, PODS) == expected


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        pytest.param({}, None, id="no-fingerprint"),
        pytest.param(published([A, B], METHOD_ALL), {A, B}, id="all-pods"),
        pytest.param(published([], METHOD_ALL), set(), id="of-no-pod"),
        pytest.param(published([B], METHOD_ALL), None, id="of-no-recent-set"),
    ],
)
def test_matched_tells_an_nrt_of_no_pod_from_one_of_an_unknown_set(
    attributes: dict[str, str], expected: set[tuple[str, str]] | None
) -> None:
    assert matched(attributes, PODS) == expected


C = ("ns", "c")


@pytest.mark.parametrize(
    ("before", "now", "running", "dropped"),
    [
        pytest.param({A, B}, {A, B, C}, {A, B, C}, set(), id="caught-up-with-a-bind"),
        pytest.param({A, B}, {A}, {A, B}, {B}, id="a-running-pod-left-out"),
        pytest.param({A, B}, set(), {A, B, C}, {A, B}, id="kubelet-restarted-lists-nothing"),
        pytest.param({A, B}, {A}, {A}, set(), id="the-pod-ended"),
        pytest.param(set(), set(), {A, B}, set(), id="never-counted-them"),
    ],
)
def test_went_back(
    before: set[tuple[str, str]],
    now: set[tuple[str, str]],
    running: set[tuple[str, str]],
    dropped: set[tuple[str, str]],
) -> None:
    assert went_back(frozenset(before), frozenset(now), running) == dropped


THREE = [("ns", "a", GUARANTEED_2), ("ns", "b", GUARANTEED_2), ("ns", "c", GUARANTEED_2)]


@pytest.mark.parametrize(
    ("nrt_of", "terminating", "expected", "left"),
    [
        pytest.param([A, B, C], {A}, {A, B, C}, [], id="terminating-still-held"),
        pytest.param([B, C], {A}, {B, C}, [], id="terminating-let-go"),
        pytest.param([B], {A}, {B}, [C], id="terminating-let-go-and-one-bind-behind"),
        pytest.param([A, C], {B}, {A, C}, [], id="a-middle-one-let-go"),
        pytest.param([C], {A, B}, {C}, [], id="two-let-go"),
        pytest.param([B, C], set(), set(), [A, B, C], id="not-terminating-no-set-matches"),
        # Every pod of the node gone lately, the NRT of none: a match, nothing left out (it made
        # the node look behind, then blind, and the demo's DRA pods unschedulable).
        pytest.param([], {A, B, C}, set(), [], id="all-gone-nrt-of-none"),
    ],
)
def test_a_pod_being_deleted_may_be_left_out(
    nrt_of: list[tuple[str, str]],
    terminating: set[tuple[str, str]],
    expected: set[tuple[str, str]],
    left: list[tuple[str, str]],
) -> None:
    """The kubelet lets go of a pod being deleted once its containers stopped, a moment to seconds
    before the pod object is gone (the failover test deletes pods gracefully every second): the
    NRT's set is the node's pods without it. Matching no set then, the reservations of pods the
    NRT counts were counted twice and zones predicted wrong."""
    attributes = published(nrt_of, METHOD_ALL)
    assert accounted(attributes, THREE, terminating=terminating) == expected
    missed = left_out(attributes, THREE, terminating)
    assert missed is not None
    assert missed.pods == left


def _nrt(rv: str, pods: list[tuple[str, str]] | None) -> dict[str, Any]:
    """Node n's NRT at version ``rv``, with the static CPU Manager and the fingerprint of ``pods``
    (of the exclusive method) unless None."""
    attributes = published(pods, METHOD_EXCLUSIVE) if pods is not None else {}
    body = nrt_body("n", [], policy=None, scope=None, memory_manager=None, attributes=attributes)
    body["metadata"]["resourceVersion"] = rv
    return body


def _bound(name: str, uid: str | None = None) -> dict[str, Any]:
    return pod_body(name, namespace="ns", uid=uid, node_name="n", container="c", cpu=2, memory="1Gi")


def test_a_reservation_is_held_until_the_fingerprint_includes_the_pod() -> None:
    view = ClusterView(ObjectStore())
    view.store.listed("nrts", [_nrt("1", [("ns", "old")])])
    view.store.event("pods", "ADDED", _bound("old"))
    view.ledger.reserve(Reservation("uid-new", "n", (0,), {"cpu": Decimal(2)}, key=store_key("ns", "new")))
    assert [r.pod for r in view.settle()] == ["uid-new"]  # our view has not seen the bind
    view.store.event("pods", "ADDED", _bound("new"))
    view.store.nrt_updated["n"] = float("inf")  # any update "after the bind" is not enough with a fingerprint
    assert [r.pod for r in view.settle()] == ["uid-new"]
    view.ledger.reserve(Reservation("uid-newer", "n", (0,), {"cpu": Decimal(2)}, key=store_key("ns", "newer")))
    view.store.event("pods", "ADDED", _bound("newer"))
    view.store.event("nrts", "MODIFIED", _nrt("2", [("ns", "old"), ("ns", "new")]))  # one bind behind
    assert [r.pod for r in view.settle()] == ["uid-newer"]
    view.store.event("nrts", "MODIFIED", _nrt("3", [("ns", "old"), ("ns", "new"), ("ns", "newer")]))
    assert view.settle() == []


@pytest.mark.parametrize(
    ("gone_for", "released"),
    [
        pytest.param(1.0, True, id="gone-a-second-ago-still-counted"),
        pytest.param(GONE_SECONDS + 1, False, id="gone-too-long-ago-no-set-matches"),
    ],
)
def test_a_pod_gone_that_the_nrt_still_counts(monkeypatch: pytest.MonkeyPatch, gone_for: float, released: bool) -> None:
    """The NRT is written at most once a second, after a second look at the kubelet: a pod deleted
    a moment ago may be counted still. Matching no set then, the reservation of a pod the NRT
    already counts stayed: counted twice, its zone looked fuller than the kubelet's."""
    view = ClusterView(ObjectStore())
    view.store.listed("nrts", [_nrt("1", [("ns", "old")])])
    view.store.event("pods", "ADDED", _bound("old", uid="uid-old"))
    view.ledger.reserve(Reservation("uid-new", "n", (0,), {"cpu": Decimal(2)}, key=store_key("ns", "new")))
    view.store.event("pods", "ADDED", _bound("new", uid="uid-new"))
    view.store.event("pods", "DELETED", _bound("old", uid="uid-old"))
    now = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: now + gone_for)
    view.store.event("nrts", "MODIFIED", _nrt("2", [("ns", "old"), ("ns", "new")]))  # counts new, and old still
    assert [r.pod for r in view.settle()] == ([] if released else ["uid-new"])


def test_without_a_fingerprint_an_update_after_the_settle_time_releases() -> None:
    view = ClusterView(ObjectStore())
    view.store.listed("nrts", [_nrt("1", None)])
    now = time.monotonic()
    # Bound 0.5 s before the update: the NRT may have been computed before the kubelet saw the pod.
    view.ledger.reserve(
        Reservation("recent", "n", (0,), {"cpu": Decimal(2)}, since=now - 0.5, key=store_key("ns", "recent"))
    )
    view.ledger.reserve(
        Reservation("settled", "n", (0,), {"cpu": Decimal(2)}, since=now - 1.5, key=store_key("ns", "settled"))
    )
    assert len(view.settle()) == 2  # no update since the binds
    view.store.event("nrts", "MODIFIED", _nrt("2", None))
    assert [r.pod for r in view.settle()] == ["recent"]


def test_reservations_time_out_oldest_first() -> None:
    view = ClusterView(ObjectStore(), reservation_timeout=10.0)
    now = time.monotonic()
    for uid, age in (("old", 11.0), ("older-but-renewed", 12.0), ("young", 1.0)):
        view.ledger.reserve(Reservation(uid, "n", (0,), {"cpu": Decimal(1)}, since=now - age, key=store_key("ns", uid)))
    view.ledger.reserve(
        Reservation("older-but-renewed", "n", (0,), {"cpu": Decimal(1)}, key=store_key("ns", "older-but-renewed"))
    )
    assert [r.pod for r in view.settle()] == ["young", "older-but-renewed"]


def test_a_reservation_ends_with_its_pod() -> None:
    view = ClusterView(ObjectStore())
    view.store.listed("nrts", [_nrt("1", [])])
    pods = {}
    for name in ("deleted", "finished", "running"):
        pods[name] = _bound(name, uid=f"uid-{name}")
        view.ledger.reserve(Reservation(f"uid-{name}", "n", (0,), {"cpu": Decimal(2)}, key=store_key("ns", name)))
        view.store.event("pods", "ADDED", pods[name])
    view.store.event("pods", "DELETED", pods["deleted"])
    view.store.event("pods", "MODIFIED", pods["finished"] | {"status": {"phase": "Succeeded"}})
    assert [r.pod for r in view.settle()] == ["uid-running"]


def test_a_reservation_ends_when_the_nrt_counts_its_pod_and_has_let_go_of_one_being_deleted() -> None:
    view = ClusterView(ObjectStore())
    view.store.listed("nrts", [_nrt("1", [("ns", "old")])])
    view.store.event("pods", "ADDED", _bound("old"))
    view.ledger.reserve(Reservation("uid-new", "n", (0,), {"cpu": Decimal(2)}, key=store_key("ns", "new")))
    view.store.event("pods", "ADDED", _bound("new"))
    deleting = _bound("old")
    deleting["metadata"]["deletionTimestamp"] = "2026-11-28T09:00:00Z"
    view.store.event("pods", "MODIFIED", deleting)
    view.store.event("nrts", "MODIFIED", _nrt("2", [("ns", "new")]))  # the kubelet let go of "old"
    assert view.settle() == []
