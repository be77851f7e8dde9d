"""The Kubernetes API client of the operators and schedhook: plain JSON over one aiohttp session.

They read and write a handful of resources as dicts (lists and watches through ``watch``,
merge patches, Bindings, Events, Leases). The generated client does the same work through
models they never use, and importing it costs about 60 MiB resident per process. What goes out
and how an answer is read is ``api``'s, shared with the node daemons' ``nodeclient``; this module
is the transport: a pooled session, token refreshes, a 401 tried once more.
"""

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import aiohttp

from toposched.kube import api, credentials
from toposched.kube.api import MERGE_PATCH as MERGE_PATCH
from toposched.kube.api import STRATEGIC_MERGE_PATCH as STRATEGIC_MERGE_PATCH
from toposched.kube.api import ApiError as ApiError
from toposched.kube.api import path as path
from toposched.kube.credentials import Credentials

TIMEOUT = aiohttp.ClientTimeout(total=api.TIMEOUT_SECONDS, sock_connect=5)
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")

Lister = Callable[..., Awaitable[Any]]

# The query parameters a lister takes, by the generated client's keyword names (``watch.follow``
# passes these, and tests hand it listers of either client).
_PARAMS = {
    "watch": "watch",
    "resource_version": "resourceVersion",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "timeout_seconds": "timeoutSeconds",
    "limit": "limit",
    "_continue": "continue",
    "label_selector": "labelSelector",
    "field_selector": "fieldSelector",
    "send_initial_events": "sendInitialEvents",
    "resource_version_match": "resourceVersionMatch",
}


class Kube:
    """One apiserver, one pooled session. Requests answer parsed JSON or raise ApiError; a
    401 refreshes a rotating token (file or exec plugin) and is tried once more."""

    def __init__(self, creds: Credentials, pool_size: int = 16) -> None:
        self.creds = creds
        self._pool_size = pool_size
        self._session: aiohttp.ClientSession | None = None
        self._ssl = creds.ssl_context()  # a CA or key that cannot be loaded fails here, not per request
        self._refresh_lock = asyncio.Lock()

    async def _ensure(self) -> aiohttp.ClientSession:
        rotating = self.creds.exec_plugin is not None or self.creds.token_file is not None
        if rotating and (self.creds.issued is None or not self.creds.issued.fresh(datetime.now(UTC))):
            await self._refresh(force=False)
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._pool_size, ssl=self._ssl)
            # The environment only when it sets a proxy: otherwise each request would look for
            # ~/.netrc and the proxy variables in a thread (a sixth of schedhook's time once).
            self._session = aiohttp.ClientSession(
                connector=connector, trust_env=any(os.environ.get(v) for v in PROXY_VARIABLES)
            )
        return self._session

    async def _refresh(self, force: bool) -> None:
        async with self._refresh_lock:
            before = self.creds.client_pair
            self.creds = await asyncio.to_thread(self.creds.refreshed, None, force)
            if self.creds.client_pair != before:  # an exec plugin issued a new certificate
                self._ssl = self.creds.ssl_context()
                if self._session is not None:
                    await self._session.close()
                    self._session = None

    async def send(
        self,
        method: str,
        url_path: str,
        body: Any = None,
        content_type: str = api.JSON,
        params: Mapping[str, object] | None = None,
        client_timeout: aiohttp.ClientTimeout = TIMEOUT,
    ) -> aiohttp.ClientResponse:
        """The response, unread (the caller reads or releases it); error statuses included."""
        for attempt in (0, 1):
            session = await self._ensure()
            call = api.request(self.creds, method, url_path, body, content_type, params)
            response = await session.request(
                call.method,
                call.url,
                data=call.body,
                headers=call.headers,
                timeout=client_timeout,
                server_hostname=self.creds.tls_server_name,
                proxy=self.creds.proxy,
            )
            if response.status != 401 or attempt or not (self.creds.token_file or self.creds.exec_plugin):
                return response
            response.release()
            await self._refresh(force=True)
        raise AssertionError("unreachable")

    @staticmethod
    async def _answer(response: aiohttp.ClientResponse) -> Any:
        """The answer's JSON (None when empty); an error status raises ApiError."""
        try:
            raw = await response.read()
        finally:
            response.release()
        return api.answer(response.status, raw)

    async def get(self, url_path: str, **params: str) -> Any:
        return await self._answer(await self.send("GET", url_path, params=params or None))

    async def create(self, url_path: str, body: Any) -> Any:
        return await self._answer(await self.send("POST", url_path, body))

    async def patch(self, url_path: str, body: Any, content_type: str = MERGE_PATCH) -> Any:
        return await self._answer(await self.send("PATCH", url_path, body, content_type))

    async def replace(self, url_path: str, body: Any) -> Any:
        return await self._answer(await self.send("PUT", url_path, body))

    async def delete(self, url_path: str) -> Any:
        return await self._answer(await self.send("DELETE", url_path))

    def lister(self, url_path: str) -> Lister:
        """A list call for ``watch.follow`` / ``watch.list_objects`` (``watch=True`` watches)."""

        async def call(
            _preload_content: bool = False, _request_timeout: aiohttp.ClientTimeout = TIMEOUT, **kwargs: Any
        ) -> aiohttp.ClientResponse:
            params = {_PARAMS[k]: v for k, v in kwargs.items()}
            return await self.send("GET", url_path, params=params, client_timeout=_request_timeout)

        return call

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> "Kube":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


async def connect(pool_size: int = 16) -> Kube:
    """A client from the pod's service account when running in a cluster, else from the kubeconfig."""
    # Read (and an exec plugin run) before the first request: its certificate goes into the TLS context.
    return Kube(await asyncio.to_thread(lambda: credentials.load().refreshed()), pool_size)
