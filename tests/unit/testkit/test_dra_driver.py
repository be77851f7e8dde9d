"""The DRA driver's parts (testkit.dra) without a kubelet: its two gRPC services on unix sockets,
called as the kubelet calls them, and its slice publisher against a stand-in API server. The real
kubelet's and scheduler's side is in tests/integration/test_realnode_dra.py."""

import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import grpc
import pytest

from testkit.dra._generated import dra_pb2, dra_pb2_grpc, registration_pb2, registration_pb2_grpc
from testkit.dra.driver import Endpoint
from testkit.dra.publisher import SLICES, SlicePublisher
from testkit.dra.service import DRAPluginService, RegistrationService, prepared
from testkit.realnode.dra import NodeDRA, published
from testkit.realnode.dra_driver import GET_INFO, NOTIFY, PREPARE, PUBLISHED, UNPREPARE
from toposched.kube.api import ApiError
from toposched.kube.nodeclient import KubeAPI

GPU = "gpu.example.com"
Logged = list[tuple[str, str, tuple[str, ...], dict[str, object]]]


def _claim(uid: str, *results: tuple[str, str, str, str]) -> dict[str, Any]:
    """A claim allocated (driver, pool, device, request) per result; none: not allocated."""
    status = {"allocation": {"devices": {"results": [
        {"driver": d, "pool": p, "device": name, "request": r} for d, p, name, r in results
    ]}}} if results else {}  # fmt: skip
    return {"metadata": {"uid": uid}, "status": status}


CLAIMS: dict[str, dict[str, Any]] = {
    "two": _claim(
        "u2", (GPU, "n1", "gpu-0", "gpus"), ("nic.example.com", "n1", "nic-0", "nic"), (GPU, "n1", "gpu-3", "gpus")
    ),
    "late": _claim("u3"),
}


class Claims:
    async def claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        if name == "broken":
            raise ApiError(500, "etcd is away")
        return CLAIMS.get(name)


@pytest.mark.parametrize(
    ("claim", "uid", "devices", "error"),
    [
        (CLAIMS["two"], "u2", [("n1", "gpu-0", "gpus"), ("n1", "gpu-3", "gpus")], ""),
        (None, "u1", [], "no such ResourceClaim"),
        (CLAIMS["two"], "u9", [], "the ResourceClaim has UID u2, the kubelet asked for u9"),
        (CLAIMS["late"], "u3", [], "the ResourceClaim is not allocated"),
    ],
    ids=["allocated", "gone", "another", "not-allocated"],
)
def test_what_prepare_answers_for_a_claim(
    claim: dict[str, Any] | None, uid: str, devices: list[tuple[str, str, str]], error: str
) -> None:
    found, problem = prepared(claim, uid, GPU)
    assert [(d.pool_name, d.device_name, *d.request_names) for d in found] == devices
    assert all(not d.cdi_device_ids for d in found)
    assert problem == error


@pytest.fixture
async def served() -> AsyncIterator[tuple[Endpoint, Logged, list[tuple[str, bool]]]]:
    directory = Path(tempfile.mkdtemp(prefix="tsdra-", dir="/tmp"))  # unix socket paths are short
    logged: Logged = []
    registered: list[tuple[str, bool]] = []

    def log(method: str, resource: str, ids: Sequence[str], **detail: object) -> None:
        logged.append((method, resource, tuple(ids), detail))

    endpoint = Endpoint(GPU, directory)
    registration = RegistrationService(GPU, lambda d, ok: registered.append((d, ok)), log)
    await endpoint.serve(registration, DRAPluginService(GPU, cast(Any, Claims()), lambda: {"n1/gpu-0"}, log))
    yield endpoint, logged, registered
    await endpoint.close()
    assert not endpoint.registration.exists()
    assert not endpoint.plugin.exists()
    shutil.rmtree(directory, ignore_errors=True)


