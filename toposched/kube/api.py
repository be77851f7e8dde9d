"""A call to the apiserver as both clients make it, so that only their transports differ: the
URL path of a collection or an object, the request (URL with its query, headers, JSON body) and
the answer (its JSON, or an ApiError with the apiserver's message).

``rest`` sends requests over aiohttp (operators, schedhook), ``nodeclient`` over urllib in a
worker thread (the node daemons). No HTTP client is imported here, so the node daemons never load
aiohttp.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from toposched.kube.credentials import Credentials

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
TIMEOUT_SECONDS = 30
"""A whole request and its answer (watches set their own)."""


class ApiError(RuntimeError):
    """The apiserver answered with an error status (its Status message in ``reason``)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.reason = reason


def path(group: str, version: str, plural: str, namespace: str | None = None, name: str | None = None) -> str:
    """The URL path of a collection or an object (``group`` "" for the core API)."""
    root = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    scope = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
    return f"{root}{scope}/{plural}" + (f"/{quote(name, safe='')}" if name else "")


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None


def request(
    creds: Credentials,
    method: str,
    url_path: str,
    body: Any = None,
    content_type: str = JSON,
    params: Mapping[str, object] | None = None,
) -> Request:
    """The request for these credentials (built again after they change: the token is in it).

    ``params`` are query parameters by the apiserver's names; None leaves one out, booleans are
    written ``true`` / ``false``."""
    query = {k: _query_value(v) for k, v in (params or {}).items() if v is not None}
    url = creds.server.rstrip("/") + url_path + ("?" + urlencode(query) if query else "")
    headers = {"Accept": JSON}
    if creds.bearer:
        headers["Authorization"] = f"Bearer {creds.bearer}"
    data = None if body is None else orjson.dumps(body)
    if data is not None:
        headers["Content-Type"] = content_type
    return Request(method, url, headers, data)


def _query_value(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def answer(status: int, raw: bytes) -> Any:
    """The JSON of an answer (None when empty); an error status raises ApiError."""
    if not 200 <= status < 300:
        raise ApiError(status, status_message(raw))
    return orjson.loads(raw) if raw else None


def status_message(body: bytes) -> str:
    """The message of an apiserver's Status answer, or the start of whatever came instead."""
    try:
        status = orjson.loads(body)
    except orjson.JSONDecodeError:
        status = None
    if isinstance(status, dict) and isinstance(status.get("message"), str):
        return str(status["message"])
    return body[:200].decode(errors="replace")
