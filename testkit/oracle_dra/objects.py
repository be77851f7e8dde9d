"""A DRA oracle case as the API objects it writes: device classes, ResourceSlices on the
worker's nodes, claims, claim templates and pods. Pure.

Every cluster-scoped name carries the case's namespace (unique per case and run), pools too, so
no two cases share a device class or a device; the short names keep the case's order (a node's
pools, a pool's slices).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from testkit.oracle_dra.cases import CLASSES, TAINT, Case, Claim, Device, Pod, Spec

API_VERSION = "resource.k8s.io/v1"
LABEL = "toposched.invalid/dra-oracle"
"""On the oracle's nodes (its value the worker's name) and its objects (the case's namespace)."""
GATE = "toposched.invalid/dra-oracle"
"""The case pod's scheduling gate: held until toposched has predicted."""
TOLERATION = {"key": LABEL, "operator": "Exists", "effect": "NoSchedule"}
IMAGE = "registry.k8s.io/pause:3.10"


@dataclass(frozen=True)
class PodObjects:
    claims: tuple[dict[str, Any], ...]
    """Its ResourceClaims and ResourceClaimTemplates, written before it."""
    pod: dict[str, Any]


@dataclass(frozen=True)
class Objects:
    namespace: str
    classes: tuple[dict[str, Any], ...]
    slices: tuple[dict[str, Any], ...]
    earlier: tuple[PodObjects, ...]
    case_pod: PodObjects


def render(case: Case, namespace: str, worker: str, nodes: Sequence[str]) -> Objects:
    """The case's objects in ``namespace``, its slices on ``nodes`` (the worker's, in order)."""
    if case.nodes > len(nodes):
        raise ValueError(f"{case.label} needs {case.nodes} nodes, the worker has {len(nodes)}")
    classes = tuple(
        _cluster_object(
            "DeviceClass",
            f"{namespace}-{short}",
            namespace,
            {"selectors": [{"cel": {"expression": e}} for e in selectors]},
        )
        for short, selectors in CLASSES.items()
    )
    slices = tuple(
        _cluster_object(
            "ResourceSlice",
            f"{namespace}-{s.driver.split('.')[0]}-{s.pool}-{s.name}",
            namespace,
            {
                "driver": s.driver,
                "nodeName": nodes[s.node],
                "pool": {"name": f"{s.pool}-{namespace}", "generation": 1, "resourceSliceCount": s.count},
                "devices": [_device(d) for d in s.devices],
            },
        )
        for s in case.slices
    )
    earlier = tuple(_pod_objects(p, namespace, worker, gated=False) for p in case.earlier)
    return Objects(namespace, classes, slices, earlier, _pod_objects(case.pod, namespace, worker, gated=True))


def claim_names(objects: PodObjects) -> list[str]:
    """The ResourceClaims the pod names directly (created before it)."""
    return [c["metadata"]["name"] for c in objects.claims if c["kind"] == "ResourceClaim"]


def _cluster_object(kind: str, name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    metadata = {"name": name, "labels": {LABEL: namespace}}
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def _device(device: Device) -> dict[str, Any]:
    body: dict[str, Any] = {"name": device.name, "attributes": device.attributes}
    if device.capacity:
        body["capacity"] = device.capacity
    if device.shared:
        body["allowMultipleAllocations"] = True
    if device.tainted:
        body["taints"] = [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]
    return body


def _claim_spec(spec: Spec, namespace: str) -> Spec:
    """The spec with its device classes' short names made the case's."""

    def request(r: dict[str, Any]) -> dict[str, Any]:
        out = dict(r)
        if "deviceClassName" in out:
            out["deviceClassName"] = f"{namespace}-{out['deviceClassName']}"
        if "exactly" in out:
            out["exactly"] = request(out["exactly"])
        if "firstAvailable" in out:
            out["firstAvailable"] = [request(s) for s in out["firstAvailable"]]
        return out

    devices = dict(spec["devices"])
    devices["requests"] = [request(r) for r in devices["requests"]]
    return {**spec, "devices": devices}


def _claim_object(claim: Claim, pod: str, namespace: str) -> dict[str, Any]:
    spec = _claim_spec(claim.spec, namespace)
    name = f"{pod}-{claim.name}" if claim.template else claim.name
    metadata = {"name": name, "namespace": namespace}
    kind, body = ("ResourceClaimTemplate", {"spec": spec}) if claim.template else ("ResourceClaim", spec)
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": body}


def _pod_objects(pod: Pod, namespace: str, worker: str, gated: bool) -> PodObjects:
    claims = tuple(_claim_object(c, pod.name, namespace) for c in pod.claims)
    entries = []
    for claim, body in zip(pod.claims, claims, strict=True):
        source = "resourceClaimTemplateName" if claim.template else "resourceClaimName"
        entries.append({"name": claim.name, source: body["metadata"]["name"]})
    entries += [{"name": f"shared-{name}", "resourceClaimName": name} for name in pod.shared]
    spec: dict[str, Any] = {
        "nodeSelector": {LABEL: worker},
        "tolerations": [TOLERATION],
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {"name": "app", "image": IMAGE, "resources": {"claims": [{"name": e["name"]} for e in entries]}}
        ],
        "resourceClaims": entries,
    }
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod.name, "namespace": namespace}, "spec": spec}
    return PodObjects(claims, body)
