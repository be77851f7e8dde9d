"""Devices.picks: the nodes a pod's claims fit, as kube-scheduler's DynamicResources Filter decides
them -- the allocator's answer first (an error there aborts the scheduler whatever else), then
whether the pod's claims allocated already can be used on the node."""

from collections.abc import Sequence
from typing import Any

import pytest

from toposched.schedhook.extender.allocatorproc import AllocatorProcess, NodePick
from toposched.schedhook.extender.devices import Devices
from toposched.schedhook.extender.eventsink import EventSink
from toposched.schedhook.extender.store import DRA_KINDS, ObjectStore
from toposched.schedhook.placement.dra import ClaimRef, Pick, allocated_nodes

GPU = "gpu.example.com"
PICKED = NodePick(devices=((0, "r0", GPU, "p", "g1"),))
UNSUITABLE = NodePick(unsuitable=True)
CEL_ERROR = NodePick(error="claim ns/new: selector #0: CEL runtime error: no such key: numaNode")


class Allocator(AllocatorProcess):
    """Answers every allocate with the answers given, per node."""

    def __init__(self, answers: dict[str, NodePick]) -> None:
        super().__init__(["unused"])
        self.answers = answers

    async def ensure(self) -> bool:
        return False

    def put(self, kind: str, obj: dict[str, Any]) -> None:
        pass

    def delete(self, kind: str, name: str) -> None:
        pass

    async def allocate(
        self, claims: Sequence[dict[str, Any]], nodes: Sequence[str], *_: Any, **__: Any
    ) -> dict[str, NodePick]:
        return {n: self.answers[n] for n in nodes}

    async def changed(
        self, claims: Sequence[dict[str, Any]], nodes: Sequence[str], *_: Any, **__: Any
    ) -> tuple[str, bool, dict[str, NodePick]]:
        return "shape", False, await self.allocate(claims, nodes)


def claim(name: str, on: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"namespace": "ns", "name": name}, "spec": {}}
    if on is not None:
        selector = {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [on]}]}]
        }
        results = [{"request": "r0", "driver": GPU, "pool": "p", "device": "g0"}]
        body["status"] = {"allocation": {"devices": {"results": results}, "nodeSelector": selector}}
    return body


async def picks(claims: list[dict[str, Any]], answers: dict[str, NodePick]) -> tuple[list[str], dict[str, str]]:
    store = ObjectStore()
    for kind in DRA_KINDS:
        store.listed(kind, claims if kind == "resourceclaims" else [])
        store.mark_synced(kind)
    devices = Devices(store, None, EventSink(None), allocator=Allocator(answers))
    left_out: dict[str, NodePick] = {}
    refs = [ClaimRef(c["metadata"]["name"], c["metadata"]["name"]) for c in claims]
    found, unknown = await devices.picks("ns", refs, sorted(answers), left_out)
    assert not unknown
    return sorted(found), {n: a.error or "unsuitable" for n, a in left_out.items()}


@pytest.mark.parametrize(
    ("claims", "answers", "fit", "left_out"),
    [
        ([claim("new")], {"a": PICKED, "b": UNSUITABLE}, ["a"], {"b": "unsuitable"}),
        ([claim("new")], {"a": PICKED, "b": CEL_ERROR}, ["a"], {"b": CEL_ERROR.error}),
        (
            [claim("old", on="b"), claim("new")],
            {"a": PICKED, "b": PICKED},
            ["b"],
            {"a": "a claim of the pod is allocated for another node"},
        ),
        ([claim("old", on="b"), claim("new")], {"a": CEL_ERROR, "b": PICKED}, ["b"], {"a": CEL_ERROR.error}),
        (
            [claim("old", on="b")],
            {"a": NodePick(), "b": NodePick()},
            ["b"],
            {"a": "a claim of the pod is allocated for another node"},
        ),
    ],
    ids=[
        "the claims do not fit there",
        "the allocator fails there",
        "an allocated claim is for another node",
        "an error there is kept before the node's claims",
        "every claim allocated already",
    ],
)
async def test_nodes_left_out(
    claims: list[dict[str, Any]], answers: dict[str, NodePick], fit: list[str], left_out: dict[str, str]
) -> None:
    assert await picks(claims, answers) == (fit, left_out)


async def test_the_pick_follows_the_claims_allocated_already() -> None:
    store = ObjectStore()
    claims = [claim("old", on="a"), claim("new")]
    for kind in DRA_KINDS:
        store.listed(kind, claims if kind == "resourceclaims" else [])
        store.mark_synced(kind)
    devices = Devices(store, None, EventSink(None), allocator=Allocator({"a": PICKED}))
    found, _ = await devices.picks("ns", [ClaimRef("old", "old"), ClaimRef("new", "new")], ["a"])
    assert found == {"a": [Pick("ns/old", "r0", GPU, "p", "g0"), Pick("ns/new", "r0", GPU, "p", "g1")]}


def selector(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"status": {"allocation": {"nodeSelector": {"nodeSelectorTerms": list(terms)}}}}


def by_name(*names: str, operator: str = "In") -> dict[str, Any]:
    return {"matchFields": [{"key": "metadata.name", "operator": operator, "values": list(names)}]}


@pytest.mark.parametrize(
    ("body", "nodes"),
    [
        (selector(by_name("n1")), frozenset({"n1"})),
        (selector(by_name("n1"), by_name("n2", "n3")), frozenset({"n1", "n2", "n3"})),
        ({"status": {"allocation": {"devices": {"results": []}}}}, None),
        ({"status": {}}, None),
        (selector({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}), None),
        (selector(by_name("n1", operator="NotIn")), None),
        (selector(by_name("n1"), {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}), None),
        ({"status": {"allocation": {"nodeSelector": "garbage"}}}, None),
    ],
    ids=[
        "one node",
        "several terms",
        "no node selector (devices of every node)",
        "not allocated",
        "by labels",
        "not in",
        "a term by labels beside one by name",
        "garbage",
    ],
)
def test_allocated_nodes(body: dict[str, Any], nodes: frozenset[str] | None) -> None:
    assert allocated_nodes(body) == nodes
