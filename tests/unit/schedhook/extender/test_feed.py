"""The extender is never Ready before every node, NRT, pod, AppGroup and NetworkTopology has been read,
whichever list comes last; DRA's kinds are never waited for."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from toposched.kube.watch import INITIAL_EVENTS_END
from toposched.schedhook.extender.feed import feed
from toposched.schedhook.extender.startup import StartUp
from toposched.schedhook.extender.store import DRA_KINDS, ObjectStore

WAITED_FOR = ("nodes", "nrts", "pods", "appgroups", "networktopologies")


class Stream:
    """A streaming list's answer: one object, then (once released) the bookmark that ends the
    objects; then nothing, as an idle watch."""

    status = 200

    def __init__(self, name: str, released: asyncio.Event) -> None:
        self.name, self.released = name, released

    @property
    def content(self) -> "Stream":
        return self

    async def iter_chunked(self, size: int) -> AsyncIterator[bytes]:
        obj = {"metadata": {"name": self.name, "resourceVersion": "5", "managedFields": [{"manager": "x"}]}}
        yield orjson.dumps({"type": "ADDED", "object": obj}) + b"\n"
        await self.released.wait()
        end = {"metadata": {"resourceVersion": "6", "annotations": {INITIAL_EVENTS_END: "true"}}}
        yield orjson.dumps({"type": "BOOKMARK", "object": end}) + b"\n"
        await asyncio.Event().wait()

    def release(self) -> None:
        pass


class Api:
    """Serves every kind as a streaming list, each held until its event is set."""

    def __init__(self) -> None:
        self.released = {kind: asyncio.Event() for kind in (*WAITED_FOR, *DRA_KINDS)}

    def lister(self, path: str) -> Any:
        kind = path.rstrip("/").rsplit("/", 1)[-1].replace("noderesourcetopologies", "nrts")

        async def call(**params: Any) -> Stream:
            assert params.get("send_initial_events") == "true", "a streaming list"
            return Stream(f"{kind}-0", self.released[kind])

        return call

    async def get(self, path: str) -> Any:  # resource.k8s.io/v1 is served
        return {}


@pytest.mark.parametrize("last", WAITED_FOR)
async def test_ready_only_once_the_last_kind_is_read(last: str) -> None:
    api, store = Api(), ObjectStore()
    warmed: list[set[str]] = []
    start = StartUp(process_start=0.0)
    task = asyncio.create_task(
        feed(store, api, lambda: warmed.append({k for k, v in store.objects.items() if v}), start)  # type: ignore[arg-type]
    )
    try:
        for kind in WAITED_FOR:
            if kind != last:
                api.released[kind].set()
        await asyncio.sleep(0.1)
        assert not store.synced.is_set()
        assert warmed == []
        api.released[last].set()  # DRA's kinds stay held
        await asyncio.wait_for(store.synced.wait(), 2)
        assert warmed == [set(WAITED_FOR)]  # warmed once, with everything read, before Ready
        assert set(start.lists) == set(WAITED_FOR)
        assert "ready" in start.steps
        assert all("managedFields" not in o["metadata"] for kind in WAITED_FOR for o in store.objects[kind].values())
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
