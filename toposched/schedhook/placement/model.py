"""What the placement logic knows of a node's NUMA zones and of a pod's requests. Pure data.

A ``NumaZone`` is one NUMA node of a machine as its NRT zone reports it; failure-domain zones
(``topology.kubernetes.io/zone``) are network locations and live in ``placement.network``.
"""

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from toposched.apis.devicegroups import DeviceGroup
from toposched.schedhook.placement.kubelet.topologymanager import NONE

HOST_LEVEL = ("ephemeral-storage", "storage")


def numa_affine(resource: str) -> bool:
    return resource in ("cpu", "memory") or resource.startswith("hugepages-")


@dataclass(frozen=True)
class NumaZone:
    numa: int
    capacity: Mapping[str, Decimal]
    allocatable: Mapping[str, Decimal]
    available: Mapping[str, Decimal]
    free_cores: int | None = None
    """Physical cores all of whose CPUs are free (None: the NRT does not say)."""
    memory_cells: int | None = None
    """The Memory Manager's NUMA group of this zone while it holds assigned memory (a mask; None:
    nothing assigned, or the NRT does not say)."""
    socket: int | None = None
    """The physical package of the zone's CPUs (None: the NRT does not say)."""

    @functools.cached_property
    def floats(self) -> dict[str, dict[str, float]]:
        """The same values as floats, for the fast path (computed once per zone)."""
        return {
            "capacity": {k: float(v) for k, v in self.capacity.items()},
            "allocatable": {k: float(v) for k, v in self.allocatable.items()},
            "available": {k: float(v) for k, v in self.available.items()},
        }


@dataclass(frozen=True)
class NodeTopology:
    name: str
    zones: tuple[NumaZone, ...]
    policy: str = NONE
    scope: str = "container"
    cpu_manager: str | None = None
    """None: the NRT does not say (fall back to the upstream filter)."""
    memory_manager: str | None = None
    node_allocatable: Mapping[str, Decimal] = field(default_factory=dict)
    distances: Mapping[int, Mapping[int, int]] = field(default_factory=dict)
    """NUMA id -> NUMA id -> distance, from the zones' costs."""
    max_numa: int = 8
    """The kubelet's topologyManagerMaxNUMANodes (attribute), for LeastNUMANodes."""
    prefer_closest: bool = False
    """The Topology Manager's prefer-closest-numa-nodes option (from topologyManagerPolicyOptions)."""
    memory_groups: tuple[int, ...] = ()
    """NUMA masks the Static Memory Manager has grouped for multi-NUMA allocations."""
    threads_per_core: int | None = None
    """CPUs per physical core when all cores have the same number (None: unknown)."""
    cpu_options: frozenset[str] = frozenset()
    """The CPU Manager's options turned on (cpuManagerPolicyOptions)."""
    device_groups: Mapping[str, tuple[DeviceGroup, ...]] = field(default_factory=dict)
    """Per device resource, the devices the zones cannot show alone: attached to several zones
    (each of which counts them) or without topology (none counts them)."""

    @property
    def numa_ids(self) -> list[int]:
        return [z.numa for z in self.zones]

    @functools.cached_property
    def reported(self) -> frozenset[str]:
        """Resources some zone reports (a device resource no zone reports is host-level)."""
        return frozenset(r for z in self.zones for r in z.allocatable)

    @functools.cached_property
    def vectors(self) -> dict[tuple[str, str], Any]:
        """(capacity, allocatable or available; resource) -> per-zone amounts in thousandths, filled by
        the predictor as it reads them (the node never changes, many pods read it)."""
        return {}

    @property
    def knows_managers(self) -> bool:
        return self.cpu_manager is not None and self.memory_manager is not None


@dataclass(frozen=True)
class Container:
    name: str
    requests: Mapping[str, Decimal]
    limits: Mapping[str, Decimal] = field(default_factory=dict)
    sidecar: bool = False
    """A restartable init container: runs alongside the app containers."""

    @functools.cached_property
    def request(self) -> dict[str, Decimal]:
        """Requests, defaulting to limits as the apiserver does."""
        return {**dict(self.limits), **dict(self.requests)}


