"""What the kubelet calls on one DRA driver: GetInfo and NotifyRegistrationStatus on its
registration socket, NodePrepareResources and NodeUnprepareResources on its DRAPlugin socket.

Prepare reads each claim from the API server and answers with the devices its allocation names
for this driver, without CDI device ids: nothing is made or mounted (containerd 1.6 knows no CDI),
so busybox pods and pods under the oracle's no-runtime RuntimeClass both run. Unprepare has
nothing to undo. Every call is logged, one line per claim.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from testkit.dra._generated import dra_pb2, dra_pb2_grpc, registration_pb2, registration_pb2_grpc
from testkit.realnode.dra_driver import GET_INFO, NOTIFY, PLUGIN_TYPE, PREPARE, SERVICE, UNPREPARE, kubelet_endpoint


class Log(Protocol):
    def __call__(self, method: str, resource: str, ids: Sequence[str], **detail: object) -> None: ...


class Claims(Protocol):
    """Where Prepare reads claims: the API server (None: no such claim)."""

    async def claim(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...


def prepared(claim: Mapping[str, Any] | None, uid: str, driver: str) -> tuple[list[dra_pb2.Device], str]:
    """The devices of ``driver`` that ``claim``'s allocation names, or an error for the kubelet
    (which then retries) when the claim is gone, another one, or not allocated."""
    if claim is None:
        return [], "no such ResourceClaim"
    found_uid = (claim.get("metadata") or {}).get("uid")
    if found_uid != uid:
        return [], f"the ResourceClaim has UID {found_uid}, the kubelet asked for {uid}"
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        return [], "the ResourceClaim is not allocated"
    devices = []
    for result in (allocation.get("devices") or {}).get("results") or ():
        if result.get("driver") != driver:
            continue
        device = dra_pb2.Device(
            request_names=[result["request"]], pool_name=result["pool"], device_name=result["device"]
        )
        if result.get("shareID"):
            device.share_id = result["shareID"]
        devices.append(device)
    return devices, ""


class RegistrationService(registration_pb2_grpc.RegistrationServicer):
    """pluginregistration.Registration of one driver: the kubelet's plugin watcher asks GetInfo,
    dials the endpoint and says whether the registration took."""

    def __init__(self, driver: str, registered: Callable[[str, bool], None], log: Log) -> None:
        self.driver = driver
        self.registered = registered
        self.log = log

    async def GetInfo(self, request: registration_pb2.InfoRequest, context: Any) -> registration_pb2.PluginInfo:  # noqa: N802
        endpoint = kubelet_endpoint(self.driver)
        self.log(GET_INFO, self.driver, (), endpoint=endpoint, versions=SERVICE)
        return registration_pb2.PluginInfo(
            type=PLUGIN_TYPE, name=self.driver, endpoint=endpoint, supported_versions=[SERVICE]
        )

    async def NotifyRegistrationStatus(  # noqa: N802
        self, request: registration_pb2.RegistrationStatus, context: Any
    ) -> registration_pb2.RegistrationStatusResponse:
        detail: dict[str, object] = {"registered": request.plugin_registered}
        if request.error:
            detail["message"] = request.error
        self.log(NOTIFY, self.driver, (), **detail)
        self.registered(self.driver, request.plugin_registered)
        return registration_pb2.RegistrationStatusResponse()


class DRAPluginService(dra_pb2_grpc.DRAPluginServicer):
    """k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin of one driver. ``known`` says which ``pool/device``
    it publishes now (a device it does not is logged as unknown, and prepared all the same)."""

    def __init__(self, driver: str, claims: Claims, known: Callable[[], set[str]], log: Log) -> None:
        self.driver = driver
        self.claims = claims
        self.known = known
        self.log = log

    async def NodePrepareResources(  # noqa: N802
        self, request: dra_pb2.NodePrepareResourcesRequest, context: Any
    ) -> dra_pb2.NodePrepareResourcesResponse:
        answer = dra_pb2.NodePrepareResourcesResponse()
        for claim in request.claims:
            devices: list[dra_pb2.Device] = []
            try:
                found = await self.claims.claim(claim.namespace, claim.name)
            except Exception as exc:  # the API server away: the kubelet asks again
                error = f"reading the ResourceClaim failed: {exc}"
            else:
                devices, error = prepared(found, claim.uid, self.driver)
            ids = [f"{d.pool_name}/{d.device_name}" for d in devices]
            detail: dict[str, object] = {"claim": f"{claim.namespace}/{claim.name}", "uid": claim.uid}
            detail["requests"] = ",".join(sorted({r for d in devices for r in d.request_names})) or "-"
            detail["unknown"] = ",".join(sorted(set(ids) - self.known())) or "-"
            if error:
                detail["message"] = error
            self.log(PREPARE, self.driver, ids, **detail)
            answer.claims[claim.uid].CopyFrom(dra_pb2.NodePrepareResourceResponse(devices=devices, error=error))
        return answer

    async def NodeUnprepareResources(  # noqa: N802
        self, request: dra_pb2.NodeUnprepareResourcesRequest, context: Any
    ) -> dra_pb2.NodeUnprepareResourcesResponse:
        answer = dra_pb2.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            self.log(UNPREPARE, self.driver, (), claim=f"{claim.namespace}/{claim.name}", uid=claim.uid)
            answer.claims[claim.uid].CopyFrom(dra_pb2.NodeUnprepareResourceResponse())
        return answer
