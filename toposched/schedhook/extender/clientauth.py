"""Who may call the extender: kube-scheduler, known by its client certificate.

``/bind`` creates Bindings with schedhook's own rights, so whoever reaches an open extender can put
any pod on any node, past its nodeSelector and taints. The extender therefore serves HTTPS only,
and its verbs answer only a client certificate that chains to the given CA and names one of the
allowed clients. The certificate is optional in the handshake so that the kubelet's probes
(``/healthz``, ``/readyz``, which present none) still connect; a certificate that is presented must
chain to the CA, else the handshake fails.
"""

import ssl
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

OPEN_PATHS = frozenset({"/healthz", "/readyz"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def server_context(cert: str, key: str, client_ca: str) -> ssl.SSLContext:
    """The extender's TLS: its serving certificate, and client certificates verified against ``client_ca``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=client_ca)
    context.load_cert_chain(cert, key)
    context.verify_mode = ssl.CERT_OPTIONAL
    return context


def certificate_names(peercert: dict[str, Any]) -> set[str]:
    """The common name and the DNS names of a verified peer certificate (``SSLSocket.getpeercert()``)."""
    names = {value for rdn in peercert.get("subject", ()) for key, value in rdn if key == "commonName"}
    names.update(value for kind, value in peercert.get("subjectAltName", ()) if kind == "DNS")
    return names


def require_client(allowed: Collection[str]) -> Middleware:
    """aiohttp middleware: every path but the probes needs a verified client certificate naming an allowed client."""
    accepted = frozenset(allowed)

    @web.middleware
    async def authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        transport = request.transport
        peercert = transport.get_extra_info("peercert") if transport is not None else None
        if not peercert:
            return web.Response(status=401, text="toposched: the extender needs kube-scheduler's client certificate")
        names = certificate_names(peercert)
        if not names & accepted:
            shown = ", ".join(sorted(names)) or "no name"
            return web.Response(status=403, text=f"toposched: client certificate ({shown}) is not an allowed caller")
        return await handler(request)

    return authorize
