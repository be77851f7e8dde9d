"""Kubernetes objects (plain dicts, as the API returns them) -> the placement models. Pure.

Every parser here raises ValueError (pydantic's ValidationError is one) on input it cannot
read; the callers decide whether that skips one object or fails one request.
"""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from toposched.apis.constants import (
    APPGROUP_LABEL,
    NRT_ATTR_CPU_MANAGER_POLICY,
    NRT_ATTR_CPU_MANAGER_POLICY_OPTIONS,
    NRT_ATTR_DEVICE_GROUPS,
    NRT_ATTR_MEMORY_MANAGER_POLICY,
    NRT_ATTR_MEMORY_NUMA_GROUPS,
    NRT_ATTR_THREADS_PER_CORE,
    NRT_ATTR_TOPOLOGY_MANAGER_MAX_NUMA_NODES,
    NRT_ATTR_TOPOLOGY_MANAGER_POLICY,
    NRT_ATTR_TOPOLOGY_MANAGER_POLICY_OPTIONS,
    NRT_ATTR_TOPOLOGY_MANAGER_SCOPE,
    NRT_ZONE_ATTR_FREE_CORES,
    NRT_ZONE_ATTR_MEMORY_CELLS,
    NRT_ZONE_ATTR_SOCKET,
    NRT_ZONE_PREFIX,
    NUMA_ZONES_ANNOTATION,
    PREFER_CLOSEST_NUMA_NODES,
    REGION_LABEL,
    WEIGHT_NETPERF,
    WEIGHT_USER_DEFINED,
    WORKLOAD_LABEL,
    ZONE_LABEL,
)
from toposched.apis.devicegroups import DeviceGroup, parse_groups
from toposched.apis.kubelet import (
    ALIGN_BY_SOCKET,
    ALIGN_BY_UNCORE_CACHE,
    CONTAINER_SCOPE,
    CPU_POLICIES,
    DISTRIBUTE_ACROSS_NUMA,
    FULL_PCPUS_ONLY,
    LEGACY_POLICIES,
    MEMORY_POLICIES,
    NONE,
    POLICIES,
    SCOPES,
    SINGLE_NUMA_NODE,
)
from toposched.apis.limits import MAX_NUMA_NODES, check_amount
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.apis.quantity import parse_quantity
from toposched.schedhook.placement.kubelet.topologymanager import mask
from toposched.schedhook.placement.model import Container, NodeTopology, NumaZone, Placed, Pod
from toposched.schedhook.placement.network import Link, Location

_NUMA_ZONE = re.compile(re.escape(NRT_ZONE_PREFIX) + r"(0|[1-9][0-9]{0,3})")
_DECIMAL = re.compile(r"[0-9]{1,9}")
KNOWN_VALUES: dict[str, tuple[str, ...]] = {
    NRT_ATTR_TOPOLOGY_MANAGER_POLICY: POLICIES,
    NRT_ATTR_TOPOLOGY_MANAGER_SCOPE: SCOPES,
    NRT_ATTR_CPU_MANAGER_POLICY: CPU_POLICIES,
    NRT_ATTR_MEMORY_MANAGER_POLICY: MEMORY_POLICIES,
}
"""The values of the kubelet's policies the predictor follows: any other (``Single-NUMA-Node``, a
policy of a newer kubelet) makes the node unknown, never NUMA-free."""
TOPOLOGY_MANAGER_OPTIONS = {
    PREFER_CLOSEST_NUMA_NODES: lambda v: v in ("true", "false"),
    "max-allowable-numa-nodes": lambda v: bool(_DECIMAL.fullmatch(v)),
}
"""The Topology Manager's options of the pinned kubelet (1.36), and what a valid value is."""
CPU_MANAGER_OPTIONS = (
    FULL_PCPUS_ONLY,
    DISTRIBUTE_ACROSS_NUMA,
    ALIGN_BY_SOCKET,
    "distribute-cpus-across-cores",
    "strict-cpu-reservation",
    ALIGN_BY_UNCORE_CACHE,
)
"""The CPU Manager's options (1.36) the predictor follows: full-pcpus-only rejects (SMTAlignmentError);
distribute-cpus-across-numa spreads CPUs that spill out of the aligned zones over other zones
(any of which is then predicted); align-by-socket makes the CPU hints within the fewest sockets
preferred and takes CPUs from the whole sockets of the affinity first (each zone's socket is
published); prefer-align-cpus-by-uncorecache takes a request from one uncore cache (a socket
here) when one holds it; the others change which CPUs within the zones are taken, never the admission. Any
other option (a newer kubelet's) makes the node unknown rather than predicted wrong."""
CPU_OPTION_CONFLICTS = (
    (FULL_PCPUS_ONLY, "distribute-cpus-across-cores"),
    (DISTRIBUTE_ACROSS_NUMA, "distribute-cpus-across-cores"),
    (ALIGN_BY_UNCORE_CACHE, "distribute-cpus-across-cores"),
    (ALIGN_BY_UNCORE_CACHE, DISTRIBUTE_ACROSS_NUMA),
)
"""CPU Manager options the kubelet (1.36) refuses together: a node so configured runs no pods."""


