"""What a node's NRT tells each of the kubelet's resource managers, derived once per node. Pure.

The predictor (``state.NodeState``: one node, every mask) and the columnar table
(``placement.columnar``: thousands of nodes, single zones) both read a node through these facts,
so each is written once: which zones have CPUs, the zones' sockets and whole cores, the Memory
Manager's NUMA groups and the zones they veto, and per device resource where its devices are and
whether the device manager aligns it at all. A node's facts are kept with the node (it never
changes, and many pods are predicted on it).
"""

import functools
from collections.abc import Mapping, Sequence, Set
from decimal import Decimal
from typing import NamedTuple

import numpy as np

from toposched.schedhook.placement.kubelet import hints
from toposched.schedhook.placement.kubelet.claims import CPU, numa_memory
from toposched.schedhook.placement.kubelet.hints import Bools, Ints, Masks, milli
from toposched.schedhook.placement.kubelet.topologymanager import Hint, bits, count, mask
from toposched.schedhook.placement.model import NodeTopology


def memory_groups(node: NodeTopology) -> dict[int, int]:
    """The Memory Manager's NUMA groups the NRT shows: zone -> the multi-NUMA group its pinned
    memory belongs to (from the zones' own state when published, else the node's groups)."""
    cells = {z.numa: z.memory_cells for z in node.zones if z.memory_cells is not None}
    if cells:
        return {n: m for n, m in cells.items() if count(m) > 1}
    return {n: m for m in node.memory_groups for n in bits(m)}


def pinned_zones(node: NodeTopology, groups: Mapping[int, int]) -> set[int]:
    """The zones holding pinned memory of some container: in a group, with Memory Manager state,
    or with less memory available than allocatable."""
    return {
        z.numa
        for z in node.zones
        if z.memory_cells is not None
        or z.numa in groups
        or any(r in z.available and z.available[r] < q for r, q in z.allocatable.items() if numa_memory(r))
    }


def may_pin(m: int, groups: Mapping[int, int], assigned: Set[int]) -> bool:
    """Do the NUMA groups of earlier allocations let memory be pinned to mask ``m``? A single zone
    must not be in a group; a wider mask must be the group of each assigned zone in it."""
    if count(m) == 1:
        return may_pin_alone(bits(m)[0], groups)
    return not any(n in assigned and groups.get(n) != m for n in bits(m))


def may_pin_alone(zone: int, groups: Mapping[int, int]) -> bool:
    """May memory be pinned to ``zone`` alone (the only masks single-numa-node keeps)?"""
    return zone not in groups


class DeviceFacts(NamedTuple):
    """One device resource's devices on a node, grouped by the NUMA zones they are attached to:
    one group per zone for the devices attached to it alone, one per multi-zone set and one for
    devices without topology (``numa == ()``)."""

    numa: tuple[tuple[int, ...], ...]
    allocatable: tuple[int, ...]
    free: tuple[int, ...]
    aligned: bool
    """Some device has topology: a zone reports the resource, or a group of several zones has it
    (the device manager then aligns the resource at all)."""
    listed: bool
    """The NRT lists the resource, in a zone or as a device group: the device manager's devices
    are known (else the resource is host-level, and kube-scheduler checks it)."""
    bearing: tuple[int, ...]
    """The zones that have devices of the resource (its hints' masks run over them)."""
    reach: tuple[tuple[int, int], ...]
    """Per zone (by NUMA id), the devices and the free devices a mask of that zone alone reaches:
    its own and those it shares with other zones."""

    @property
    def loose(self) -> int:
        """Free devices of a resource the device manager does not align (none has topology): all
        its allocation can count on; -1 when the resource is aligned or not listed."""
        return sum(self.free) if self.listed and not self.aligned else -1


