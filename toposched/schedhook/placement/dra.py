"""DRA devices beside the kubelet's pinned CPUs. Pure.

kube-scheduler's allocator picks a pod's DRA devices (first fit, in a fixed order); the kubelet
pins its CPUs without looking at them. This module says which ResourceClaims a pod asks for,
where each device picked lies (``DeviceZones``, from the ResourceSlices), and whether the picks
lie on the NUMA zones predicted for the pod's pinned CPUs (``judge``), in the words the filter,
the bind and ``toposched explain`` all use. A device whose zone is not known is *unknown*, never
aligned.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from pydantic import ValidationError

from toposched.apis.kubelet import RESTRICTED, SINGLE_NUMA_NODE, STATIC_CPU
from toposched.apis.resourceslice import DeviceAttribute, DeviceNuma, device_numa
from toposched.schedhook.placement.kubelet.claims import guaranteed_cpus
from toposched.schedhook.placement.model import NodeTopology, Pod

STRICT: Final = "strict"
"""A node whose picked devices lie off the CPUs' zones fails the pod."""
PREFER: Final = "prefer"
"""Such a node passes with the lowest score."""
OFF: Final = "off"
AUTO: Final = "auto"
"""The cluster default: strict on nodes under single-numa-node or restricted, prefer elsewhere."""
MODES: Final = (STRICT, PREFER, OFF)

ALIGNED: Final = "aligned"
MISALIGNED: Final = "misaligned"
UNKNOWN: Final = "unknown"
UNPINNED: Final = "unpinned"
"""The pod holds no pinned CPUs: its CPUs may run on every zone, nothing to align with."""


@dataclass(frozen=True)
class ClaimRef:
    """One entry of ``spec.resourceClaims``: the claim object it names, once it exists."""

    name: str
    """The pod's name for it."""
    claim: str | None
    """The ResourceClaim's name (None: made from a template and not created yet)."""


def pod_claims(pod: Mapping[str, Any]) -> list[ClaimRef]:
    """The pod's ResourceClaims in spec order (the allocator's order): named ones directly, those
    from a template by the name the resourceclaim controller recorded in the pod's status."""
    spec = pod.get("spec") or {}
    made = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
        if isinstance(s, dict)
    }
    refs = []
    for entry in spec.get("resourceClaims") or ():
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        name = entry["name"]
        claim = entry.get("resourceClaimName") or made.get(name)
        refs.append(ClaimRef(name, claim if isinstance(claim, str) and claim else None))
    return refs


def mode_of(annotation: str | None, default: str, node_policy: str) -> str:
    """The alignment a node applies to a pod: the pod's annotation, else the cluster's default
    (``auto`` resolved by the node's Topology Manager policy). The annotation is checked by
    ``check_mode`` first."""
    chosen = annotation or default
    if chosen == AUTO:
        return STRICT if node_policy in (SINGLE_NUMA_NODE, RESTRICTED) else PREFER
    return chosen


def check_mode(annotation: str | None) -> str | None:
    """Why the pod's alignment annotation is not one we take, else None."""
    if annotation is None or annotation in MODES:
        return None
    return f"{annotation!r} is not one of {', '.join(MODES)}"


class Pick(NamedTuple):
    """A device the allocator picks for one request of one claim (a tuple: thousands are made per pod)."""

    claim: str
    """namespace/name of the ResourceClaim."""
    request: str
    driver: str
    pool: str
    device: str


class DeviceZones:
    """Where every published device is, slice by slice (a slice's devices are read when it changes)."""

    def __init__(self) -> None:
        self._by_slice: dict[str, dict[tuple[str, str, str], DeviceNuma]] = {}
        self._where: dict[tuple[str, str, str], DeviceNuma] | None = {}
        self.generation = 0
        """Bumped by every change: a verdict of an earlier generation may be wrong."""

    def put(self, key: str, slice_: Mapping[str, Any]) -> None:
        self._by_slice[key] = slice_devices(slice_)
        self._changed()

    def delete(self, key: str) -> None:
        if self._by_slice.pop(key, None) is not None:
            self._changed()

    def clear(self) -> None:
        self._by_slice = {}
        self._changed()

    def _changed(self) -> None:
        self._where = None
        self.generation += 1

    def in_pool(self, driver: str, pool: str) -> list[tuple[str, DeviceNuma]]:
        """The devices of a pool, with where each is."""
        return [
            (device, where)
            for devices in self._by_slice.values()
            for (d, p, device), where in devices.items()
            if d == driver and p == pool
        ]

    def of(self, driver: str, pool: str, device: str) -> DeviceNuma | None:
        """The device's zones; None when no slice publishes it."""
        if self._where is None:
            self._where = {k: v for devices in self._by_slice.values() for k, v in devices.items()}
        return self._where.get((driver, pool, device))


def slice_devices(slice_: Mapping[str, Any]) -> dict[tuple[str, str, str], DeviceNuma]:
    """Each device of a ResourceSlice (as the apiserver sent it) and its zones. A device whose
    attributes cannot be read is unknown, with why; the others are kept."""
    spec = slice_.get("spec") or {}
    driver = str(spec.get("driver") or "")
    pool = str((spec.get("pool") or {}).get("name") or "")
    found: dict[tuple[str, str, str], DeviceNuma] = {}
    for device in spec.get("devices") or ():
        if not isinstance(device, dict) or not isinstance(device.get("name"), str):
            continue
        try:
            attributes = {k: DeviceAttribute.model_validate(v) for k, v in (device.get("attributes") or {}).items()}
            found[(driver, pool, device["name"])] = device_numa(driver, attributes)
        except (ValidationError, AttributeError, TypeError) as exc:
            found[(driver, pool, device["name"])] = DeviceNuma(None, f"attributes not readable: {_first(exc)}")
    return found


