"""The extender's cache patched event by event sees what a cache listed afresh sees."""

import random
import time
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.nrt import POD, nrt
from toposched.schedhook.extender.cache import BINDING_SECONDS, ClusterCache
from toposched.schedhook.extender.reservations import Reservation
from toposched.schedhook.placement.evaluate import PlacementConfig, evaluate
from toposched.schedhook.placement.model import Placed

NAMES = [f"n{i}" for i in range(6)]
KINDS = ("nodes", "nrts", "appgroups", "pods")


def node(name: str, variant: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": f"z{variant % 3}"}},
        "status": {"allocatable": {"cpu": str(16 + variant), "memory": "64Gi"}},
    }


def appgroup(name: str, variant: int) -> dict[str, Any]:
    workloads: list[dict[str, Any]] = [
        {"workload": {"kind": "Deployment", "name": w, "selector": w, "apiVersion": "apps/v1"}} for w in "ab"
    ]
    workloads[0]["dependencies"] = [{"workload": workloads[1]["workload"], "maxNetworkCost": 10 + variant}]
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"numMembers": 2, "workloads": workloads}}


def pod(name: str, variant: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"p-{name}", "namespace": "ns", "labels": {"appgroup.diktyo.x-k8s.io": "ag"}},
        "spec": {"nodeName": NAMES[variant % len(NAMES)], "containers": POD["spec"]["containers"]},
    }


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


def view(cache: ClusterCache) -> dict[str, Any]:
    snap = cache.snapshot()
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
    cache = ClusterCache(weights_name="NetperfCosts")
    for kind in KINDS:
        cache.listed(kind, [body(kind, n, 0, 1) for n in NAMES[:3]])
    cache.reserve(Reservation("held", "n1", (0,), {"cpu": Decimal(4)}, key="ns/held"))
    version = 2
    for kind, kind_of_event, name, variant, look in steps:
        version += 1
        current = cache.objects[kind]
        if kind_of_event == "relist":
            cache.listed(kind, [*current.values(), body(kind, name, variant, version)])
        elif kind_of_event == "heartbeat":
            key = f"/{name}" if kind == "nodes" else None
            if key in current:
                beat = dict(current[key], metadata=dict(current[key]["metadata"], resourceVersion=str(version)))
                cache.event(kind, "MODIFIED", beat)
        else:
            cache.event(kind, kind_of_event, body(kind, name, variant, version))
        if look:
            view(cache)
    fresh = ClusterCache(weights_name="NetperfCosts")
    for kind in KINDS:
        fresh.listed(kind, list(cache.objects[kind].values()))
    held = cache.reservations
    fresh.reservations.by_pod = dict(held.by_pod)
    fresh.reservations.by_node = {n: dict(h) for n, h in held.by_node.items()}
    assert view(cache) == view(fresh)


def test_a_malformed_object_is_ignored_and_hides_nothing_else() -> None:
    cache = ClusterCache(weights_name="NetperfCosts")
    good, bad = body("nrts", "n0", 0, 1), body("nrts", "n1", 0, 1)
    bad["zones"][0]["resources"][0]["available"] = "lots"  # not a quantity
    cache.listed("nrts", [bad, good])
    cache.listed("appgroups", [{"metadata": {"name": "broken", "namespace": "ns"}, "spec": {}}, appgroup("ag", 0)])
    snap = cache.snapshot()
    assert set(snap.nrts) == {"n0"}  # n1 fails every pod, saying why (snap.invalid)
    assert set(snap.appgroups) == {("ns", "ag")}
    fixed = body("nrts", "n1", 0, 2)
    cache.event("nrts", "MODIFIED", fixed)
    assert set(cache.snapshot().nrts) == {"n0", "n1"}


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
def test_a_pod_being_bound_counts_as_placed_until_the_watch_shows_it(
    then: str, placed: list[Placed], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ClusterCache(weights_name="NetperfCosts")
    for kind in KINDS:
        cache.listed(kind, [])
    cache.binding("ns/p-x", Placed("ns", "n2", "ag", "a"))
    if then == "watch-shows-it-bound":
        cache.event("pods", "ADDED", dict(body("pods", "x", 2, 2)))
    elif then == "bind-failed":
        cache.not_binding("ns/p-x")
    elif then == "never-seen":
        later = time.monotonic() + BINDING_SECONDS + 1
        monkeypatch.setattr(time, "monotonic", lambda: later)
    assert cache.snapshot().placed == placed
