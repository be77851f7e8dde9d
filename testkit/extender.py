"""The extender as a local process: its TLS flags, kube-scheduler's configuration for it, a client.

Tests and benchmarks run ``toposched schedhook`` and a real kube-scheduler beside the local control
plane with the shipped scheduler configuration; both speak HTTPS with certificates from
``testkit.certs``, as in the chart.
"""

import base64
import ssl
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from string import Template
from typing import Any

import aiohttp
import orjson

from testkit.certs import ExtenderPKI, KeyPair
from testkit.paths import SCHEDULER_CONFIG
from toposched.apis.constants import WEIGHT_NETPERF
from toposched.schedhook.extender.coordinator import Coordinator, ExtenderConfig
from toposched.schedhook.extender.store import KINDS, ObjectStore


def schedhook_tls_args(pki: ExtenderPKI) -> list[str]:
    """The extender's serving certificate and kube-scheduler's CA (the webhooks stay off without --tls-*)."""
    return [
        *("--extender-tls-cert", str(pki.serving.cert), "--extender-tls-key", str(pki.serving.key)),
        *("--extender-client-ca", str(pki.ca)),
    ]


def scheduler_config(
    kubeconfig: Path,
    port: int,
    pki: ExtenderPKI,
    leader_elect: bool = False,
    lease_namespace: str = "kube-system",
    loopback: bool = False,
) -> str:
    """The chart's kube-scheduler configuration for an extender on 127.0.0.1:``port``: over HTTPS,
    or (``loopback``: the port is the extender's --loopback-port) plain HTTP, as the sidecar is called."""
    return Template(SCHEDULER_CONFIG.read_text()).substitute(
        KUBECONFIG=kubeconfig,
        LEADER_ELECT=str(leader_elect).lower(),
        LEASE_NAMESPACE=lease_namespace,
        EXTENDER_URL=f"{'http' if loopback else 'https'}://127.0.0.1:{port}",
        EXTENDER_HTTPS=str(not loopback).lower(),
        EXTENDER_CLIENT_CERT=pki.scheduler.cert,
        EXTENDER_CLIENT_KEY=pki.scheduler.key,
        EXTENDER_CA=pki.ca,
        EXTENDER_SERVER_NAME="",
    )


def client_context(pki: ExtenderPKI, identity: KeyPair | None = None) -> ssl.SSLContext:
    """TLS that trusts the extender, presenting ``identity`` (default: kube-scheduler's certificate)."""
    context = ssl.create_default_context(cafile=str(pki.ca))
    pair = identity or pki.scheduler
    context.load_cert_chain(pair.cert, pair.key)
    return context


def ready(port: int, pki: ExtenderPKI) -> bool:
    """Whether the extender on 127.0.0.1:``port`` answers /readyz with 200 (its cache has synced)."""
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", timeout=1, context=client_context(pki)) as r:
            return bool(r.status == 200)
    except OSError:
        return False


REFUSED = "refused in the handshake"


async def call(
    port: int, path: str, body: Any, context: ssl.SSLContext | None, server_hostname: str | None = None
) -> tuple[int | str, str]:
    """One request to the extender on 127.0.0.1:``port``, over HTTPS with ``context`` (checking the
    certificate for ``server_hostname``, default 127.0.0.1) or else plain HTTP: (status, body), or
    (REFUSED, why) when no HTTP answer came back."""
    scheme = "https" if context is not None else "http"
    method = "GET" if path in ("/healthz", "/readyz") else "POST"
    data = None if method == "GET" else orjson.dumps(body)
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                method,
                f"{scheme}://127.0.0.1:{port}{path}",
                data=data,
                ssl=context or False,
                server_hostname=server_hostname if context is not None else None,
            ) as answer,
        ):
            return answer.status, (await answer.read()).decode(errors="replace")
    except (aiohttp.ClientOSError, aiohttp.ClientSSLError, aiohttp.ServerDisconnectedError, ssl.SSLError) as exc:
        return REFUSED, str(exc)


class FilterSession:
    """``/filter`` of the extender on 127.0.0.1:``port`` as kube-scheduler calls it: over one
    kept-alive HTTPS connection of ``session``, with kube-scheduler's certificate."""

    def __init__(self, port: int, pki: ExtenderPKI, session: aiohttp.ClientSession) -> None:
        self.url = f"https://127.0.0.1:{port}/filter"
        self.tls = client_context(pki)
        self.session = session

    async def fitting(self, pod: dict[str, Any], names: list[str]) -> list[str]:
        """The nodes of ``names`` the extender passes for ``pod`` (an error answer raises)."""
        async with self.session.post(self.url, data=orjson.dumps({"Pod": pod, "NodeNames": names}), ssl=self.tls) as r:
            if r.status != 200:
                raise RuntimeError(f"/filter answered {r.status}: {(await r.read())[:300]!r}")
            found: list[str] = orjson.loads(await r.read()).get("NodeNames") or []
            return found


def in_process(
    objects: Mapping[str, Iterable[dict[str, Any]]] | None = None,
    weights_name: str = WEIGHT_NETPERF,
    dra_allocator: str = "",
) -> Coordinator:
    """The extender's decisions without a cluster: a store listed from ``objects`` (kind -> items;
    a kind not given is listed empty) and synced, the extender's coordinator over it without an API
    client and with no wait for binds."""
    store = ObjectStore()
    for kind in KINDS:
        store.listed(kind, list((objects or {}).get(kind, ())))
        store.mark_synced(kind)
    store.synced.set()
    config = ExtenderConfig(weights_name=weights_name, bind_wait=0, dra_allocator=dra_allocator)
    return Coordinator(store, api=None, config=config)


def claim_webhook_body(name: str, port: int, ca: bytes, namespace: str | None = None) -> dict[str, Any]:
    """A MutatingWebhookConfiguration sending new ResourceClaims of ``namespace`` (None: of every
    namespace but kube-system) to the claim webhook of a local schedhook (``--webhook-port port``)
    whose CA is ``ca``, as the chart's does."""
    hook = {
        "name": "resourceclaims.mutate.toposched.io",
        "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate-claims", "caBundle": base64.b64encode(ca).decode()},
        "rules": [
            {
                "apiGroups": ["resource.k8s.io"],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["resourceclaims"],
            }
        ],
        "namespaceSelector": (
            {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            if namespace is not None
            else {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
                ]
            }
        ),
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Ignore",
        "timeoutSeconds": 10,
    }
    return {"metadata": {"name": name}, "webhooks": [hook]}
