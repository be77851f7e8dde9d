"""List-then-watch against a scripted apiserver: errors are never data, backoff resets on a good list."""

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from toposched.kube import watch


class Response:
    def __init__(self, status: int, body: Any = None, events: list[dict[str, Any]] | None = None) -> None:
        self.status = status
        self.body = orjson.dumps(body) if body is not None else b""
        self.events = events or []

    async def read(self) -> bytes:
        return self.body

    @property
    def content(self) -> "Response":
        return self

    async def iter_chunked(self, size: int) -> AsyncIterator[bytes]:
        for event in self.events:
            yield orjson.dumps(event) + b"\n"

    def release(self) -> None:
        pass


def listing(*names: str, version: str = "1") -> Response:
    items = [{"metadata": {"name": n, "resourceVersion": version}} for n in names]
    return Response(200, {"kind": "List", "metadata": {"resourceVersion": version}, "items": items})


FORBIDDEN = Response(403, {"kind": "Status", "code": 403, "message": "nodes is forbidden"})


class Apiserver:
    """Answers list and watch calls from a script; a watch past the script hangs (as an idle one does)."""

    def __init__(self, script: list[Response]) -> None:
        self.script = script
        self.calls: list[str] = []
        self.played = asyncio.Event()

    async def __call__(self, **params: Any) -> Response:
        self.calls.append("stream" if params.get("send_initial_events") else "watch" if params.get("watch") else "list")
        if not self.script:
            self.played.set()
            await asyncio.Event().wait()
        return self.script.pop(0)


async def follow(apiserver: Apiserver, within: float = 2.0, stream: bool = False) -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []
    task = asyncio.create_task(
        watch.follow(
            apiserver,
            lambda items: seen.append(("listed", [i["metadata"]["name"] for i in items])),
            lambda kind, obj: seen.append((kind, obj["metadata"]["name"])),
            "things",
            stream=stream,
        )
    )
    await asyncio.wait_for(apiserver.played.wait(), within)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return seen


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "RETRY_FIRST", 0.01)
    monkeypatch.setattr(watch, "RETRY_MAX", 0.02)


async def test_an_error_answer_to_a_list_is_never_taken_for_an_empty_list() -> None:
    seen = await follow(Apiserver([listing("a", "b"), Response(500), FORBIDDEN, listing("a", "c")]))
    # the watch failed (500), the next list was refused (403): nothing was listed in between
    assert seen == [("listed", ["a", "b"]), ("listed", ["a", "c"])]


async def test_events_then_an_expired_watch_lists_again_at_once() -> None:
    expired = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}
    events = [
        {"type": "ADDED", "object": {"metadata": {"name": "c", "resourceVersion": "2"}}},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}},
        expired,
    ]
    apiserver = Apiserver([listing("a"), Response(200, events=events), listing("a", "c", version="4")])
    seen = await follow(apiserver)
    assert seen == [("listed", ["a"]), ("ADDED", "c"), ("listed", ["a", "c"])]
    assert apiserver.calls[:3] == ["list", "watch", "list"]


async def test_backoff_resets_after_a_good_list(caplog: pytest.LogCaptureFixture) -> None:
    apiserver = Apiserver([FORBIDDEN, FORBIDDEN, FORBIDDEN, listing("a"), Response(503), listing("b")])
    with caplog.at_level("INFO", logger="toposched.kube.watch"):
        seen = await follow(apiserver)
    assert seen == [("listed", ["a"]), ("listed", ["b"])]
    lines = [r.getMessage() for r in caplog.records]
    # one line when following fails, one when it is back, for each outage; no tracebacks
    assert [line.split(" (")[0].split(" after")[0] for line in lines] == [
        "watch of things failed",
        "watch of things works again",
        "watch of things failed",
        "watch of things works again",
    ]
    assert not any(r.exc_info for r in caplog.records)


def page(*names: str, token: str = "", version: str = "7") -> Response:
    metadata = {"resourceVersion": version, **({"continue": token} if token else {})}
    items = [{"metadata": {"name": n, "labels": {"big": "x" * 100}}} for n in names]
    return Response(200, {"kind": "List", "metadata": metadata, "items": items})


