"""A small Kubernetes API client for the node daemons (exporter, prober).

They run on every node, so their footprint counts: importing kubernetes_asyncio's generated
client costs about 60 MiB resident (aiohttp alone 9 MiB), while these daemons make about one
plain JSON call a second; the standard library's urllib in a worker thread does that. Requests
and answers are ``api``'s, as for the operators' ``rest``. Authentication: ``credentials`` (the
pod's service account, its token re-read as it rotates, else the current context of
$KUBECONFIG / ~/.kube/config).
"""

import asyncio
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from toposched.kube import api, credentials
from toposched.kube.api import ApiError as ApiError
from toposched.kube.credentials import Credentials


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

    async def close(self) -> None:
        """Nothing to release: every call uses its own connection."""

    async def __aenter__(self) -> "KubeAPI":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()
