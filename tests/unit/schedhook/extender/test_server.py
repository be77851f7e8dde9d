"""The extender's HTTP answers, in process: what kube-scheduler gets from filter and prioritize."""

import random
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from testkit.nrt import POD, nrt
from toposched.schedhook.extender.cache import ClusterCache
from toposched.schedhook.extender.server import Extender, _priorities


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
async def extender() -> AsyncIterator[tuple[TestClient[Any, Any], ClusterCache]]:
    cache = ClusterCache(weights_name="NetperfCosts")
    client = TestClient(TestServer(Extender(cache, api=None, bind_wait=0).app()))
    await client.start_server()
    yield client, cache
    await client.close()


async def post(client: TestClient[Any, Any], verb: str, names: list[str]) -> Any:
    response = await client.post(f"/{verb}", data=orjson.dumps({"Pod": POD, "NodeNames": names}))
    assert response.status == 200
    return orjson.loads(await response.read())


async def test_filter_before_the_cache_synced_is_an_error_the_scheduler_retries(
    extender: tuple[TestClient[Any, Any], ClusterCache],
) -> None:
    client, _ = extender
    assert (await post(client, "filter", ["n0"]))["Error"] == "toposched: the extender's cache is still syncing"
    assert (await client.get("/readyz")).status == 503


async def test_filter_then_prioritize_answer_every_candidate(
    extender: tuple[TestClient[Any, Any], ClusterCache],
) -> None:
    client, cache = extender
    rng = random.Random(3)
    bodies = [nrt(f"n{i}", rng) for i in range(40)]
    for kind in ("nodes", "appgroups", "networktopologies", "pods"):
        cache.listed(kind, [])
        cache.mark_synced(kind)
    cache.listed("nrts", bodies)
    cache.mark_synced("nrts")
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
