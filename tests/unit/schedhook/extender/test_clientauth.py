"""Only kube-scheduler's client certificate reaches the extender's verbs; the probes stay open."""

import ssl
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from testkit.certs import SCHEDULER_CLIENT, ExtenderPKI
from testkit.extender import REFUSED, call
from testkit.nrt import POD
from toposched.schedhook.extender.clientauth import certificate_names, require_client, server_context
from toposched.schedhook.extender.coordinator import Coordinator, ExtenderConfig
from toposched.schedhook.extender.server import Extender
from toposched.schedhook.extender.store import ObjectStore

BODY = {"Pod": POD, "NodeNames": ["n0"], "PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "n0"}


@pytest.fixture
async def port(pki: ExtenderPKI) -> AsyncIterator[int]:
    extender = Extender(Coordinator(ObjectStore(), None, ExtenderConfig(bind_wait=0)))  # never synced
    runner = web.AppRunner(extender.app([require_client([SCHEDULER_CLIENT])]), access_log=None)
    await runner.setup()
    tls = server_context(str(pki.serving.cert), str(pki.serving.key), str(pki.ca))
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    yield runner.addresses[0][1]
    await runner.cleanup()


CALLERS = {
    "kube-scheduler": lambda pki: pki.scheduler,
    "no-certificate": lambda pki: None,
    "same-ca-other-name": lambda pki: pki.impostor,
    "scheduler-name-other-ca": lambda pki: pki.stranger,
}


@pytest.mark.parametrize(
    ("caller", "path", "expected"),
    [
        pytest.param("kube-scheduler", "/filter", 200, id="scheduler-filters"),
        pytest.param("kube-scheduler", "/prioritize", 200, id="scheduler-prioritizes"),
        pytest.param("no-certificate", "/filter", 401, id="anonymous-filter"),
        pytest.param("no-certificate", "/prioritize", 401, id="anonymous-prioritize"),
        pytest.param("no-certificate", "/bind", 401, id="anonymous-bind"),
        pytest.param("same-ca-other-name", "/filter", 403, id="other-name-filter"),
        pytest.param("same-ca-other-name", "/bind", 403, id="other-name-bind"),
        pytest.param("scheduler-name-other-ca", "/filter", REFUSED, id="other-ca-filter"),
        pytest.param("scheduler-name-other-ca", "/bind", REFUSED, id="other-ca-bind"),
        pytest.param("no-certificate", "/healthz", 200, id="probe-healthz"),
        pytest.param("no-certificate", "/readyz", 503, id="probe-readyz-while-syncing"),
    ],
)
async def test_callers(pki: ExtenderPKI, port: int, caller: str, path: str, expected: int | str) -> None:
    context = ssl.create_default_context(cafile=str(pki.ca))
    identity = CALLERS[caller](pki)
    if identity is not None:
        context.load_cert_chain(identity.cert, identity.key)
    assert (await call(port, path, BODY, context))[0] == expected


@pytest.mark.parametrize("path", ["/filter", "/prioritize", "/bind"])
async def test_plain_http_is_not_served(port: int, path: str) -> None:
    assert (await call(port, path, BODY, None))[0] == REFUSED


@pytest.mark.parametrize(
    ("peercert", "names"),
    [
        pytest.param({"subject": ((("commonName", "toposched-scheduler"),),)}, {"toposched-scheduler"}, id="cn"),
        pytest.param(
            {
                "subject": ((("organizationName", "x"),), (("commonName", "a"),)),
                "subjectAltName": (("DNS", "b.example"), ("IP Address", "10.0.0.1")),
            },
            {"a", "b.example"},
            id="cn-and-dns-sans-not-ips",
        ),
        pytest.param({}, set(), id="empty"),
    ],
)
def test_certificate_names(peercert: dict[str, object], names: set[str]) -> None:
    assert certificate_names(peercert) == names
