"""The extender's HTTP answers, in process: what kube-scheduler gets from filter and prioritize."""

import copy
import random
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from testkit.extender import in_process
from testkit.nrt import POD, nrt
from toposched.schedhook.extender.coordinator import Coordinator, ExtenderConfig
from toposched.schedhook.extender.server import Extender, _priorities
from toposched.schedhook.extender.store import ObjectStore
from toposched.schedhook.placement.evaluate import PlacementConfig, evaluate


@pytest.mark.parametrize(
    ("names", "scores"),
    [
        pytest.param([], [], id="no-candidates"),
        pytest.param(["n1"], [100], id="one"),
        pytest.param(["a", "b.example", "c-3"], [0, 55, 99], id="several"),
        pytest.param(['odd","name', "n2"], [10, 20], id="name-holding-the-separator"),
        pytest.param(['q"uote', "é"], [30, 40], id="escaped-characters"),
        pytest.param(["low", "high"], [-30, 140], id="out-of-range-scores-clipped"),
    ],
)
def test_priorities_decode_to_host_and_extender_score(names: list[str], scores: list[int]) -> None:
    expected = [{"Host": n, "Score": min(10, max(0, s * 10 // 100))} for n, s in zip(names, scores, strict=True)]
    assert orjson.loads(_priorities(names, scores)) == expected


@pytest.fixture
async def extender() -> AsyncIterator[tuple[TestClient[Any, Any], Coordinator]]:
    coordinator = Coordinator(ObjectStore(), None, ExtenderConfig(bind_wait=0))
    client = TestClient(TestServer(Extender(coordinator).app()))
    await client.start_server()
    yield client, coordinator
    await client.close()


async def post(client: TestClient[Any, Any], verb: str, names: list[str]) -> Any:
    response = await client.post(f"/{verb}", data=orjson.dumps({"Pod": POD, "NodeNames": names}))
    assert response.status == 200
    return orjson.loads(await response.read())


async def test_filter_before_the_cache_synced_is_an_error_the_scheduler_retries(
    extender: tuple[TestClient[Any, Any], Coordinator],
) -> None:
    client, _ = extender
    assert (await post(client, "filter", ["n0"]))["Error"] == "toposched: the extender's cache is still syncing"
    assert (await client.get("/readyz")).status == 503


async def test_filter_then_prioritize_answer_every_candidate(
    extender: tuple[TestClient[Any, Any], Coordinator],
) -> None:
    client, coordinator = extender
    rng = random.Random(3)
    bodies = [nrt(f"n{i}", rng) for i in range(40)]
    synced(coordinator.view.store, bodies)
    assert (await client.get("/readyz")).status == 200
    names = [*(b["metadata"]["name"] for b in bodies), "no-nrt"]
    answer = await post(client, "filter", names)
    assert answer["Error"] == ""
    assert sorted([*answer["NodeNames"], *answer["FailedNodes"]]) == sorted(names)
    assert all(reason.startswith("toposched: cannot align") for reason in answer["FailedNodes"].values())
    assert "no-nrt" in answer["NodeNames"]  # nodes without an NRT pass (with the lowest score)
    priorities = await post(client, "prioritize", answer["NodeNames"])
    assert [p["Host"] for p in priorities] == answer["NodeNames"]
    assert all(0 <= p["Score"] <= 10 for p in priorities)
    assert next(p["Score"] for p in priorities if p["Host"] == "no-nrt") == 0


def synced(store: ObjectStore, nrts: list[dict[str, Any]]) -> None:
    for kind in ("nodes", "appgroups", "networktopologies", "pods"):
        store.listed(kind, [])
        store.mark_synced(kind)
    store.listed("nrts", nrts)
    store.mark_synced("nrts")
    store.synced.set()


async def test_an_nrt_of_1e999999_fails_its_node_with_a_reason_and_no_other(
    extender: tuple[TestClient[Any, Any], Coordinator],
) -> None:
    """Issue item 4: such an NRT made every filter call answer 500 until it was deleted."""
    client, coordinator = extender
    rng = random.Random(3)
    bodies = [nrt(f"n{i}", rng) for i in range(6)]
    names = [b["metadata"]["name"] for b in bodies]
    clean = in_process({"nrts": copy.deepcopy(bodies)}).view
    for resource in bodies[2]["zones"][0]["resources"]:
        resource.update(capacity="1e999999", allocatable="1e999999", available="1e999999")
    synced(coordinator.view.store, bodies)
    answer = await post(client, "filter", names)
    assert answer["Error"] == ""
    reason = answer["FailedNodes"].pop("n2")
    assert reason.startswith("toposched: invalid NodeResourceTopology n2: zones[0].resources[0].capacity: '1e999999'")
    expected = evaluate(POD, names, clean.snapshot(), PlacementConfig())
    others = [n for n in names if n != "n2"]
    assert sorted(answer["NodeNames"]) == sorted(n for n in expected.fitting() if n != "n2")
    assert set(answer["FailedNodes"]) == {n for n in others if n not in expected.fitting()}
    priorities = await post(client, "prioritize", answer["NodeNames"])
    assert [p["Host"] for p in priorities] == answer["NodeNames"]
    # Reported once (the Event needs a cluster: there is no API client here).
    assert coordinator.view.take_rejected() == []


@pytest.mark.parametrize(
    ("resources", "error"),
    [
        ({"limits": {"cpu": "1e999999", "memory": "1Gi"}}, "limits.cpu: '1e999999' is more than any machine has"),
        ({"limits": {"cpu": "abc"}}, "limits.cpu: 'abc' is not a Kubernetes quantity"),
        (5, "spec.containers[0].resources: expected an object"),
    ],
    ids=["cpu-1e999999", "cpu-abc", "resources-a-number"],
)
async def test_a_bad_pod_gets_a_filter_error_with_the_reason(
    extender: tuple[TestClient[Any, Any], Coordinator], resources: object, error: str
) -> None:
    """Issue item 6: a Guaranteed pod with cpu 1e999999 got a 500 without a reason."""
    client, coordinator = extender
    synced(coordinator.view.store, [nrt(f"n{i}", random.Random(i)) for i in range(3)])
    pod = copy.deepcopy(POD)
    pod["spec"]["containers"][0]["resources"] = resources
    response = await client.post("/filter", data=orjson.dumps({"Pod": pod, "NodeNames": ["n0", "n1", "n2"]}))
    assert response.status == 200
    answer = orjson.loads(await response.read())
    assert answer["Error"].startswith("toposched: invalid pod: spec.containers[0]")
    assert error in answer["Error"]
    assert answer["NodeNames"] == []
    response = await client.post("/prioritize", data=orjson.dumps({"Pod": pod, "NodeNames": ["n0"]}))
    assert response.status == 200
    assert orjson.loads(await response.read()) == [{"Host": "n0", "Score": 0}]


@pytest.mark.parametrize(
    ("verb", "body", "error"),
    [
        ("filter", b"{not json", "not JSON"),
        ("filter", b"[1, 2]", "expected ExtenderArgs"),
        ("filter", b'{"Pod": {}, "NodeNames": "n0"}', "NodeNames: expected a list of node names"),
        ("prioritize", b'{"Pod": {}, "NodeNames": [1]}', "NodeNames: expected a list of node names"),
        ("prioritize", b'{"Pod": {"metadata": [1]}, "NodeNames": ["n0"]}', None),
        ("bind", b'{"PodName": "p"}', "expected ExtenderBindingArgs"),
    ],
    ids=[
        "not-json",
        "not-an-object",
        "names-a-string",
        "names-not-strings",
        "pod-metadata-a-list",
        "bind-without-node",
    ],
)
async def test_a_request_that_is_not_extender_args_is_a_400_with_the_reason(
    extender: tuple[TestClient[Any, Any], Coordinator], verb: str, body: bytes, error: str | None
) -> None:
    """None: the request is ExtenderArgs, the pod in it is not a pod (answered, never a 500)."""
    client, coordinator = extender
    synced(coordinator.view.store, [])
    response = await client.post(f"/{verb}", data=body)
    assert response.status == (200 if error is None else 400)
    if error is not None:
        assert error in orjson.loads(await response.read())["Error"]
