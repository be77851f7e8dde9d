"""Kubernetes objects as plain dicts, as a client writes them and the API returns them: NRTs,
AppGroups, NetworkTopologies, pods and nodes for tests and benchmarks.

Each builder makes the common case one call with keyword arguments for what varies; any client
(``kubernetes_asyncio``, ``toposched.kube``, YAML files for the CLI) takes the result as it is. A
test whose point is an object's literal shape (a malformed one, say) writes it out instead.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from toposched.apis.appgroup import AppGroup
from toposched.apis.constants import (
    APPGROUP_LABEL,
    NRT_ATTR_CPU_MANAGER_POLICY,
    NRT_ATTR_MEMORY_MANAGER_POLICY,
    NRT_ATTR_TOPOLOGY_MANAGER_POLICY,
    NRT_ATTR_TOPOLOGY_MANAGER_SCOPE,
    REGION_LABEL,
    WORKLOAD_LABEL,
    ZONE_LABEL,
)
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology

Amount = int | str
"""A quantity as it is written in an object: 16, "60Gi", "500m"."""

Figures = Amount | tuple[Amount, Amount, Amount]
"""A resource of an NRT zone: its (capacity, allocatable, available), or one amount for all three."""

Dependency = str | tuple[str, Mapping[str, Any]]
"""A workload's dependency: the selector of the workload it talks to, or that and more fields of
the dependency (``{"maxNetworkCost": 20}``)."""

KWOK_TOLERATION: dict[str, str] = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
"""Lets a pod run on kwok's simulated nodes, which carry this taint."""

KWOK_NODE: dict[str, str] = {"kwok.x-k8s.io/node": "fake"}
"""The annotation by which kwok takes a node as one of its simulated nodes."""


# NodeResourceTopology ---------------------------------------------------------------------


def nrt_body(
    name: str,
    zones: Sequence[Mapping[str, Figures]],
    *,
    policy: str | None = "single-numa-node",
    scope: str | None = "container",
    cpu_manager: str | None = "static",
    memory_manager: str | None = "None",
    attributes: Mapping[str, str] | None = None,
    distances: Sequence[Sequence[int]] | None = None,
    owner_uid: str | None = None,
) -> dict[str, Any]:
    """An NRT whose zone ``node-<i>`` holds ``zones[i]`` (resource -> figures, in that order).

    The kubelet's settings become the attributes an exporter publishes (None leaves one out),
    followed by ``attributes``; ``distances[i][j]`` is the cost from zone i to zone j; with an
    ``owner_uid`` the node of that name owns the NRT, as the exporter's NRTs are owned.
    """
    built = []
    for i, resources in enumerate(zones):
        zone: dict[str, Any] = {
            "name": f"node-{i}",
            "type": "Node",
            "resources": [_zone_resource(resource, figures) for resource, figures in resources.items()],
        }
        if distances is not None:
            zone["costs"] = [{"name": f"node-{j}", "value": value} for j, value in enumerate(distances[i])]
        built.append(zone)
    settings = {
        NRT_ATTR_TOPOLOGY_MANAGER_POLICY: policy,
        NRT_ATTR_TOPOLOGY_MANAGER_SCOPE: scope,
        NRT_ATTR_CPU_MANAGER_POLICY: cpu_manager,
        NRT_ATTR_MEMORY_MANAGER_POLICY: memory_manager,
    }
    named = {key: value for key, value in settings.items() if value is not None} | dict(attributes or {})
    metadata: dict[str, Any] = {"name": name}
    if owner_uid is not None:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": owner_uid}]
    return {
        "apiVersion": f"{NodeResourceTopology.GROUP}/{NodeResourceTopology.VERSION}",
        "kind": "NodeResourceTopology",
        "metadata": metadata,
        "zones": built,
        "attributes": [{"name": key, "value": value} for key, value in named.items()],
    }


def _zone_resource(name: str, figures: Figures) -> dict[str, Any]:
    capacity, allocatable, available = figures if isinstance(figures, tuple) else (figures, figures, figures)
    return {"name": name, "capacity": capacity, "allocatable": allocatable, "available": available}


# AppGroup ---------------------------------------------------------------------------------


