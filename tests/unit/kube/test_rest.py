"""The operators' and schedhook's API client against a scripted HTTP server: errors carry the
apiserver's message, a rotated token is picked up on a 401, list parameters keep their names
(what it shares with the node daemons' client: test_api)."""

from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from toposched.kube import rest
from toposched.kube.credentials import Credentials


def serve(handler: Any) -> TestServer:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    return TestServer(app)


async def test_an_error_answer_raises_with_the_apiservers_message() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "code": 409, "message": "the object has been modified"}, status=409)

    async with serve(handler) as server, rest.Kube(Credentials(server=str(server.make_url("")))) as api:
        with pytest.raises(rest.ApiError) as raised:
            await api.patch("/apis/g/v1/namespaces/ns/things/a", {"spec": {}})
    assert (raised.value.status, raised.value.reason) == (409, "the object has been modified")


async def test_a_401_reads_the_rotated_token_and_tries_once_more(tmp_path: Path) -> None:
    seen: list[tuple[str, str, str, bytes]] = []
    accepted = ["Bearer expired"]

    async def handler(request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        seen.append((request.method, auth, request.headers.get("Content-Type", ""), await request.read()))
        if auth not in accepted:
            return web.json_response({"kind": "Status", "message": "Unauthorized"}, status=401)
        return web.json_response({"kind": "Pod", "metadata": {"name": "p"}})

    token = tmp_path / "token"
    token.write_text("expired")
    async with (
        serve(handler) as server,
        rest.Kube(Credentials(server=str(server.make_url("")), token_file=token)) as api,
    ):
        await api.get("/api/v1/namespaces/ns/pods/p")
        token.write_text("rotated")  # the kubelet rotated it, and the old one expired
        accepted[:] = ["Bearer rotated"]
        answer = await api.patch("/api/v1/namespaces/ns/pods/p", {"metadata": {"labels": {"a": "b"}}})
        assert answer["metadata"]["name"] == "p"
        accepted.clear()  # revoked: the token read again does not help either
        token.write_text("still-revoked")
        with pytest.raises(rest.ApiError, match="401: Unauthorized"):  # a second 401 in a row is the answer
            await api.get("/api/v1/pods")
    assert [s[1] for s in seen] == [
        "Bearer expired",
        "Bearer expired",
        "Bearer rotated",
        "Bearer rotated",
        "Bearer still-revoked",
    ]
    assert seen[2][2] == rest.MERGE_PATCH
    assert seen[2][3] == b'{"metadata":{"labels":{"a":"b"}}}'


async def test_a_lister_speaks_the_apiservers_parameter_names() -> None:
    queries: list[dict[str, str]] = []

    async def handler(request: web.Request) -> web.Response:
        queries.append(dict(request.query))
        return web.json_response({"kind": "PodList", "metadata": {}, "items": []})

    async with serve(handler) as server, rest.Kube(Credentials(server=str(server.make_url("")))) as api:
        response = await api.lister("/api/v1/pods")(
            watch=True,
            resource_version="42",
            allow_watch_bookmarks=True,
            timeout_seconds=300,
            field_selector="spec.nodeName!=",
            _continue="token",
            label_selector=None,
            _preload_content=False,
        )
        response.release()
    assert queries == [
        {
            "watch": "true",
            "resourceVersion": "42",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "300",
            "fieldSelector": "spec.nodeName!=",
            "continue": "token",
        }
    ]