@dataclass(frozen=True)
class Pod:
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...] = ()
    resources: Container | None = None
    """Pod-level resources (``spec.resources``; its name is ""), None when the spec has none."""

    @functools.cached_property
    def shape(self) -> tuple[object, ...]:
        """Everything of the pod a prediction reads, hashable: equal shapes get equal answers."""

        def of(c: Container) -> tuple[object, ...]:
            return c.name, tuple(sorted(c.requests.items())), tuple(sorted(c.limits.items())), c.sidecar

        level = of(self.resources) if self.resources is not None else None
        return tuple(of(c) for c in self.init_containers), tuple(of(c) for c in self.containers), level

    @functools.cached_property
    def pod_level(self) -> bool:
        """Are pod-level resources set (CPU, memory or hugepages in ``spec.resources``)? The kubelet's
        CPU and Memory Managers then leave the pod alone (1.36, without the alpha
        PodLevelResourceManagers gate): no exclusive CPUs, no pinned memory, no hints from them."""
        level = self.resources
        return level is not None and any(_at_pod_level(r) for r in (*level.requests, *level.limits))

    @functools.cached_property
    def qos(self) -> str:
        """The pod's QoS class as Kubernetes computes it (zero amounts count as unset); from the
        pod-level resources alone when the spec has them."""
        if self.resources is not None:
            return _pod_level_qos(self.resources)
        everything = [*self.init_containers, *self.containers]

        def positive(values: Mapping[str, Decimal], resource: str) -> Decimal | None:
            amount = values.get(resource)
            return amount if amount is not None and amount > 0 else None

        if all(
            positive(c.requests, r) is None and positive(c.limits, r) is None
            for c in everything
            for r in ("cpu", "memory")
        ):
            return "BestEffort"
        for c in everything:
            for r in ("cpu", "memory"):
                limit = positive(c.limits, r)
                request = c.requests.get(r, limit)  # the apiserver defaults an absent request to the limit
                if limit is None or request != limit:
                    return "Burstable"
        return "Guaranteed"

    def effective(self) -> dict[str, Decimal]:
        """The pod-level request, as the apiserver and the scheduler count it: the larger of the sum
        over app and sidecar containers and, for each regular init container, its request plus the
        sidecars started before it; a resource set at pod level counts as set there."""
        found = self._containers_effective()
        if self.pod_level and self.resources is not None:
            found.update((r, q) for r, q in self.resources.request.items() if _at_pod_level(r))
        return found

    def _containers_effective(self) -> dict[str, Decimal]:
        total: dict[str, Decimal] = {}
        for c in self.containers:
            for r, q in container_request(c).items():
                total[r] = total.get(r, Decimal(0)) + q
        sidecars: dict[str, Decimal] = {}
        peak: dict[str, Decimal] = {}
        for c in self.init_containers:
            request = container_request(c)
            if c.sidecar:
                for r, q in request.items():
                    total[r] = total.get(r, Decimal(0)) + q
                    sidecars[r] = sidecars.get(r, Decimal(0)) + q
                running = dict(sidecars)
            else:
                running = {r: request.get(r, Decimal(0)) + sidecars.get(r, Decimal(0)) for r in {**request, **sidecars}}
            for r, q in running.items():
                peak[r] = max(peak.get(r, Decimal(0)), q)
        return {r: max(total.get(r, Decimal(0)), peak.get(r, Decimal(0))) for r in {**total, **peak}}


def _at_pod_level(resource: str) -> bool:
    """A resource pod-level resources may set (the kubelet's IsSupportedPodLevelResource)."""
    return resource in ("cpu", "memory") or resource.startswith("hugepages-")


def _pod_level_qos(level: Container) -> str:
    """ComputePodQOS from pod-level resources: Guaranteed when CPU and memory limits are set and
    every request equals its limit."""
    requests = {r: q for r, q in level.request.items() if q > 0 and r in ("cpu", "memory")}
    limits = {r: q for r, q in level.limits.items() if q > 0 and r in ("cpu", "memory")}
    if not requests and not limits:
        return "BestEffort"
    if {"cpu", "memory"} <= set(limits) and requests == limits:
        return "Guaranteed"
    return "Burstable"


def container_request(c: Container) -> dict[str, Decimal]:
    """Requests, defaulting to limits as the apiserver does."""
    return c.request


@dataclass(frozen=True)
class Verdict:
    admit: bool
    reason: str = ""
    numa: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Container (or ``pod`` in pod scope) -> NUMA nodes the kubelet is predicted to use."""


@dataclass(frozen=True)
class Placed:
    """A bound pod as the placement logic needs it."""

    namespace: str
    node: str
    appgroup: str | None = None
    workload: str | None = None
    numa: tuple[int, ...] = ()
