"""NRTs validated as the first lists arrive are taken by the snapshot builder only when they are of
the version it parses; whatever cannot be used is validated (and reported) by the builder as before."""

import random
from typing import Any

import pytest

from testkit.builders import node_body
from testkit.nrt import nrt
from toposched.schedhook.extender.ahead import ParsedAhead
from toposched.schedhook.extender.snapshots import SnapshotBuilder
from toposched.schedhook.extender.store import ObjectStore


def versioned(body: dict[str, Any], version: str) -> dict[str, Any]:
    body["metadata"]["resourceVersion"] = version
    return body


def good(version: str = "1") -> dict[str, Any]:
    return versioned(nrt("n1", random.Random(1)), version)


def garbled(version: str = "1") -> dict[str, Any]:
    body = good(version)
    body["zones"] = "not a list"
    return body


@pytest.mark.parametrize(
    ("arrived", "parsed", "taken"),
    [
        pytest.param([("nrts", good())], good(), True, id="the-same-version-is-taken"),
        pytest.param([("nrts", good("1"))], good("2"), False, id="a-newer-version-is-validated-again"),
        pytest.param([("nodes", good())], good(), False, id="only-nrts"),
        pytest.param([("nrts", garbled())], good(), False, id="one-that-did-not-validate-is-left-to-the-builder"),
    ],
)
def test_taken_only_when_of_the_version_parsed(
    arrived: list[tuple[str, dict[str, Any]]], parsed: dict[str, Any], taken: bool
) -> None:
    ahead = ParsedAhead()
    for kind, body in arrived:
        ahead.arrived(kind, body)
    before = dict(ahead._nrts)
    model = ahead.nrt("/n1", parsed)
    assert (before.get("/n1", (None, None))[1] is model) is taken
    assert ahead._nrts == {}  # taken or not, never kept for later


@pytest.mark.parametrize("body", [good(), garbled()], ids=["readable", "garbled"])
def test_the_builder_sees_what_it_would_have_seen(body: dict[str, Any]) -> None:
    views = []
    for ahead in (False, True):
        store = ObjectStore()
        builder = SnapshotBuilder(store, "")
        store.listed("nodes", [node_body("n1", allocatable={"cpu": "64", "memory": "256Gi"})])
        if ahead:
            builder.ahead.arrived("nrts", body)
        store.listed("nrts", [body])
        builder.parse_all()
        snap = builder.snapshot(lambda node: (), (), (), [])
        views.append((snap.nrts.get("n1"), dict(snap.invalid), len(builder.take_rejected())))
    assert views[0] == views[1]