def appgroup_spec(
    workloads: Mapping[str, Sequence[Dependency]],
    *,
    kind: str = "Deployment",
    api_version: str | None = None,
    names: Mapping[str, str] | None = None,
    min_bandwidth: str | None = None,
    algorithm: str | None = None,
    members: int | None = None,
) -> dict[str, Any]:
    """An AppGroup's spec: workload selector -> the workloads it depends on, in that order.

    Every workload is a ``kind`` named as its selector unless ``names`` says otherwise; each
    dependency has ``min_bandwidth`` when it is given; ``numMembers`` is ``members``, else the
    number of workloads (at least 1, as the CRD requires).
    """

    def info(selector: str) -> dict[str, str]:
        found = {"kind": kind, "name": (names or {}).get(selector, selector), "selector": selector}
        return found | ({"apiVersion": api_version} if api_version else {})

    def dependency(entry: Dependency) -> dict[str, Any]:
        selector, fields = (entry, {}) if isinstance(entry, str) else entry
        return {"workload": info(selector), **({"minBandwidth": min_bandwidth} if min_bandwidth else {}), **fields}

    items = [
        {"workload": info(w), **({"dependencies": [dependency(d) for d in deps]} if deps else {})}
        for w, deps in workloads.items()
    ]
    spec: dict[str, Any] = {"numMembers": members if members is not None else max(1, len(items))}
    if algorithm is not None:
        spec["topologySortingAlgorithm"] = algorithm
    return spec | {"workloads": items}


def appgroup_body(
    name: str,
    workloads: Mapping[str, Sequence[Dependency]] | None = None,
    *,
    spec: Mapping[str, Any] | None = None,
    namespace: str | None = None,
    kind: str = "Deployment",
    api_version: str | None = None,
    min_bandwidth: str | None = None,
    algorithm: str | None = None,
) -> dict[str, Any]:
    """An AppGroup of ``workloads`` (see :func:`appgroup_spec`), or with the ``spec`` given as it is."""
    if spec is None:
        spec = appgroup_spec(
            workloads or {}, kind=kind, api_version=api_version, min_bandwidth=min_bandwidth, algorithm=algorithm
        )
    metadata = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {
        "apiVersion": f"{AppGroup.GROUP}/{AppGroup.VERSION}",
        "kind": "AppGroup",
        "metadata": metadata,
        "spec": dict(spec),
    }


def topology_order(order: Sequence[str], kind: str = "Deployment") -> list[dict[str, Any]]:
    """An AppGroup's ``status.topologyOrder`` for workloads (selector = name) in this order, as the
    operator writes it: indexes from 1."""
    return [{"workload": {"kind": kind, "name": w, "selector": w}, "index": i} for i, w in enumerate(order, 1)]


def member_labels(appgroup: str, workload: str) -> dict[str, str]:
    """The labels that make a pod a member of ``appgroup``'s ``workload``."""
    return {APPGROUP_LABEL: appgroup, WORKLOAD_LABEL: workload}


# NetworkTopology --------------------------------------------------------------------------


def networktopology_body(
    name: str,
    weights: Sequence[Mapping[str, Any]] = (),
    *,
    configmap: str = "netperf-metrics",
    namespace: str | None = None,
) -> dict[str, Any]:
    """A NetworkTopology with these ``weights``, whose measured costs come from ``configmap``."""
    metadata = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {
        "apiVersion": f"{NetworkTopology.GROUP}/{NetworkTopology.VERSION}",
        "kind": "NetworkTopology",
        "metadata": metadata,
        "spec": {"configmapName": configmap, "weights": [dict(w) for w in weights]},
    }


# Pod and Node -----------------------------------------------------------------------------


