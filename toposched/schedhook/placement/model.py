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
from toposched.apis.kubelet import CONTAINER_SCOPE, NONE

HOST_LEVEL = ("ephemeral-storage", "storage")


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


@dataclass(frozen=True)
class NodeTopology:
    name: str
    zones: tuple[NumaZone, ...]
    policy: str = NONE
    scope: str = CONTAINER_SCOPE
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
    memo: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)
    """What the kubelet's rules derive from the node (``kubelet.facts``), kept with it: the node
    never changes, and many pods are predicted on it."""

    @property
    def numa_ids(self) -> list[int]:
        return [z.numa for z in self.zones]

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
    memo: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)
    """What the kubelet's rules derive from the pod (``kubelet.claims``), kept with it: the
    extender predicts one pod on thousands of nodes."""

    @functools.cached_property
    def shape(self) -> tuple[object, ...]:
        """Everything of the pod a prediction reads, hashable: equal shapes get equal answers."""

        def of(c: Container) -> tuple[object, ...]:
            return c.name, tuple(sorted(c.requests.items())), tuple(sorted(c.limits.items())), c.sidecar

        level = of(self.resources) if self.resources is not None else None
        return tuple(of(c) for c in self.init_containers), tuple(of(c) for c in self.containers), level


POD = "pod"
"""A verdict's key for the whole pod (the pod scope), where it has container names otherwise."""


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
