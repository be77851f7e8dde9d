"""What may free room in the extender's view, as the room watch tells it: an NRT changed, a bound
pod ended, a reservation ended (timed out too, with no filter call), a blind node seen again, DRA
objects changed; a new bind or a pod's status does not."""

from collections.abc import Callable
from typing import Any

import pytest

from testkit.builders import node_body, nrt_body, pod_body
from toposched.apis.constants import TOPOLOGY_MANAGER_POLICY_LABEL
from toposched.schedhook.extender.clusterview import ClusterView
from toposched.schedhook.extender.reservations import Reservation
from toposched.schedhook.extender.roomwatch import DRA, ENDED, NRT, RESERVATION, SEEN_AGAIN, RoomWatch
from toposched.schedhook.extender.store import KINDS, ObjectStore


def nrt(version: str) -> dict[str, Any]:
    body = nrt_body("n1", [{"cpu": 4, "memory": "8Gi"}] * 2)
    body["metadata"]["resourceVersion"] = version
    return body


def bound(name: str, phase: str = "Running") -> dict[str, Any]:
    body = pod_body(name, namespace="ns", uid=f"uid-{name}", node_name="n1", cpu=1, memory="1Gi")
    body["status"] = {"phase": phase}
    return body


def watched() -> RoomWatch:
    """n1 (NUMA-managed, its NRT there, pod a bound) and n2 (NUMA-managed, its NRT missing: blind)."""
    store = ObjectStore()
    labels = {TOPOLOGY_MANAGER_POLICY_LABEL: "single-numa-node"}
    store.listed("nodes", [node_body(n, labels=labels, allocatable={"cpu": "8"}) for n in ("n1", "n2")])
    store.listed("nrts", [nrt("1")])
    store.listed("pods", [bound("a")])
    for kind in KINDS:
        if not store.has_listed(kind) and kind not in ("nodes", "nrts", "pods"):
            store.listed(kind, [])
    watch = RoomWatch(ClusterView(store))
    watch.freed()  # what it found at the start
    return watch


def _nothing(watch: RoomWatch) -> None:
    pass


def _nrt_updated(watch: RoomWatch) -> None:
    watch.view.store.event("nrts", "MODIFIED", nrt("2"))


def _pod_deleted(watch: RoomWatch) -> None:
    watch.view.store.event("pods", "DELETED", bound("a"))


def _pod_finished(watch: RoomWatch) -> None:
    watch.view.store.event("pods", "MODIFIED", bound("a", phase="Succeeded"))


def _pod_bound(watch: RoomWatch) -> None:
    watch.view.store.event("pods", "ADDED", bound("b"))


def _pod_status_changed(watch: RoomWatch) -> None:
    body = bound("a")
    body["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    watch.view.store.event("pods", "MODIFIED", body)


def _reservation_released(watch: RoomWatch) -> None:
    ledger = watch.view.ledger
    ledger.reserve(Reservation("uid-x", "n1", (0,), {}, key="ns/x"))
    watch.freed()
    ledger.release("uid-x")


def _reservation_timed_out(watch: RoomWatch) -> None:
    ledger = watch.view.ledger
    ledger.reserve(Reservation("uid-x", "n1", (0,), {}, since=0.0, key="ns/x"))  # long ago


def _blind_node_seen_again(watch: RoomWatch) -> None:
    watch.view.store.event("nrts", "ADDED", nrt_body("n2", [{"cpu": 4, "memory": "8Gi"}] * 2))


def _slice_changed(watch: RoomWatch) -> None:
    body = {"metadata": {"name": "n1-gpu", "resourceVersion": "2"}, "spec": {"nodeName": "n1"}}
    watch.view.store.event("resourceslices", "MODIFIED", body)


@pytest.mark.parametrize(
    ("happens", "expected"),
    [
        pytest.param(_nothing, [], id="nothing"),
        pytest.param(_nrt_updated, [NRT], id="nrt-updated"),
        pytest.param(_pod_deleted, [ENDED], id="bound-pod-deleted"),
        pytest.param(_pod_finished, [ENDED], id="bound-pod-finished"),
        pytest.param(_pod_bound, [], id="pod-bound-frees-nothing"),
        pytest.param(_pod_status_changed, [], id="pod-status-frees-nothing"),
        pytest.param(_reservation_released, [RESERVATION], id="reservation-released"),
        pytest.param(_reservation_timed_out, [RESERVATION], id="reservation-timed-out-without-a-filter"),
        pytest.param(_blind_node_seen_again, [NRT, SEEN_AGAIN], id="blind-node-seen-again"),
        pytest.param(_slice_changed, [DRA], id="resourceslice-changed"),
    ],
)
def test_what_frees_room(happens: Callable[[RoomWatch], None], expected: list[str]) -> None:
    watch = watched()
    assert set(watch.view.knowledge.blind()) == {"n2"}
    happens(watch)
    assert watch.freed() == expected
    assert watch.freed() == []  # said once
