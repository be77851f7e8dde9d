"""Snapshots of a store patched event by event show what snapshots of a store listed afresh show."""

import random
import time
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.builders import appgroup_body, member_labels, node_body, pod_body
from testkit.nrt import POD, nrt
from toposched.apis.constants import APPGROUP_LABEL
from toposched.kube import rest
from toposched.kube.credentials import Credentials
from toposched.schedhook.extender.clusterview import BINDING_SECONDS, ClusterView
from toposched.schedhook.extender.coordinator import Coordinator
from toposched.schedhook.extender.knowledge import Knowledge
from toposched.schedhook.extender.reservations import Reservation
from toposched.schedhook.extender.store import ObjectStore, store_key
from toposched.schedhook.placement.evaluate import PlacementConfig, evaluate
from toposched.schedhook.placement.model import Placed

NAMES = [f"n{i}" for i in range(6)]
KINDS = ("nodes", "nrts", "appgroups", "pods")


def node(name: str, variant: int) -> dict[str, Any]:
    return node_body(name, zone=f"z{variant % 3}", allocatable={"cpu": str(16 + variant), "memory": "64Gi"})


def appgroup(name: str, variant: int) -> dict[str, Any]:
    workloads = {"a": [("b", {"maxNetworkCost": 10 + variant})], "b": []}
    return appgroup_body(name, workloads, api_version="apps/v1", namespace="ns")


def pod(name: str, variant: int) -> dict[str, Any]:
    """A pod of AppGroup ag (of no workload) bound to one of the nodes, asking for what POD asks."""
    return pod_body(
        f"p-{name}",
        namespace="ns",
        labels={APPGROUP_LABEL: "ag"},
        node_name=NAMES[variant % len(NAMES)],
        cpu=8,
        memory="16Gi",
        devices={"example.com/nic": 1},
    )


def body(kind: str, name: str, variant: int, version: int) -> dict[str, Any]:
    if kind == "nrts":
        out = nrt(name, random.Random(variant))
    else:
        out = {"nodes": node, "appgroups": appgroup, "pods": pod}[kind](name, variant)
    out["metadata"]["resourceVersion"] = str(version)
    return out


events = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.sampled_from(["ADDED", "MODIFIED", "DELETED", "heartbeat", "relist"]),
        st.sampled_from(NAMES),
        st.integers(0, 5),
        st.booleans(),  # take a snapshot after this event
    ),
    max_size=30,
)


def cluster_view() -> ClusterView:
    # No memory of NRTs gone: a store listed afresh has none (what it remembers: test_knowledge).
    store = ObjectStore()
    return ClusterView(store, Knowledge(store, grace=0))


def view(cluster: ClusterView) -> dict[str, Any]:
    snap = cluster.snapshot()
    results = evaluate(POD, NAMES, snap, PlacementConfig())
    return {
        "nrts": snap.nrts,
        "locations": snap.locations,
        "appgroups": {k: v.model_dump() for k, v in snap.appgroups.items()},
        "placed": sorted(snap.placed, key=repr),
        "answers": [n.to_dict() for n in results.all()],
    }


@settings(max_examples=150, deadline=None)
@given(events)
def test_a_cache_followed_event_by_event_matches_a_fresh_list(steps: list[tuple[str, str, str, int, bool]]) -> None:
    cluster = cluster_view()
    store = cluster.store
    for kind in KINDS:
        store.listed(kind, [body(kind, n, 0, 1) for n in NAMES[:3]])
    cluster.ledger.reserve(Reservation("held", "n1", (0,), {"cpu": Decimal(4)}, key=store_key("ns", "held")))
    version = 2
    for kind, kind_of_event, name, variant, look in steps:
        version += 1
        current = store.objects[kind]
        if kind_of_event == "relist":
            store.listed(kind, [*current.values(), body(kind, name, variant, version)])
        elif kind_of_event == "heartbeat":
            key = store_key("", name) if kind == "nodes" else None
            if key in current:
                beat = dict(current[key], metadata=dict(current[key]["metadata"], resourceVersion=str(version)))
                store.event(kind, "MODIFIED", beat)
        else:
            store.event(kind, kind_of_event, body(kind, name, variant, version))
        if look:
            view(cluster)
    fresh = cluster_view()
    for kind in KINDS:
        fresh.store.listed(kind, list(store.objects[kind].values()))
    for held in cluster.ledger.by_pod.values():
        fresh.ledger.reserve(held)
    assert view(cluster) == view(fresh)


def test_a_malformed_object_is_ignored_and_hides_nothing_else() -> None:
    cluster = cluster_view()
    good, bad = body("nrts", "n0", 0, 1), body("nrts", "n1", 0, 1)
    bad["zones"][0]["resources"][0]["available"] = "lots"  # not a quantity
    cluster.store.listed("nrts", [bad, good])
    broken = {"metadata": {"name": "broken", "namespace": "ns"}, "spec": {}}
    cluster.store.listed("appgroups", [broken, appgroup("ag", 0)])
    snap = cluster.snapshot()
    assert set(snap.nrts) == {"n0"}  # n1 fails every pod, saying why (snap.invalid)
    assert set(snap.appgroups) == {("ns", "ag")}
    fixed = body("nrts", "n1", 0, 2)
    cluster.store.event("nrts", "MODIFIED", fixed)
    assert set(cluster.snapshot().nrts) == {"n0", "n1"}


class Accepting(rest.Kube):
    """An apiserver that accepts every object created (here, the Binding)."""

    def __init__(self) -> None:
        super().__init__(Credentials(server="https://apiserver.invalid"))

    async def create(self, url_path: str, body: Any) -> Any:
        return body


@pytest.mark.parametrize(
    ("then", "placed"),
    [
        ("nothing", [Placed("ns", "n2", "ag", "a")]),
        ("watch-shows-it-bound", [Placed("ns", "n2", "ag", None)]),
        ("bind-failed", []),
        ("never-seen", []),
    ],
    ids=["counts-until-seen", "the-watch-takes-over", "a-failed-bind-drops-it", "expires"],
)
async def test_a_pod_being_bound_counts_as_placed_until_the_watch_shows_it(
    then: str, placed: list[Placed], monkeypatch: pytest.MonkeyPatch
) -> None:
    extender = Coordinator(ObjectStore(), api=None if then == "bind-failed" else Accepting())
    cluster = extender.view
    for kind in KINDS:
        cluster.store.listed(kind, [])
    member = pod_body("p-x", namespace="ns", uid="u-x", labels=member_labels("ag", "a"), cpu=1, memory="1Gi")
    assert (await extender.filter(member, ["n2"])).fitting() == ("n2",)
    failed = await extender.bind("ns", "p-x", "u-x", "n2")  # without an API client the bind fails
    assert bool(failed) is (then == "bind-failed")
    if then == "watch-shows-it-bound":
        cluster.store.event("pods", "ADDED", body("pods", "x", 2, 2))
    elif then == "never-seen":  # BINDING_SECONDS later
        real = time.monotonic
        monkeypatch.setattr(time, "monotonic", lambda: real() + BINDING_SECONDS + 1)
    assert cluster.snapshot().placed == placed