def pod_body(
    name: str = "p",
    *,
    cpu: Amount | None = None,
    memory: str | None = None,
    devices: Mapping[str, Amount] | None = None,
    guaranteed: bool = True,
    namespace: str | None = None,
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    scheduler: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    node_name: str | None = None,
    tolerations: Sequence[Mapping[str, str]] | None = None,
    container: str = "app",
    image: str | None = None,
) -> dict[str, Any]:
    """A pod of one container asking for ``cpu``, ``memory`` and ``devices`` (extended resources).

    ``guaranteed``: the amounts are limits, which the apiserver copies to the requests (so with a
    cpu and a memory the pod is Guaranteed); otherwise requests only. Without any amount the
    container has no resources field. Fields left None are left out.
    """
    amounts: dict[str, str] = {}
    for resource, amount in (("cpu", cpu), ("memory", memory), *(devices or {}).items()):
        if amount is not None:
            amounts[resource] = str(amount)
    app: dict[str, Any] = {"name": container}
    if image is not None:
        app["image"] = image
    if amounts:
        app["resources"] = {"limits" if guaranteed else "requests": amounts}
    metadata: dict[str, Any] = {"name": name}
    optional_metadata = (("namespace", namespace), ("uid", uid), ("labels", labels), ("annotations", annotations))
    metadata.update({key: _plain(value) for key, value in optional_metadata if value is not None})
    spec: dict[str, Any] = {}
    optional_spec = (("schedulerName", scheduler), ("nodeSelector", node_selector), ("nodeName", node_name))
    spec.update({key: _plain(value) for key, value in optional_spec if value is not None})
    if tolerations is not None:
        spec["tolerations"] = [dict(t) for t in tolerations]
    spec["containers"] = [app]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def node_body(
    name: str,
    *,
    region: str | None = None,
    zone: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
    kwok: bool = False,
) -> dict[str, Any]:
    """A Node in ``region`` and ``zone`` (the topology labels) with more ``labels``; ``kwok`` makes it
    one of kwok's simulated nodes. Capacity is the allocatable unless given; without either the
    node has no status."""
    found_labels = {REGION_LABEL: region, ZONE_LABEL: zone}
    metadata: dict[str, Any] = {"name": name}
    all_labels = {k: v for k, v in found_labels.items() if v is not None} | dict(labels or {})
    if all_labels:
        metadata["labels"] = all_labels
    all_annotations = (KWOK_NODE if kwok else {}) | dict(annotations or {})
    if all_annotations:
        metadata["annotations"] = all_annotations
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": metadata}
    status = {"allocatable": allocatable, "capacity": capacity if capacity is not None else allocatable}
    if any(v is not None for v in status.values()):
        body["status"] = {key: dict(value) for key, value in status.items() if value is not None}
    return body


def _plain(value: str | Mapping[str, str]) -> str | dict[str, str]:
    return value if isinstance(value, str) else dict(value)


# -- DRA: ResourceSlices, DeviceClasses, ResourceClaims (resource.k8s.io/v1) -------------------------

NUMA_NODE = "resource.kubernetes.io/numaNode"


def gpu_slice_body(
    name: str, node: str, driver: str, devices: Sequence[tuple[str, int | None]], pool: str | None = None
) -> dict[str, Any]:
    """A node's ResourceSlice, one pool of its own, its devices (name, NUMA node; None: no attribute)
    in this order -- the allocator's first fit order within the slice."""
    listed = [{"name": d, "attributes": {} if numa is None else {NUMA_NODE: {"int": numa}}} for d, numa in devices]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": pool or node, "generation": 1, "resourceSliceCount": 1},
            "devices": listed,
        },
    }


def deviceclass_body(driver: str) -> dict[str, Any]:
    """A DeviceClass named after its driver, selecting that driver's devices."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def claim_body(
    name: str, device_class: str, namespace: str | None = None, allocated: tuple[str, str, str] | None = None
) -> dict[str, Any]:
    """A claim of one device of the class; ``allocated``: (driver, pool, device) its status holds."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
    }
    if allocated is not None:
        driver, pool, device = allocated
        result = {"request": "gpu", "driver": driver, "pool": pool, "device": device}
        body["status"] = {"allocation": {"devices": {"results": [result]}}}
    return body


def with_claim(pod: dict[str, Any], claim: str | None = None, template: str | None = None) -> dict[str, Any]:
    """The pod (``pod_body``'s) with one claim, named "gpu", for its first container."""
    entry = {"name": "gpu", **({"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": template})}
    pod["spec"]["resourceClaims"] = [entry]
    pod["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "gpu"}]
    return pod