class Pager:
    """Answers list calls from a script and records each call's limit and continue token."""

    def __init__(self, *pages: Response) -> None:
        self.pages = list(pages)
        self.asked: list[tuple[Any, Any]] = []

    async def __call__(self, **params: Any) -> Response:
        self.asked.append((params.get("limit"), params.get("_continue")))
        return self.pages.pop(0)


def names_only(obj: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": obj["metadata"]["name"]}}


async def test_a_list_arrives_page_by_page_and_is_slimmed_as_it_comes() -> None:
    pager = Pager(page("a", "b", token="t1"), page("c", token="t2"), page("d"))
    items, version = await watch.list_objects(pager, names_only, label_selector="x")
    assert items == [{"metadata": {"name": n}} for n in "abcd"]
    assert version == "7"
    assert pager.asked == [(watch.PAGE, None), (watch.PAGE, "t1"), (watch.PAGE, "t2")]


async def test_a_failed_page_fails_the_whole_list() -> None:
    """An expired continue token (410) half-way: never a partial list taken for the whole."""
    expired = Response(410, {"kind": "Status", "code": 410, "message": "continue token expired"})
    with pytest.raises(watch.ListError, match=re.escape("HTTP 410: 'continue token expired'")):
        await watch.list_objects(Pager(page("a", token="t1"), expired))


def added(name: str, version: str = "5") -> dict[str, Any]:
    return {"type": "ADDED", "object": {"metadata": {"name": name, "resourceVersion": version}}}


END = {
    "type": "BOOKMARK",
    "object": {"metadata": {"resourceVersion": "6", "annotations": {watch.INITIAL_EVENTS_END: "true"}}},
}
MODIFIED = {"type": "MODIFIED", "object": {"metadata": {"name": "a", "resourceVersion": "7"}}}
REFUSED = Response(422, {"kind": "Status", "code": 422, "message": "sendInitialEvents is forbidden"})
BROKEN = {"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "etcd away"}}


@pytest.mark.parametrize(
    ("script", "seen", "calls"),
    [
        pytest.param(
            [Response(200, events=[added("a"), added("b"), END, MODIFIED])],
            [("listed", ["a", "b"]), ("MODIFIED", "a")],
            ["stream", "watch"],
            id="objects-then-the-end-bookmark-then-the-watch-on-the-same-stream",
        ),
        pytest.param(
            [REFUSED, listing("a"), Response(200, events=[MODIFIED])],
            [("listed", ["a"]), ("MODIFIED", "a")],
            ["stream", "list", "watch", "watch"],
            id="not-served-lists-page-by-page",
        ),
        pytest.param(
            [Response(200, events=[added("a")]), Response(200, events=[added("a"), added("b"), END])],
            [("listed", ["a", "b"])],
            ["stream", "stream", "watch"],
            id="a-stream-ended-before-its-bookmark-is-not-a-list",
        ),
        pytest.param(
            [Response(200, events=[added("a"), BROKEN]), Response(200, events=[added("b"), END])],
            [("listed", ["b"])],
            ["stream", "stream", "watch"],
            id="an-error-half-way-is-never-a-partial-list",
        ),
    ],
)
async def test_a_streaming_list(script: list[Response], seen: list[tuple[str, Any]], calls: list[str]) -> None:
    apiserver = Apiserver(script)
    assert await follow(apiserver, stream=True) == seen
    assert apiserver.calls == calls


async def test_a_streaming_list_is_measured_before_it_is_given() -> None:
    measured: list[watch.ListStats] = []
    given: list[int] = []
    apiserver = Apiserver([Response(200, events=[added("a"), added("b"), END])])
    task = asyncio.create_task(
        watch.follow(
            apiserver, lambda items: given.append(len(measured)), lambda *_: None, "things", None, measured.append, True
        )
    )
    await asyncio.wait_for(apiserver.played.wait(), 2)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert given == [1]
    assert (measured[0].objects, measured[0].pages) == (2, 1)
    assert measured[0].bytes > 0
    assert measured[0].seconds >= measured[0].parse_seconds >= 0
