"""A small Kubernetes API client for the node daemons (exporter, prober).

They run on every node, so their footprint counts: importing kubernetes_asyncio's generated
client costs about 60 MiB resident (aiohttp alone 9 MiB), while these daemons make about one
plain JSON call a second; the standard library's urllib in a worker thread does that. Requests
and answers are ``api``'s, as for the operators' ``rest``. Authentication: ``credentials`` (the
pod's service account, its token re-read as it rotates, else the current context of
$KUBECONFIG / ~/.kube/config).
"""

import asyncio
import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toposched.kube import api, credentials
from toposched.kube.api import ApiError as ApiError
from toposched.kube.credentials import Credentials

logger = logging.getLogger(__name__)

WATCH_SECONDS = 300


class KubeAPI:
    def __init__(self, creds: Credentials) -> None:
        self.creds = creds
        self._ssl = creds.ssl_context()

    @classmethod
    def from_environment(cls) -> "KubeAPI":
        return cls(credentials.load())

    @classmethod
    def from_kubeconfig(cls, path: Path) -> "KubeAPI":
        return cls(credentials.from_kubeconfig(path))

    async def request(
        self, method: str, path: str, body: Any = None, content_type: str = api.JSON, **params: str
    ) -> Any:
        """The answer's JSON (None when empty); an error status raises ApiError."""
        return await asyncio.to_thread(self._send, method, path, body, content_type, params)

    def _send(self, method: str, path: str, body: Any, content_type: str, params: dict[str, str]) -> Any:
        before = self.creds.client_pair
        self.creds = self.creds.refreshed()  # a rotated token file, an expired exec credential
        if self.creds.client_pair != before:
            self._ssl = self.creds.ssl_context()
        call = api.request(self.creds, method, path, body, content_type, params)
        sent = urllib.request.Request(call.url, data=call.body, method=call.method, headers=call.headers)
        try:
            with urllib.request.urlopen(sent, context=self._ssl, timeout=api.TIMEOUT_SECONDS) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        return api.answer(status, raw)

    def watch_object(self, collection: str, name: str, seen: Callable[[str], None], stop: threading.Event) -> None:
        """Watch one object of ``collection`` by name, blocking, until ``stop`` is set: ``seen``
        gets each event's type, and "START" whenever a watch begins (an event missed between two
        watches is then made up for by the caller's look at the object). Meant for a daemon
        thread of its own: a node daemon holds one such connection, as the kubelet does for its
        Node. Errors are retried, from 1 to 30 s apart."""
        backoff = 1.0
        params = {
            "watch": "true",
            "fieldSelector": f"metadata.name={name}",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        while not stop.is_set():
            try:
                creds = self.creds.refreshed()  # its own copy: the requests' threads refresh theirs
                call = api.request(creds, "GET", collection, None, api.JSON, params)
                sent = urllib.request.Request(call.url, method="GET", headers=call.headers)
                with urllib.request.urlopen(sent, context=creds.ssl_context(), timeout=WATCH_SECONDS + 30) as answer:
                    seen("START")
                    backoff = 1.0
                    for line in answer:
                        if stop.is_set():
                            return
                        if line.strip():
                            seen(str(json.loads(line).get("type") or ""))
            except Exception as exc:  # the apiserver away, a refused watch, a reset connection
                logger.debug("watch of %s %s: %s; again in %.0fs", collection, name, exc, backoff)
                stop.wait(backoff)
                backoff = min(30.0, backoff * 2)

    async def close(self) -> None:
        """Nothing to release: every call uses its own connection."""

    async def __aenter__(self) -> "KubeAPI":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()
