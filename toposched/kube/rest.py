"""The Kubernetes API client of the operators and schedhook: plain JSON over one aiohttp session.

They read and write a handful of resources as dicts (lists and watches through ``watch``,
merge patches, Bindings, Events, Leases). The generated client does the same work through
models they never use, and importing it costs about 60 MiB resident per process.
"""

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson

from toposched.kube import credentials
from toposched.kube.credentials import Credentials

TIMEOUT = aiohttp.ClientTimeout(total=30, sock_connect=5)
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")

Lister = Callable[..., Awaitable[Any]]


class ApiError(RuntimeError):
    """The apiserver answered with an error status (its Status message in ``reason``)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.reason = reason


def status_message(body: bytes) -> str:
    """The message of an apiserver's Status answer, or the start of whatever came instead."""
    try:
        status = orjson.loads(body)
    except orjson.JSONDecodeError:
        status = None
    if isinstance(status, dict) and isinstance(status.get("message"), str):
        return str(status["message"])
    return body[:200].decode(errors="replace")


def path(group: str, version: str, plural: str, namespace: str | None = None, name: str | None = None) -> str:
    """The URL path of a collection or an object (``group`` "" for the core API)."""
    root = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    scope = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
    return f"{root}{scope}/{plural}" + (f"/{quote(name, safe='')}" if name else "")


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
}


class Kube:
    """One apiserver, one pooled session. Requests answer parsed JSON or raise ApiError; a
    401 refreshes a rotating token (file or exec plugin) and is tried once more."""

    def __init__(self, creds: Credentials, pool_size: int = 16) -> None:
        self.creds = creds
        self.server = creds.server.rstrip("/")
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
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
        client_timeout: aiohttp.ClientTimeout = TIMEOUT,
    ) -> aiohttp.ClientResponse:
        """The response, unread (the caller reads or releases it); error statuses included."""
        data = None if body is None else orjson.dumps(body)
        for attempt in (0, 1):
            session = await self._ensure()
            response = await session.request(
                method,
                self.server + url_path,
                data=data,
                params=params,
                headers=self.creds.headers(content_type if data is not None else None),
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
        if not 200 <= response.status < 300:
            raise ApiError(response.status, status_message(raw))
        return orjson.loads(raw) if raw else None

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
            params = {_PARAMS[k]: _query(v) for k, v in kwargs.items() if v is not None}
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


def _query(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


async def connect(pool_size: int = 16) -> Kube:
    """A client from the pod's service account when running in a cluster, else from the kubeconfig."""
    # Read (and an exec plugin run) before the first request: its certificate goes into the TLS context.
    return Kube(await asyncio.to_thread(lambda: credentials.load().refreshed()), pool_size)