def from_nrt(nrt: NodeResourceTopology, node_allocatable: Mapping[str, Decimal] | None = None) -> NodeTopology:
    """The node as the predictor sees it; zones other than NUMA nodes, or with ids above 63, are ignored."""
    policy, scope = _policy(nrt)
    options = _options(nrt.attribute(NRT_ATTR_TOPOLOGY_MANAGER_POLICY_OPTIONS))
    cpu_options = _cpu_options(nrt.attribute(NRT_ATTR_CPU_MANAGER_POLICY_OPTIONS))
    threads = _count(nrt.attribute(NRT_ATTR_THREADS_PER_CORE), low=1)
    if FULL_PCPUS_ONLY in cpu_options and threads is None:
        raise ValueError(
            f"attributes.{NRT_ATTR_CPU_MANAGER_POLICY_OPTIONS}: {FULL_PCPUS_ONLY} without "
            f"{NRT_ATTR_THREADS_PER_CORE}: which requests the kubelet rejects cannot be predicted"
        )
    zones, distances = _zones(nrt)
    if ALIGN_BY_SOCKET in cpu_options:
        _check_align_by_socket(policy, zones)
    for a, b in CPU_OPTION_CONFLICTS:
        if a in cpu_options and b in cpu_options:
            where = f"attributes.{NRT_ATTR_CPU_MANAGER_POLICY_OPTIONS}"
            raise ValueError(f"{where}: {a} with {b}: the kubelet refuses to start so configured")
    # The option as the toposched exporter publishes it, else the attribute other exporters use.
    most = _max_numa(options.get("max-allowable-numa-nodes") or nrt.attribute(NRT_ATTR_TOPOLOGY_MANAGER_MAX_NUMA_NODES))
    if policy != NONE and len(zones) > most:
        raise ValueError(
            f"{len(zones)} NUMA zones under the {policy} policy, more than max-allowable-numa-nodes ({most}): "
            "the kubelet refuses to start so configured"
        )
    return NodeTopology(
        name=nrt.name,
        zones=tuple(sorted(zones, key=lambda z: z.numa)),
        policy=policy,
        scope=scope,
        cpu_manager=nrt.attribute(NRT_ATTR_CPU_MANAGER_POLICY),
        memory_manager=nrt.attribute(NRT_ATTR_MEMORY_MANAGER_POLICY),
        node_allocatable=dict(node_allocatable or {}),
        distances=distances,
        max_numa=most,
        prefer_closest=options.get(PREFER_CLOSEST_NUMA_NODES) == "true",
        memory_groups=_groups(nrt.attribute(NRT_ATTR_MEMORY_NUMA_GROUPS)),
        threads_per_core=threads,
        cpu_options=cpu_options,
        device_groups=_device_groups(nrt.attribute(NRT_ATTR_DEVICE_GROUPS)),
    )


def _policy(nrt: NodeResourceTopology) -> tuple[str, str]:
    """The Topology Manager's policy and scope: the attributes, else the one-word policy of older
    NRTs; ValueError for a value the predictor does not follow (never read as NUMA-free)."""
    policy, scope = NONE, CONTAINER_SCOPE
    if nrt.topology_policies:
        legacy = nrt.topology_policies[0]
        if legacy not in LEGACY_POLICIES:
            raise ValueError(f"topologyPolicies: {legacy!r} is no policy toposched knows")
        policy, scope = LEGACY_POLICIES[legacy]
    for name, known in KNOWN_VALUES.items():
        value = nrt.attribute(name)
        if value is not None and value not in known:
            raise ValueError(
                f"attributes.{name}: {value!r} is no value toposched knows ({', '.join(known)}): the node's "
                "admission cannot be predicted"
            )
    return nrt.attribute(NRT_ATTR_TOPOLOGY_MANAGER_POLICY) or policy, nrt.attribute(
        NRT_ATTR_TOPOLOGY_MANAGER_SCOPE
    ) or scope


