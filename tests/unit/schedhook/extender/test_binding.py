"""A Binding the apiserver refused frees the pod's reservation; one it never answered keeps it
(the pod may be bound: its zones must not be booked twice)."""

import asyncio
from typing import Any

import pytest

from testkit.builders import node_body, nrt_body, pod_body
from toposched.apis.constants import NUMA_ZONES_ANNOTATION
from toposched.kube import rest
from toposched.schedhook.extender.binding import Bind
from toposched.schedhook.extender.coordinator import Coordinator
from toposched.schedhook.extender.store import ObjectStore

POD = pod_body("p", cpu=2, memory="1Gi", namespace="default", uid="u-1")


class Api:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        return body


def extender(error: Exception | None) -> Coordinator:
    store = ObjectStore()
    store.listed("nodes", [node_body("n1", allocatable={"cpu": "8", "memory": "16Gi"})])
    store.listed("nrts", [nrt_body("n1", [{"cpu": 4, "memory": "8Gi"}] * 2)])
    for kind in ("appgroups", "networktopologies", "pods"):
        store.listed(kind, [])
    return Coordinator(store, api=Api(error))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("error", "kept"),
    [
        pytest.param(None, True, id="bound"),
        pytest.param(rest.ApiError(409, "pod already assigned"), False, id="refused"),
        pytest.param(TimeoutError(), True, id="unanswered"),
        pytest.param(ConnectionResetError(), True, id="connection-lost"),
    ],
)
async def test_the_reservation_after_a_binding_call(error: Exception | None, kept: bool) -> None:
    b = extender(error)
    await b.filter(POD, ["n1"])
    uid = "u-1"
    failed = await b.bind("default", "p", uid, "n1")
    assert bool(failed) == (error is not None)
    assert (uid in b.view.ledger.by_pod) == kept


@pytest.mark.parametrize(
    ("bind", "metadata"),
    [
        pytest.param(Bind("ns", "p", "u-1", "n1"), {"name": "p", "namespace": "ns", "uid": "u-1"}, id="plain"),
        pytest.param(Bind("ns", "p", "", "n1"), {"name": "p", "namespace": "ns"}, id="no-uid"),
        pytest.param(
            Bind("ns", "p", "u-1", "n1", {NUMA_ZONES_ANNOTATION: '["node-0"]'}),
            {"name": "p", "namespace": "ns", "uid": "u-1", "annotations": {NUMA_ZONES_ANNOTATION: '["node-0"]'}},
            id="zones-predicted",
        ),
    ],
)
def test_the_binding_body(bind: Bind, metadata: dict[str, Any]) -> None:
    assert bind.body() == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }


class OrderedApi:
    """Records the pods whose Binding it was sent, in order."""

    def __init__(self) -> None:
        self.bound: list[str] = []

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.bound.append(body["metadata"]["name"])
        return body


def _check(seconds: float, refuse: str = "") -> Any:
    async def check() -> str:
        await asyncio.sleep(seconds)
        return refuse

    return lambda: check()


@pytest.mark.parametrize(
    ("checks", "bound"),
    [
        pytest.param([0.05, 0.0], ["a", "b"], id="a-slow-check-keeps-the-nodes-order"),
        pytest.param([0.0, 0.05], ["a", "b"], id="fast-first"),
        pytest.param([0.02, 0.0], ["b"], id="refused-by-its-check-never-sent"),
    ],
)
async def test_a_check_before_the_binding_call_cannot_reorder_a_nodes_binds(
    checks: list[float], bound: list[str]
) -> None:
    """The DRA check reads claims (an await): a later pod's binding must still not reach the
    kubelet first, or it admits them in another order than their zones were predicted."""
    b = extender(None)
    api = OrderedApi()
    b.binder.api = api  # type: ignore[assignment]
    zones = {NUMA_ZONES_ANNOTATION: "[0]"}
    refuse = {"a": "misaligned"} if bound == ["b"] else {}
    posts = [
        b.binder.post(Bind("default", name, f"u-{name}", "n1", zones), _check(seconds, refuse.get(name, "")))
        for name, seconds in zip("ab", checks, strict=True)
    ]
    failed = await asyncio.gather(*posts)
    assert api.bound == bound
    assert failed == [refuse.get(name, "") for name in "ab"]


async def test_the_debug_log_says_what_the_extender_saw_when_it_bound_and_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    b = extender(None)
    caplog.set_level("DEBUG", logger="toposched")
    await b.filter(POD, ["n1"])
    await b.bind("default", "p", "u-1", "n1")
    big = pod_body("q", cpu=4, memory="1Gi", namespace="default", uid="u-2")
    await b.filter(big, ["n1"])  # zone 0 holds p's 2 CPUs, zone 1 has 4: q fits
    await b.bind("default", "q", "u-2", "n1")
    await b.filter(pod_body("r", cpu=3, memory="1Gi", namespace="default", uid="u-3"), ["n1"])
    said = [r.getMessage() for r in caplog.records if r.name.startswith("toposched.schedhook.extender.coordinator")]
    assert said[0].startswith("binding default/p (u-1) to n1, zones (0,); n1 | NRT ")
    assert said[0].endswith("| held: none | pods: none")
    assert said[-1].startswith("refused default/r (u-3): n1: ")
    assert "held: default/p zones 0 cpu 2 " in said[-1]
    assert "; default/q zones 1 cpu 4 " in said[-1]