def _first(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        return f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"
    return str(exc)


def pins_cpus(pod: Pod) -> bool:
    """Would the static CPU Manager give the pod exclusive CPUs?"""
    return any(guaranteed_cpus(pod, c) for c in (*pod.init_containers, *pod.containers))


def cpu_zones(pins: bool, nrt: NodeTopology | None, predicted: Sequence[int]) -> list[int] | None:
    """The zones the kubelet pins the pod's CPUs on (``pins``: ``pins_cpus``): the zones predicted
    for it where the static CPU Manager gives it exclusive CPUs, none where it gives none; None when
    that is not known (no NRT, or no zones predicted)."""
    if nrt is None or nrt.cpu_manager is None:
        return None
    if nrt.cpu_manager != STATIC_CPU or not pins:
        return []
    return list(predicted) or None


@dataclass(frozen=True)
class Alignment:
    verdict: str
    """aligned, misaligned, unknown or unpinned."""
    reason: str = ""


def judge(picks: Sequence[Pick], zones: DeviceZones, cpu_zones: Sequence[int] | None) -> Alignment:
    """Do the picked devices lie on the NUMA zones of the pod's pinned CPUs? ``cpu_zones``: where
    the kubelet is predicted to pin them, empty when it pins none, None when that is not known."""
    verdict = judge_devices([(p.driver, p.pool, p.device) for p in picks], zones, cpu_zones)
    return Alignment(verdict.verdict, verdict.reason(lambda at: describe(picks[at])))


class DeviceVerdict(NamedTuple):
    """``judge_devices``' answer: the verdict, the device deciding it (-1: none) and what is said of it."""

    verdict: str
    at: int = -1
    detail: str = ""

    def reason(self, named: Callable[[int], str]) -> str:
        """The reason, the deciding device named by ``named`` (its position)."""
        return f"{named(self.at)}{self.detail}" if self.at >= 0 else self.detail


def judge_devices(
    devices: Sequence[tuple[str, str, str]], zones: DeviceZones, cpu_zones: Sequence[int] | None
) -> DeviceVerdict:
    """``judge`` of (driver, pool, device) triples, without naming claims (the extender keeps it per
    node: a workload's pods differ only by their claims' names). A misaligned device decides; else
    an unknown one; a device near several zones is aligned when one of them is a CPU zone."""
    if cpu_zones is not None and not cpu_zones:
        return DeviceVerdict(UNPINNED)
    unknown = DeviceVerdict(ALIGNED)
    cpus = set(cpu_zones or ())
    for at, (driver, pool, device) in enumerate(devices):
        where = zones.of(driver, pool, device)
        if where is None:
            found = DeviceVerdict(UNKNOWN, at, ": published by no ResourceSlice seen")
        elif where.zones is None:
            found = DeviceVerdict(UNKNOWN, at, f": NUMA node not known ({where.why})")
        elif cpu_zones is None:
            found = DeviceVerdict(UNKNOWN, at, f" on NUMA {_numa(where.zones)}, CPU zones not predicted")
        elif not where.zones & cpus:
            return DeviceVerdict(MISALIGNED, at, f" on NUMA {_numa(where.zones)}, CPUs would be on NUMA {_numa(cpus)}")
        else:
            continue
        if unknown.verdict == ALIGNED:
            unknown = found
    return unknown


def describe(pick: Pick) -> str:
    return f"{pick.device} of claim {pick.claim}"


def _numa(ids: Iterable[int]) -> str:
    return ",".join(str(n) for n in sorted(ids))


def allocation_picks(claim: Mapping[str, Any]) -> list[Pick] | None:
    """The devices a claim's ``status.allocation`` holds; None when it is not allocated."""
    meta = claim.get("metadata") or {}
    allocation = (claim.get("status") or {}).get("allocation")
    if not isinstance(allocation, dict):
        return None
    key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    results = (allocation.get("devices") or {}).get("results") or ()
    return [
        Pick(key, str(r.get("request", "")), str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))
        for r in results
        if isinstance(r, dict)
    ]


def allocated_nodes(claim: Mapping[str, Any]) -> frozenset[str] | None:
    """The nodes an allocated claim can be used on, where its ``status.allocation.nodeSelector``
    names them (``metadata.name In``, as the allocator writes it for node-local devices); None when
    it names no node (devices of every node, or a selector by labels, not followed here)."""
    allocation = (claim.get("status") or {}).get("allocation")
    selector = allocation.get("nodeSelector") if isinstance(allocation, dict) else None
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, dict) else None
    if not isinstance(terms, list) or not terms:
        return None
    names: set[str] = set()
    for term in terms:
        fields = term.get("matchFields") if isinstance(term, dict) else None
        if not isinstance(fields, list) or len(fields) != 1 or term.get("matchExpressions"):
            return None
        field = fields[0] if isinstance(fields[0], dict) else {}
        if field.get("key") != "metadata.name" or field.get("operator") != "In":
            return None
        names.update(str(v) for v in field.get("values") or ())
    return frozenset(names)