def _zones(nrt: NodeResourceTopology) -> tuple[list[NumaZone], dict[int, dict[int, int]]]:
    """The NRT's NUMA zones, and the distances between them from their costs."""
    zones = []
    distances: dict[int, dict[int, int]] = {}
    for z in nrt.zones:
        numa = _numa_id(z.name)
        if z.type != "Node" or numa is None or numa > 63:
            continue
        resources = z.resources or []
        distances[numa] = {other: c.value for c in z.costs or [] if (other := _numa_id(c.name)) is not None}
        zones.append(
            NumaZone(
                numa=numa,
                capacity={r.name: parse_quantity(r.capacity) for r in resources},
                allocatable={r.name: parse_quantity(r.allocatable) for r in resources},
                available={r.name: parse_quantity(r.available) for r in resources},
                free_cores=_count(z.attribute(NRT_ZONE_ATTR_FREE_CORES)),
                memory_cells=_cells(z.attribute(NRT_ZONE_ATTR_MEMORY_CELLS)),
                socket=_count(z.attribute(NRT_ZONE_ATTR_SOCKET), low=0),
            )
        )
    return zones, distances


def _check_align_by_socket(policy: str, zones: list[NumaZone]) -> None:
    """align-by-socket is followed where the kubelet runs with it: not beside single-numa-node
    (the kubelet refuses to start), and with every CPU zone's socket published."""
    where = f"attributes.{NRT_ATTR_CPU_MANAGER_POLICY_OPTIONS}: {ALIGN_BY_SOCKET}"
    if policy == SINGLE_NUMA_NODE:
        raise ValueError(f"{where} with the {SINGLE_NUMA_NODE} policy: the kubelet refuses to start so configured")
    if any(z.socket is None for z in zones if z.capacity.get("cpu", Decimal(0)) > 0):
        raise ValueError(f"{where} without each zone's {NRT_ZONE_ATTR_SOCKET}: its preferred hints cannot be predicted")


def _device_groups(raw: str | None) -> dict[str, tuple[DeviceGroup, ...]]:
    """The NRT's device groups; ValueError (the NRT is unreadable) when malformed: counting the
    devices without them would be wrong in either direction."""
    try:
        return parse_groups(raw or "")
    except ValueError as exc:
        raise ValueError(f"attributes.{NRT_ATTR_DEVICE_GROUPS}: {exc}") from None


def _cpu_options(raw: str | None) -> frozenset[str]:
    """The CPU Manager's options turned on; ValueError for one the predictor does not follow."""
    enabled = set()
    for item in filter(None, (i.strip() for i in (raw or "").split(","))):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or name not in CPU_MANAGER_OPTIONS or value.lower() not in ("true", "false"):
            raise ValueError(
                f"attributes.{NRT_ATTR_CPU_MANAGER_POLICY_OPTIONS}: {item!r} is no option toposched follows "
                f"({', '.join(f'{o}=true|false' for o in CPU_MANAGER_OPTIONS)})"
            )
        if value.lower() == "true":
            enabled.add(name)
    return frozenset(enabled)


def _options(raw: str | None) -> dict[str, str]:
    """The Topology Manager's options, ``name=value`` pairs joined by commas; ValueError for an
    option or value toposched does not know (what it would change cannot be predicted)."""
    options = {}
    for item in filter(None, (i.strip() for i in (raw or "").split(","))):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or name not in TOPOLOGY_MANAGER_OPTIONS:
            raise ValueError(
                f"attributes.{NRT_ATTR_TOPOLOGY_MANAGER_POLICY_OPTIONS}: {item!r} is no option toposched knows "
                f"({', '.join(TOPOLOGY_MANAGER_OPTIONS)})"
            )
        if not TOPOLOGY_MANAGER_OPTIONS[name](value.lower()):
            raise ValueError(f"attributes.{NRT_ATTR_TOPOLOGY_MANAGER_POLICY_OPTIONS}: {name}={value!r} is not valid")
        options[name] = value.lower()
    return options


