"""Waking a refused pod: a merge patch of one annotation carrying its uid, counted; a pod gone,
changed or refused by the apiserver is skipped and forgotten, an apiserver away drops the round;
a pod bound meanwhile is not patched; a standby wakes nothing."""

from datetime import datetime, timedelta
from typing import Any
from unittest.mock import ANY

import aiohttp
import pytest
from prometheus_client import REGISTRY

from testkit.builders import node_body, pod_body
from toposched.apis.constants import REQUEUED_AT_ANNOTATION
from toposched.kube import rest
from toposched.schedhook.extender.clusterview import ClusterView
from toposched.schedhook.extender.requeue import Requeue
from toposched.schedhook.extender.roomwatch import RoomWatch
from toposched.schedhook.extender.store import KINDS, ObjectStore
from toposched.schedhook.extender.wakeups import Wakeups


class Api:
    """Answers each patch with ``answer`` (an exception to raise, or None for success), and the list
    of unbound pods with ``pages`` (one page per call, the last without a continue token)."""

    def __init__(self, answer: BaseException | None, pages: list[list[dict[str, Any]]] | None = None) -> None:
        self.answer = answer
        self.pages = pages or [[]]
        self.patches: list[tuple[str, Any]] = []
        self.lists: list[dict[str, str]] = []

    async def get(self, url_path: str, **params: str) -> Any:
        assert url_path == "/api/v1/pods"
        self.lists.append(params)
        page = len(self.lists) - 1
        token = str(page + 1) if page + 1 < len(self.pages) else ""
        return {"items": self.pages[page], "metadata": {"continue": token}}

    async def patch(self, url_path: str, body: Any) -> Any:
        self.patches.append((url_path, body))
        if self.answer is not None:
            raise self.answer
        return {}


class Standing:
    def __init__(self, why: str) -> None:
        self.why = why

    def why_not(self) -> str:
        return self.why


def requeue(api: Api, why_not: str = "", bound: dict[str, Any] | None = None) -> Requeue:
    """Pod ns/p (uid-p) refused a second ago; room freed since."""
    store = ObjectStore()
    store.listed("nodes", [node_body("n1")])
    for kind in KINDS:
        if kind != "nodes":
            store.listed(kind, [bound] if kind == "pods" and bound is not None else [])
    clock = [100.0]
    wakeups = Wakeups(now=lambda: clock[0])
    wakeups.filtered("uid-p", ("ns", "p"), 99.0)
    store.event("nrts", "ADDED", {"metadata": {"name": "n1"}})
    acting = Standing(why_not)
    return Requeue(wakeups, RoomWatch(ClusterView(store)), store, api, acting)  # type: ignore[arg-type]


def _bound(uid: str) -> dict[str, Any]:
    return pod_body("p", namespace="ns", uid=uid, node_name="n1", cpu=1, memory="1Gi")


@pytest.mark.parametrize(
    ("answer", "why_not", "bound", "patched", "woken", "kept"),
    [
        pytest.param(None, "", None, True, 1, True, id="woken"),
        pytest.param(rest.ApiError(404, "not found"), "", None, True, 0, False, id="gone-404-skipped"),
        pytest.param(rest.ApiError(409, "conflict"), "", None, True, 0, False, id="conflict-409-skipped"),
        pytest.param(rest.ApiError(422, "uid: immutable"), "", None, True, 0, False, id="recreated-422-skipped"),
        pytest.param(None, "this extender is a standby", None, False, 0, True, id="standby-wakes-nothing"),
        pytest.param(None, "", _bound("uid-p"), False, 0, False, id="bound-meanwhile-forgotten"),
        pytest.param(None, "", _bound("uid-other"), True, 1, True, id="a-namesake-bound-is-another-pod"),
    ],
)
async def test_a_wake_round(
    answer: BaseException | None,
    why_not: str,
    bound: dict[str, Any] | None,
    patched: bool,
    woken: int,
    kept: bool,
) -> None:
    api = Api(answer)
    before = woken_so_far()
    wake = requeue(api, why_not, bound)
    assert await wake.round() == woken
    assert woken_so_far() - before == woken
    assert ("uid-p" in wake.wakeups) is kept
    assert [path for path, _ in api.patches] == (["/api/v1/namespaces/ns/pods/p"] if patched else [])
    for _, body in api.patches:  # the uid (a precondition) and one annotation of ours, nothing else
        assert body == {"metadata": {"uid": "uid-p", "annotations": {REQUEUED_AT_ANNOTATION: ANY}}}
        at = body["metadata"]["annotations"][REQUEUED_AT_ANNOTATION]
        assert datetime.fromisoformat(at).utcoffset() == timedelta(0), at  # RFC 3339, UTC


def _held(name: str) -> dict[str, Any]:
    """Unbound, held by kube-scheduler as refused by the extender."""
    pod = pod_body(name, namespace="ns", uid=f"uid-{name}", cpu=1, memory="1Gi")
    message = "0/1 nodes are available: 1 toposched: cannot align container"
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    pod["status"] = {"conditions": [condition]}
    return pod


async def test_a_replica_starting_to_act_wakes_the_pods_refused_before_it_once() -> None:
    """Two pages of unbound pods, one of them held for another reason: the refused ones are woken at
    the first round, oldest first; a standby lists nothing; a later round lists nothing again."""
    other = pod_body("q", namespace="ns", uid="uid-q", cpu=1, memory="1Gi")
    api = Api(None, [[_held("a"), other], [_held("b")]])
    wake = requeue(api, why_not="this extender is a standby")
    assert await wake.round() == 0
    assert api.lists == []
    wake.acting.why = ""  # type: ignore[union-attr]  # its scheduler took the Lease
    assert await wake.round() == 3
    assert [path.rsplit("/", 1)[1] for path, _ in api.patches] == ["a", "b", "p"]
    assert [params.get("continue", "") for params in api.lists] == ["", "1"]
    assert all(params["fieldSelector"] == "spec.nodeName=" for params in api.lists)
    assert await wake.round() == 0
    assert len(api.lists) == 2


async def test_a_failed_list_is_tried_again_at_the_next_round() -> None:
    api = Api(None)
    wake = requeue(api)
    api.get = _failing  # type: ignore[method-assign]
    with pytest.raises(rest.ApiError):
        await wake.round()
    del api.get
    assert await wake.round() == 1  # swept now, and ns/p woken
    assert len(api.lists) == 1


async def _failing(url_path: str, **params: str) -> Any:
    raise rest.ApiError(500, "etcd away")


def woken_so_far() -> float:
    return REGISTRY.get_sample_value("toposched_extender_pods_woken_total") or 0.0


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(rest.ApiError(500, "etcd away"), id="server-error"),
        pytest.param(rest.ApiError(403, "forbidden"), id="forbidden"),
        pytest.param(aiohttp.ClientConnectionError("refused"), id="no-answer"),
    ],
)
async def test_an_apiserver_away_drops_the_round(answer: BaseException) -> None:
    wake = requeue(Api(answer))
    with pytest.raises(type(answer)):
        await wake.round()
    assert "uid-p" in wake.wakeups  # kube-scheduler's own retry still comes, and the next freeing