class NodeFacts:
    """One node as its resource managers see it before any pod of this prediction takes anything.
    Each fact is derived when first read: the columnar table reads a few of them for every node,
    the predictor all of them for the nodes it is asked about."""

    def __init__(self, node: NodeTopology) -> None:
        self.node = node
        self.ids = tuple(sorted(node.numa_ids))
        self.position = {n: i for i, n in enumerate(self.ids)}
        capacity = {z.numa: z.capacity.get(CPU, Decimal(0)) for z in node.zones}
        self.cpu_capacity = {n: int(capacity[n]) for n in self.ids if capacity[n] > 0}
        """CPU zone -> its CPUs (reserved ones included), as the kubelet's topology counts them;
        the CPU manager knows only the NUMA nodes that have CPUs."""
        self.cpu_ids = tuple(self.cpu_capacity)
        self.groups = memory_groups(node)
        """Zone -> the Memory Manager's multi-NUMA group its pinned memory belongs to."""
        self.reported = frozenset(r for z in node.zones for r in z.allocatable)
        """Resources some zone lists."""
        self._vectors: dict[tuple[str, str], Ints] = {}
        self._devices: dict[str, DeviceFacts] = {}

    @functools.cached_property
    def socket(self) -> dict[int, int]:
        """CPU zone -> its socket, where the NRT says."""
        return {z.numa: z.socket for z in self.node.zones if z.numa in self.cpu_capacity and z.socket is not None}

    @functools.cached_property
    def sockets_first(self) -> bool:
        """Fewer sockets than NUMA nodes (sub-NUMA clustering): the packed allocator goes by socket first."""
        return len(self.socket) == len(self.cpu_ids) and len(set(self.socket.values())) < len(self.socket)

    @functools.cached_property
    def per_socket(self) -> int:
        """The machine's CPUs over its sockets (the kubelet's CPUsPerSocket, also its CPUs per
        uncore cache when a cache is a socket)."""
        return sum(self.cpu_capacity.values()) // max(1, len(set(self.socket.values())))

    @functools.cached_property
    def threads(self) -> int:
        """CPUs per core, 0 when whole cores are unknown (CPUs are then counted singly)."""
        if any(z.free_cores is None for z in self.node.zones if z.numa in self.cpu_capacity):
            return 0
        return self.node.threads_per_core or 0

    @functools.cached_property
    def free_cores(self) -> dict[int, int]:
        """Zone -> its whole free cores: never more than the zone's free CPUs make (an NRT can say anything)."""
        threads = self.threads or 1
        return {
            z.numa: min(z.free_cores or 0, max(int(z.available.get(CPU, Decimal(0))), 0) // threads)
            for z in self.node.zones
        }

    @functools.cached_property
    def assigned(self) -> frozenset[int]:
        return frozenset(pinned_zones(self.node, self.groups))

    def vector(self, which: str, resource: str) -> Ints:
        """[zone]: the zones' ``which`` (capacity, allocatable or available) of the resource in
        thousandths, zones by NUMA id."""
        key = (which, resource)
        found = self._vectors.get(key)
        if found is None:
            by_id = {z.numa: getattr(z, which) for z in self.node.zones}
            values = [milli(by_id[n].get(resource, Decimal(0))) for n in self.ids]
            found = self._vectors[key] = np.array(values, dtype=np.int64)
        return found

    def devices(self, resource: str) -> DeviceFacts:
        found = self._devices.get(resource)
        if found is None:
            found = self._devices[resource] = self._read_devices(resource)
        return found

    def _read_devices(self, resource: str) -> DeviceFacts:
        node, position = self.node, self.position
        shared = node.device_groups.get(resource, ())
        numa: list[tuple[int, ...]] = []
        allocatable: list[int] = []
        free: list[int] = []
        reach = [[0, 0] for _ in self.ids]
        """Per zone, the devices (free ones) a mask of that zone alone reaches."""
        for zone in node.zones:  # the zone's own figures count its shared devices too
            held, left = int(zone.allocatable.get(resource, 0)), int(zone.available.get(resource, 0))
            for g in shared:
                if zone.numa in g.numa:
                    held, left = held - g.allocatable, left - g.available
            held, left = max(0, held), max(0, left)
            numa.append((zone.numa,))
            allocatable.append(held)
            free.append(left)
            reach[position[zone.numa]] = [held, left]
        for g in shared:
            numa.append(g.numa)
            allocatable.append(g.allocatable)
            free.append(g.available)
            for n in g.numa:
                if n in position:  # a group may name a zone the NRT does not have
                    reach[position[n]][0] += g.allocatable
                    reach[position[n]][1] += g.available
        return DeviceFacts(
            numa=tuple(numa),
            allocatable=tuple(allocatable),
            free=tuple(free),
            aligned=resource in self.reported or any(g.numa for g in shared),
            listed=resource in self.reported or resource in node.device_groups,
            bearing=tuple(n for n, (held, _) in zip(self.ids, reach, strict=True) if held),
            reach=tuple((held, left) for held, left in reach),
        )

    # -- masks and hints over this node's zones ------------------------------------------------------

    def masks(self, ids: Sequence[int], singles: bool = False) -> Masks:
        """The masks hints are looked for in: every mask over ``ids``, or (``singles``) only the
        single zones, whose preferences are exact too."""
        if singles:
            return hints.single_zones(len(self.ids))
        return hints.every_mask(tuple(self.position[n] for n in ids), len(self.ids))

    def id_masks(self, masks: Masks) -> tuple[int, ...]:
        """Each mask of ``masks`` (over zone positions) as a mask over the NUMA ids."""
        return _id_masks(self.ids, masks)

    def hints(self, masks: Masks, fits: Bools, preferred: Bools) -> list[Hint]:
        as_ids = self.id_masks(masks)
        return [Hint(as_ids[i], bool(preferred[i])) for i in np.flatnonzero(fits).tolist()]


def facts_of(node: NodeTopology) -> NodeFacts:
    """The node's facts, derived on first use and kept with the node."""
    found = node.memo.get("facts")
    if not isinstance(found, NodeFacts):
        found = node.memo["facts"] = NodeFacts(node)
    return found


@functools.cache
def _id_masks(ids: tuple[int, ...], masks: Masks) -> tuple[int, ...]:
    return tuple(mask(*(ids[p] for p in m)) for m in masks.positions)
