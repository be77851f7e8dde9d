"""What both API clients make of a call: the same paths, query, headers and body on the wire, and
the same ApiError from an error answer, whether it is an apiserver's Status or not."""

from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from toposched.kube import api, nodeclient, rest
from toposched.kube.credentials import Credentials


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(("", "v1", "pods"), "/api/v1/pods", id="core-cluster-wide"),
        pytest.param(("", "v1", "pods", "ns", "p"), "/api/v1/namespaces/ns/pods/p", id="core-namespaced"),
        pytest.param(
            ("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", None, "node-1"),
            "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/node-1",
            id="group-cluster-scoped-object",
        ),
        pytest.param(("", "v1", "pods", "ns", "a/b"), "/api/v1/namespaces/ns/pods/a%2Fb", id="name-escaped"),
    ],
)
def test_paths(args: tuple[Any, ...], expected: str) -> None:
    assert api.path(*args) == expected


def serve(handler: Any) -> TestServer:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    return TestServer(app)


async def test_both_clients_send_the_same_request() -> None:
    seen: list[tuple[str, str, dict[str, str], dict[str, str], bytes]] = []

    async def handler(request: web.Request) -> web.Response:
        headers = {k: request.headers.get(k, "") for k in ("Accept", "Authorization", "Content-Type")}
        query = dict(request.query)  # as the apiserver reads it (aiohttp's URL quoting is its own)
        seen.append((request.method, request.rel_url.raw_path, query, headers, await request.read()))
        return web.json_response({"kind": "ConfigMap", "data": {"k": "v"}})

    body = {"data": {"a": "b", "unicode": "zürich", "n": 1}}
    params = {"labelSelector": "app in (a,b),tier!=x+y", "dryRun": "All"}
    async with serve(handler) as server:
        creds = Credentials(server=str(server.make_url("")), token="t")
        path = api.path("", "v1", "configmaps", "ns", "c/d")
        async with rest.Kube(creds) as kube:
            response = await kube.send("PATCH", path, body, api.MERGE_PATCH, params)
            answers = [api.answer(response.status, await response.read())]
            response.release()
        async with nodeclient.KubeAPI(creds) as node:
            answers.append(await node.request("PATCH", path, body, api.MERGE_PATCH, **params))
    assert answers == [{"kind": "ConfigMap", "data": {"k": "v"}}] * 2
    assert seen[0] == seen[1]
    assert seen[0] == (
        "PATCH",
        "/api/v1/namespaces/ns/configmaps/c%2Fd",
        params,
        {"Accept": "application/json", "Authorization": "Bearer t", "Content-Type": api.MERGE_PATCH},
        '{"data":{"a":"b","unicode":"zürich","n":1}}'.encode(),
    )


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        pytest.param(403, b'{"kind":"Status","message":"no"}', "no", id="status"),
        pytest.param(502, b"<html>bad gateway</html>", "<html>bad gateway</html>", id="not-json"),
        pytest.param(500, b"", "", id="empty"),
    ],
)
async def test_both_clients_raise_the_same_error(status: int, body: bytes, reason: str) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, status=status)

    raised = []
    async with serve(handler) as server:
        creds = Credentials(server=str(server.make_url("")))
        async with rest.Kube(creds) as kube:
            with pytest.raises(api.ApiError) as info:
                await kube.get("/api/v1/nodes")
            raised.append(info.value)
        async with nodeclient.KubeAPI(creds) as node:
            with pytest.raises(api.ApiError) as info:
                await node.request("GET", "/api/v1/nodes")
            raised.append(info.value)
    assert [(e.status, e.reason) for e in raised] == [(status, reason)] * 2
