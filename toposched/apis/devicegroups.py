"""Devices by the NUMA zones they are attached to, as the NRT's device-groups attribute carries them. Pure.

An NRT zone lists, per device resource, the devices attached to it: a device attached to two
zones (a NIC between sockets) counts in both, a device without topology in none. That is what a
scheduler needs to ask "does this zone hold two free NICs", but not how many devices a set of zones
holds together, which is what the kubelet counts. The attribute ``toposched.io/device-groups``
therefore lists the devices the zones alone cannot show: per resource and NUMA set, how many
healthy devices and how many of them are free.

    example.com/nic@0,1=2/1;example.com/fpga@-=1/1

Two NICs attached to zones 0 and 1 (one free), one FPGA without topology (free). Devices attached
to one zone are the zones' own figures and never appear here.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NO_TOPOLOGY = "-"


@dataclass(frozen=True)
class DeviceGroup:
    numa: tuple[int, ...]
    """The NUMA zones the devices are attached to, sorted; () when their plugin gave no topology."""
    allocatable: int
    """Healthy devices."""
    available: int
    """Healthy devices not allocated to any container."""


def format_groups(groups: Mapping[str, Sequence[DeviceGroup]]) -> str:
    """The attribute value, resources and NUMA sets in a stable order."""
    parts = []
    for resource in sorted(groups):
        for g in sorted(groups[resource], key=lambda g: (len(g.numa) == 0, g.numa)):
            numa = ",".join(str(n) for n in g.numa) or NO_TOPOLOGY
            parts.append(f"{resource}@{numa}={g.allocatable}/{g.available}")
    return ";".join(parts)


def parse_groups(raw: str) -> dict[str, tuple[DeviceGroup, ...]]:
    """Resource -> its groups; ValueError naming the part that is not ``resource@zones=n/m``."""
    out: dict[str, list[DeviceGroup]] = {}
    for part in filter(None, (p.strip() for p in raw.split(";"))):
        resource, at, rest = part.partition("@")
        numa, eq, counts = rest.partition("=")
        allocatable, slash, available = counts.partition("/")
        try:
            if not (at and eq and slash and resource):
                raise ValueError
            zones = () if numa == NO_TOPOLOGY else tuple(sorted({int(n) for n in numa.split(",")}))
            group = DeviceGroup(zones, int(allocatable), int(available))
        except ValueError:
            raise ValueError(f"device group {part!r}: expected resource@zones=allocatable/available") from None
        if any(n < 0 for n in zones) or not 0 <= group.available <= group.allocatable:
            raise ValueError(f"device group {part!r}: zones and counts must be whole numbers, available <= allocatable")
        out.setdefault(resource, []).append(group)
    return {r: tuple(gs) for r, gs in out.items()}
