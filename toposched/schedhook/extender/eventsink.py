"""The extender's Warning Events: on a Node that turned blind, and on a Node or NRT it cannot read.

Each is posted in the background, so no kube-scheduler call waits for the apiserver; without an
API client (in process, in tests) none is.
"""

import asyncio
from typing import Any

from toposched.apis.constants import SCHEDHOOK_COMPONENT
from toposched.kube import events, rest


class EventSink:
    def __init__(self, api: rest.Kube | None) -> None:
        self.api = api
        self._tasks: set[asyncio.Task[None]] = set()
        """Events being posted (kept, so none is collected before it is done)."""

    def blind(self, node: dict[str, Any], why: str) -> None:
        """The Node turned blind (``knowledge``)."""
        self._post(node, "NUMAKnowledgeMissing", why)

    def rejected(self, rejected: list[tuple[dict[str, Any], str]]) -> None:
        """Objects found unreadable, with why (``SnapshotBuilder.take_rejected``: once per version)."""
        for body, reason in rejected:
            self._post(
                body, "InvalidObject", f"{body.get('kind') or 'object'} ignored by the scheduler extender: {reason}"
            )

    def pod(self, namespace: str, name: str, uid: str, reason: str, message: str) -> None:
        """A Warning on a pod (known by name and uid, not by a body of its own)."""
        self._post(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": namespace, "name": name, "uid": uid}},
            reason,
            message,
        )

    def _post(self, body: dict[str, Any], reason: str, message: str) -> None:
        if self.api is None:
            return
        task = asyncio.create_task(events.post_event(self.api, body, "Warning", reason, message, SCHEDHOOK_COMPONENT))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