async def test_the_kubelet_s_calls_over_the_sockets(
    served: tuple[Endpoint, Logged, list[tuple[str, bool]]],
) -> None:
    endpoint, logged, registered = served
    assert endpoint.registration.name == f"{GPU}-reg.sock"
    async with grpc.aio.insecure_channel(f"unix:{endpoint.registration}") as channel:
        stub = registration_pb2_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
        info = await stub.GetInfo(registration_pb2.InfoRequest())
        await stub.NotifyRegistrationStatus(registration_pb2.RegistrationStatus(plugin_registered=True))
    assert (info.type, info.name, list(info.supported_versions)) == ("DRAPlugin", GPU, ["v1.DRAPlugin"])
    assert info.endpoint == f"/var/lib/kubelet/plugins/{GPU}/dra.sock"  # as the kubelet's namespace sees it
    assert registered == [(GPU, True)]

    claims = [
        dra_pb2.Claim(namespace="ns", uid=u, name=n) for u, n in (("u2", "two"), ("u1", "gone"), ("u4", "broken"))
    ]
    async with grpc.aio.insecure_channel(f"unix:{endpoint.plugin}") as channel:
        dra = dra_pb2_grpc.DRAPluginStub(channel)  # type: ignore[no-untyped-call]
        answer = await dra.NodePrepareResources(dra_pb2.NodePrepareResourcesRequest(claims=claims))
        undone = await dra.NodeUnprepareResources(dra_pb2.NodeUnprepareResourcesRequest(claims=claims[:1]))
    assert set(answer.claims) == {"u2", "u1", "u4"}  # every claim of the request has its entry
    assert [d.device_name for d in answer.claims["u2"].devices] == ["gpu-0", "gpu-3"]
    assert answer.claims["u1"].error == "no such ResourceClaim"
    assert answer.claims["u4"].error.startswith("reading the ResourceClaim failed: 500")
    assert dict(undone.claims) == {"u2": dra_pb2.NodeUnprepareResourceResponse()}

    assert [(m, r, ids) for m, r, ids, _ in logged] == [
        (GET_INFO, GPU, ()),
        (NOTIFY, GPU, ()),
        (PREPARE, GPU, ("n1/gpu-0", "n1/gpu-3")),
        (PREPARE, GPU, ()),
        (PREPARE, GPU, ()),
        (UNPREPARE, GPU, ()),
    ]
    assert logged[2][3] == {"claim": "ns/two", "uid": "u2", "requests": "gpus", "unknown": "n1/gpu-3"}


class FakeAPI:
    """The API server's ResourceSlices and one Node, as the publisher calls them."""

    def __init__(self) -> None:
        self.slices: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.down = False

    async def request(self, method: str, path: str, body: Any = None, **params: str) -> Any:
        if self.down:
            raise ApiError(503, "the apiserver is away")
        self.calls.append((method, path))
        name = path.rsplit("/", 1)[1]
        if path == "/api/v1/nodes/n1":
            return {"metadata": {"name": "n1", "uid": "node-uid"}}
        if method == "GET":
            assert params == {"fieldSelector": "spec.nodeName=n1,spec.driver=gpu.example.com"}
            return {"items": [s for s in self.slices.values() if s["spec"]["driver"] == GPU]}
        if method == "DELETE":
            del self.slices[name]
        else:
            self.slices[body["metadata"]["name"]] = body
        return body


async def test_the_publisher_creates_replaces_and_deletes_slices() -> None:
    api, logged = FakeAPI(), cast(Logged, [])
    publisher = SlicePublisher(cast(KubeAPI, api), "n1", lambda m, r, ids, **d: logged.append((m, r, tuple(ids), d)))
    first = NodeDRA.parse([f"{GPU}=0", f"{GPU}=1"]).resource_slices("n1", 1)
    await publisher.sync(GPU, first, 1)
    assert {published(s) for s in api.slices.values()} == {published(s) for s in first}
    assert {s["metadata"]["ownerReferences"][0]["uid"] for s in api.slices.values()} == {"node-uid"}
    assert logged[-1][:3] == (PUBLISHED, GPU, (f"n1.{GPU}.n1.s0", f"n1.{GPU}.n1.s1"))

    api.calls.clear()
    await publisher.sync(GPU, first, 1)  # nothing differs: one look, no write, no line
    assert api.calls == [("GET", SLICES)]
    assert len(logged) == 1

    second = NodeDRA.parse([f"{GPU}=1,1"]).resource_slices("n1", 2)
    api.slices[f"n1.{GPU}.n1.s0"]["metadata"]["resourceVersion"] = "5"
    await publisher.sync(GPU, second, 2)
    assert {published(s) for s in api.slices.values()} == {published(s) for s in second}
    assert api.slices[f"n1.{GPU}.n1.s0"]["metadata"]["resourceVersion"] == "5"  # replaced at its version
    assert logged[-1][3] == {
        "generation": 2,
        "created": "-",
        "replaced": f"n1.{GPU}.n1.s0",
        "deleted": f"n1.{GPU}.n1.s1",
    }

    api.down = True
    await publisher.sync(GPU, first, 3)
    await publisher.sync(GPU, first, 3)
    assert [m for m, *_ in logged].count("Error") == 1  # said once until it changes
    api.down = False
    await publisher.sync(GPU, [], 3)
    assert api.slices == {}
    assert publisher.errors == {}
