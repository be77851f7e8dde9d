"""The extender's Warning Events: which reason and message each gets, and none without an API client."""

import asyncio
from typing import Any

import pytest

from testkit.builders import node_body
from toposched.kube import events, rest
from toposched.kube.credentials import Credentials
from toposched.schedhook.extender.eventsink import EventSink

NODE = node_body("n1")


@pytest.mark.parametrize(
    ("report", "reason", "message"),
    [
        pytest.param(
            lambda s: s.blind(NODE, "NRT of n1 missing"), "NUMAKnowledgeMissing", "NRT of n1 missing", id="blind"
        ),
        pytest.param(
            lambda s: s.rejected([(NODE, "status: expected an object")]),
            "InvalidObject",
            "Node ignored by the scheduler extender: status: expected an object",
            id="unreadable",
        ),
    ],
)
async def test_the_event(report: Any, reason: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    posted: list[tuple[str, str, str, str]] = []

    async def post_event(api: rest.Kube, involved: Any, type_: str, why: str, text: str, component: str) -> None:
        posted.append((involved["metadata"]["name"], type_, why, text))

    monkeypatch.setattr(events, "post_event", post_event)
    report(EventSink(rest.Kube(Credentials(server="https://apiserver.invalid"))))
    report(EventSink(None))  # in process: none
    await asyncio.sleep(0)
    assert posted == [("n1", "Warning", reason, message)]
