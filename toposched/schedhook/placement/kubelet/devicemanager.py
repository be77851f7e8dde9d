"""The device manager for one pod on one node: its topology hints and its allocations. Pure.

Devices are counted by the NUMA zones they are attached to (``facts.DeviceFacts``): a device on
several zones counts for every mask touching one of them; devices without topology are reached
by no mask, yet an allocation counts them like any other.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from toposched.schedhook.placement.kubelet import hints
from toposched.schedhook.placement.kubelet.allocation import RejectedError
from toposched.schedhook.placement.kubelet.claims import device
from toposched.schedhook.placement.kubelet.facts import DeviceFacts, NodeFacts
from toposched.schedhook.placement.kubelet.topologymanager import Hint, bits


def not_enough(resource: str, amount: Decimal | int, free: int) -> str:
    """Why the device manager's allocation fails (every prediction of it says it so)."""
    return f"not enough {resource}: {amount} requested, {free} free"


@dataclass
class DeviceGroups:
    """One device resource's devices as this pod's containers leave them (``DeviceFacts`` at first)."""

    facts: DeviceFacts
    free: list[int]
    reusable: list[int]
    """Devices of this pod's regular init containers that its later containers reuse first."""
    scattered: set[int] = field(default_factory=set)
    """Zones the devices a regular init container of this pod got beyond its aligned ones may
    be on: the device manager picks those at random."""

    @property
    def numa(self) -> tuple[tuple[int, ...], ...]:
        return self.facts.numa

    def take_reusable(self, wanted: int) -> list[int]:
        taken = [0] * len(self.numa)
        for i, k in enumerate(self.reusable):
            use = min(k, wanted - sum(taken))
            taken[i] += use
            self.reusable[i] -= use
        return taken

    def take(self, order: Sequence[int], wanted: int, taken: list[int]) -> int:
        """Take up to ``wanted`` free devices from the groups in ``order``; returns how many are missing."""
        for i in order:
            use = min(self.free[i], wanted)
            self.free[i] -= use
            taken[i] += use
            wanted -= use
        return wanted


class DeviceManager:
    def __init__(self, facts: NodeFacts) -> None:
        self.facts = facts
        self._groups: dict[str, DeviceGroups] = {}

    def groups(self, resource: str) -> DeviceGroups:
        """The node's devices of ``resource`` by the zones they are attached to (this pod's view)."""
        found = self._groups.get(resource)
        if found is None:
            known = self.facts.devices(resource)
            found = self._groups[resource] = DeviceGroups(known, list(known.free), [0] * len(known.numa))
        return found

    def next_pod(self) -> None:
        """The devices the admitted pod holds stay taken; none is the next pod's to reuse."""
        for groups in self._groups.values():
            groups.reusable = [0] * len(groups.reusable)
            groups.scattered = set()

    def hints(self, resource: str, amount: Decimal, singles: bool = False) -> list[Hint] | None:
        """The device manager's hints: None when no device of the resource has topology, [] when
        fewer are free (with the pod's reusable ones) than asked for; masks over the zones that
        have devices of the resource."""
        groups = self.groups(resource)
        known, ids = groups.facts, self.facts.ids
        if not known.aligned:
            return None  # no topology for this resource: host-level
        wanted = int(amount)
        if sum(groups.free) + sum(groups.reusable) < wanted:
            return []
        masks = self.facts.masks(known.bearing or ids, singles)
        attached = np.array([[n in numa for n in ids] for numa in known.numa], dtype=np.bool_)
        reached = hints.reach(masks, attached.reshape(len(known.numa), len(ids)))
        topology = np.array([bool(numa) for numa in known.numa], dtype=np.bool_)
        reusable = np.array(groups.reusable, dtype=np.int64) * topology
        inside = None
        if reusable.any():  # every reusable device must be attached to a zone of the mask
            inside = np.asarray((reached[:, reusable > 0] > 0).all(axis=1), dtype=np.bool_)
        fits, preferred = hints.device_hints(
            masks,
            reached @ (1000 * np.array(known.allocatable, dtype=np.int64)),
            reached @ (1000 * (np.array(groups.free, dtype=np.int64) + reusable)),
            1000 * wanted,
            known=len(known.bearing or ids),
            inside=inside,
        )
        return self.facts.hints(masks, fits, preferred)

    def take(self, request: Mapping[str, Decimal], affinity: int | None, init: bool) -> set[int]:
        """Allocate the container's devices as the device manager does: its pod's reusable ones
        first, then those attached to the affinity's zones; only when those are too few all of
        them and then others. Returns the zones devices may come from outside the affinity: the
        reused ones' zones, and every zone the manager might pick from when it spills (it picks
        among equals at random). Raises RejectedError where the manager's allocation fails: fewer
        devices free than asked for."""
        spill: set[int] = set()
        within = set(bits(affinity)) if affinity is not None else set()
        for resource, amount in request.items():
            if not device(resource) or amount <= 0 or not self.facts.devices(resource).listed:
                continue  # host-level: the node as a whole has them or not (kube-scheduler checks)
            spill |= self._take(self.groups(resource), resource, amount, within, init)
        return spill

    def _take(self, groups: DeviceGroups, resource: str, amount: Decimal, within: set[int], init: bool) -> set[int]:
        numa = groups.numa
        spill: set[int] = set()
        held = {n for i, k in enumerate(groups.reusable) if k for n in numa[i]}
        plenty = sum(groups.reusable) > int(amount)
        taken = groups.take_reusable(int(amount))
        # The pod's reusable devices come first wherever they are, the affinity or not; the
        # manager picks among them, and an init container's spilled ones were picked, at
        # random (Go's map order): any of their zones may be this container's.
        spill |= {n for i, k in enumerate(taken) if k for n in numa[i] if not within & set(numa[i])}
        if any(taken):
            spill |= groups.scattered | (held if plenty else set())
        needed = int(amount) - sum(taken)
        if needed:
            aligned = [i for i, zones in enumerate(numa) if groups.facts.aligned and within & set(zones)]
            rest = [i for i in range(len(numa)) if i not in aligned]
            # Shared devices (on several zones) first: the view later containers get is then
            # the one with fewer free devices elsewhere, never more.
            aligned.sort(key=lambda i: (-len(numa[i]), numa[i]))
            if needed > sum(groups.free):  # the device manager's allocation fails
                raise RejectedError(not_enough(resource, amount, sum(groups.free)))
            more = groups.take(aligned, needed, taken)
            if more:
                possible = {n for i in rest if groups.free[i] for n in numa[i]}
                spill |= possible
                groups.take(rest, more, taken)
                if init:
                    groups.scattered |= possible
        if init:  # a regular init container's devices wait for the app containers to reuse them
            for i, k in enumerate(taken):
                groups.reusable[i] += k
        return spill
