"""A small Kubernetes API client for the node daemons (exporter, prober).

They run on every node, so their footprint counts: importing kubernetes_asyncio's generated
client costs about 60 MiB resident (aiohttp alone 9 MiB), while these daemons make about one
plain JSON call a second; the standard library's urllib in a worker thread does that.
Authentication: the pod's service account (token re-read, as it rotates), else the current
context of $KUBECONFIG / ~/.kube/config (client certificates, bearer token, CA data or file).
"""

import asyncio
import base64
import json
import os
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


def _data_or_file(entry: dict[str, Any], key: str, base: Path) -> bytes | None:
    if f"{key}-data" in entry:
        return base64.b64decode(entry[f"{key}-data"])
    if key in entry:
        return (base / str(entry[key])).read_bytes()
    return None


class KubeAPI:
    def __init__(
        self, server: str, ssl_context: ssl.SSLContext, token_file: Path | None = None, token: str | None = None
    ):
        self.server = server.rstrip("/")
        self._ssl = ssl_context
        self._token_file = token_file
        self._token = token

    @classmethod
    def from_environment(cls) -> "KubeAPI":
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
        if host and port and (SERVICE_ACCOUNT / "token").exists():
            context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
            return cls(f"https://{host}:{port}", context, token_file=SERVICE_ACCOUNT / "token")
        path = Path(os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or Path.home() / ".kube" / "config")
        return cls.from_kubeconfig(path)

    @classmethod
    def from_kubeconfig(cls, path: Path) -> "KubeAPI":
        config = yaml.safe_load(path.read_text())
        base = path.parent
        contexts = {c["name"]: c["context"] for c in config.get("contexts", [])}
        context = contexts[config["current-context"]]
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        users = {u["name"]: u["user"] for u in config.get("users", [])}
        user: dict[str, Any] = users.get(context.get("user"), {})
        ssl_context = ssl.create_default_context()
        ca = _data_or_file(cluster, "certificate-authority", base)
        if ca is not None:
            ssl_context.load_verify_locations(cadata=ca.decode())
        if cluster.get("insecure-skip-tls-verify"):
            ssl_context.check_hostname = False
            ssl_context.verify_mode = ssl.CERT_NONE
        cert, key = _data_or_file(user, "client-certificate", base), _data_or_file(user, "client-key", base)
        if cert is not None and key is not None:
            # ssl wants files; keep them only as long as it takes to load them.
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "c").write_bytes(cert)
                (Path(tmp) / "k").write_bytes(key)
                ssl_context.load_cert_chain(Path(tmp) / "c", Path(tmp) / "k")
        return cls(cluster["server"], ssl_context, token=user.get("token"))

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        token = self._token_file.read_text().strip() if self._token_file else self._token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    async def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json", **params: str
    ) -> Any:
        url = self.server + path + ("?" + urllib.parse.urlencode(params) if params else "")
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            url, data=data, method=method, headers=self._headers(content_type if data else None)
        )
        return await asyncio.to_thread(self._send, req)

    def _send(self, req: urllib.request.Request) -> Any:
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