def _groups(raw: str | None) -> tuple[int, ...]:
    """NUMA masks from ``0-1;2,3``; a malformed group is dropped (the prediction is then looser)."""
    groups = []
    for part in (raw or "").split(";"):
        try:
            ids = [i for piece in part.split(",") if piece.strip() for i in _span(piece)]
        except ValueError:
            continue
        if len(ids) > 1 and all(0 <= i <= 63 for i in ids):
            groups.append(mask(*ids))
    return tuple(groups)


def _count(raw: str | None, low: int = 0) -> int | None:
    """A small count published by the exporter; None when absent or malformed (then unused)."""
    if raw is None or not _DECIMAL.fullmatch(raw) or int(raw) < low:
        return None
    return int(raw)


def _cells(raw: str | None) -> int | None:
    """A NUMA mask from ``0-1`` or ``2``; None when absent or malformed."""
    try:
        ids = [i for piece in (raw or "").split(",") if piece.strip() for i in _span(piece)]
    except ValueError:
        return None
    return mask(*ids) if ids else None


def _span(piece: str) -> range:
    low, _, high = piece.strip().partition("-")
    if not (_DECIMAL.fullmatch(low) and _DECIMAL.fullmatch(high or low)):
        raise ValueError(piece)
    first, last = int(low), int(high or low)
    if not first <= last <= 63:  # a mask has 64 bits; never expand a huge range
        raise ValueError(piece)
    return range(first, last + 1)


def _numa_id(zone: str) -> int | None:
    """``node-3`` -> 3; None for any other name (``node-03``, ``node-²`` or a socket zone)."""
    match = _NUMA_ZONE.fullmatch(zone)
    return int(match.group(1)) if match else None


def _max_numa(raw: str | None) -> int:
    """Valid values are 2..1024 (as upstream); anything else means the kubelet default, 8."""
    if raw is not None and _DECIMAL.fullmatch(raw) and 1 < int(raw) <= MAX_NUMA_NODES:
        return int(raw)
    return 8


def quantities(raw: object, where: str = "resources") -> dict[str, Decimal]:
    """Resource name -> amount; ValueError naming ``where.<resource>`` for a value no machine has."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a map of resource names to quantities")
    out = {}
    for name, value in raw.items():
        if not isinstance(name, str):
            raise ValueError(f"{where}: resource name {name!r} is not a string")
        try:
            out[name] = check_amount(name, parse_quantity(value))
        except ValueError as exc:
            raise ValueError(f"{where}.{name}: {exc}") from None
    return out


@dataclass(frozen=True)
class PodMeta:
    """What placement reads of a pod's metadata."""

    namespace: str = "default"
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def member(self) -> tuple[str, str | None] | None:
        """(AppGroup, workload) of an AppGroup member; None outside AppGroups."""
        return membership(self.labels)


def membership(labels: Mapping[str, object]) -> tuple[str, str | None] | None:
    """(AppGroup, workload) from a pod's labels, a value that is not a string counting as absent;
    None outside AppGroups (no AppGroup label, or an empty one)."""
    group, workload = labels.get(APPGROUP_LABEL), labels.get(WORKLOAD_LABEL)
    if not isinstance(group, str) or not group:
        return None
    return group, workload if isinstance(workload, str) else None


def pod_uid(body: object) -> str:
    """A pod's uid, "" when it has none: read before the pod is parsed, to tell it from the others."""
    meta = body.get("metadata") if isinstance(body, Mapping) else None
    uid = meta.get("uid") if isinstance(meta, Mapping) else None
    return uid if isinstance(uid, str) else ""


def pod_meta(body: object) -> PodMeta:
    """The namespace, labels and annotations of a pod (dict); ValueError naming the field."""
    if not isinstance(body, Mapping):
        raise ValueError("expected a pod (an object)")
    meta = body.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise ValueError("metadata: expected an object")
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise ValueError("metadata.namespace: expected a string")
    maps = {}
    for key in ("labels", "annotations"):
        value = meta.get(key) or {}
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            raise ValueError(f"metadata.{key}: expected a map of strings")
        maps[key] = value
    return PodMeta(namespace, maps["labels"], maps["annotations"])


def parse_pod(body: object) -> tuple[Pod, PodMeta]:
    """A pod object (dict) as placement reads it; ValueError naming the field."""
    meta = pod_meta(body)
    assert isinstance(body, Mapping)
    return pod_from_spec(body.get("spec") or {}), meta


