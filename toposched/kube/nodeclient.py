"""A small Kubernetes API client for the node daemons (exporter, prober).

They run on every node, so their footprint counts: importing kubernetes_asyncio's generated
client costs about 60 MiB resident (aiohttp alone 9 MiB), while these daemons make about one
plain JSON call a second; the standard library's urllib in a worker thread does that.
Authentication: ``credentials`` (the pod's service account, its token re-read as it rotates,
else the current context of $KUBECONFIG / ~/.kube/config).
"""

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from toposched.kube import credentials
from toposched.kube.credentials import Credentials


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class KubeAPI:
    def __init__(self, creds: Credentials) -> None:
        self.creds = creds
        self.server = creds.server.rstrip("/")
        self._ssl = creds.ssl_context()

    @classmethod
    def from_environment(cls) -> "KubeAPI":
        return cls(credentials.load())

    @classmethod
    def from_kubeconfig(cls, path: Path) -> "KubeAPI":
        return cls(credentials.from_kubeconfig(path))

    async def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json", **params: str
    ) -> Any:
        url = self.server + path + ("?" + urllib.parse.urlencode(params) if params else "")
        data = None if body is None else json.dumps(body).encode()
        return await asyncio.to_thread(self._send, method, url, data, content_type)

    def _send(self, method: str, url: str, data: bytes | None, content_type: str) -> Any:
        before = self.creds.client_pair
        self.creds = self.creds.refreshed()  # a rotated token file, an expired exec credential
        if self.creds.client_pair != before:
            self._ssl = self.creds.ssl_context()
        headers = self.creds.headers(content_type if data else None)
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=30) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            try:
                message = json.loads(text).get("message", text)
            except ValueError:
                message = text
            raise ApiError(exc.code, message) from None
        return json.loads(text) if text else None

    async def close(self) -> None:
        """Nothing to release: every call uses its own connection."""

    async def __aenter__(self) -> "KubeAPI":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()