def pod_from_spec(spec: object) -> Pod:
    """A Pod from a core/v1 pod spec (dict), for the extender and the explain command.

    ValueError naming the field (``spec.containers[0].resources.limits.cpu: ...``) when the spec
    is not a pod spec or asks for more than any machine has.
    """
    if not isinstance(spec, Mapping):
        raise ValueError("spec: expected a pod spec (an object)")

    def containers(key: str) -> tuple[Container, ...]:
        raw = spec.get(key)
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise ValueError(f"spec.{key}: expected a list of containers")
        out = []
        for i, c in enumerate(raw):
            where = f"spec.{key}[{i}]"
            if not isinstance(c, Mapping):
                raise ValueError(f"{where}: expected a container (an object)")
            name = c.get("name", "")
            if not isinstance(name, str):
                raise ValueError(f"{where}.name: expected a string")
            resources = c.get("resources") or {}
            if not isinstance(resources, Mapping):
                raise ValueError(f"{where}.resources: expected an object")
            out.append(
                Container(
                    name=name,
                    requests=quantities(resources.get("requests"), f"{where}.resources.requests"),
                    limits=quantities(resources.get("limits"), f"{where}.resources.limits"),
                    sidecar=c.get("restartPolicy") == "Always",
                )
            )
        return tuple(out)

    level = spec.get("resources")
    if level is not None and not isinstance(level, Mapping):
        raise ValueError("spec.resources: expected an object")
    resources = None
    if level:
        resources = Container(
            name="",
            requests=quantities(level.get("requests"), "spec.resources.requests"),
            limits=quantities(level.get("limits"), "spec.resources.limits"),
        )
    return Pod(containers=containers("containers"), init_containers=containers("initContainers"), resources=resources)


def links_of(nt: NetworkTopology, weights_name: str) -> dict[tuple[str, str, str], Link]:
    """Costs of the named weight; NetperfCosts falls back to UserDefined when absent."""
    weights = {w.name: w for w in nt.spec.weights}
    weight = weights.get(weights_name) or (weights.get(WEIGHT_USER_DEFINED) if weights_name == WEIGHT_NETPERF else None)
    links: dict[tuple[str, str, str], Link] = {}
    for topology in weight.topology_list if weight else []:
        for origin in topology.origin_list:
            for cost in origin.cost_list or []:
                links[(topology.topology_key, origin.origin, cost.destination)] = Link(
                    cost=cost.network_cost,
                    capacity=parse_quantity(cost.bandwidth_capacity) if cost.bandwidth_capacity is not None else None,
                    allocated=parse_quantity(cost.bandwidth_allocated)
                    if cost.bandwidth_allocated is not None
                    else Decimal(0),
                )
    return links


def node_location(node: Mapping[str, Any]) -> Location:
    """A Node's region and zone labels; a label that is not a string counts as absent (never raises:
    a garbled allocatable must not also hide where the node is from the pods placed near it)."""
    meta = node.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping):
        return Location(None, None)
    region, zone = labels.get(REGION_LABEL), labels.get(ZONE_LABEL)
    return Location(region if isinstance(region, str) else None, zone if isinstance(zone, str) else None)


def node_allocatable(node: Mapping[str, Any]) -> dict[str, Decimal]:
    """A Node's status.allocatable; ValueError naming the field."""
    status = node.get("status") or {}
    if not isinstance(status, Mapping):
        raise ValueError("status: expected an object")
    return quantities(status.get("allocatable"), "status.allocatable")


def placed_pod(pod: Mapping[str, Any]) -> Placed | None:
    """A bound pod as placement needs it; None when it holds nothing (pending, finished, garbled)."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    status = pod.get("status") or {}
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping) or not isinstance(status, Mapping):
        return None
    node = spec.get("nodeName")
    if not node or not isinstance(node, str) or status.get("phase") in ("Succeeded", "Failed"):
        return None
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        labels = {}
    numa: tuple[int, ...] = ()
    raw = (
        (meta.get("annotations") or {}).get(NUMA_ZONES_ANNOTATION)
        if isinstance(meta.get("annotations"), dict)
        else None
    )
    if raw:
        try:
            numa = tuple(int(z.removeprefix(NRT_ZONE_PREFIX)) for z in json.loads(raw))
        except (ValueError, TypeError, AttributeError):
            numa = ()
        if not all(0 <= n < MAX_NUMA_NODES for n in numa):
            numa = ()
    namespace = meta.get("namespace", "default")
    appgroup, workload = membership(labels) or (None, None)
    return Placed(namespace if isinstance(namespace, str) else "default", node, appgroup, workload, numa)
