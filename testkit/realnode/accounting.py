"""A real node's per-NUMA-zone figures as its kubelet keeps them, next to what an NRT publishes.

The kubelet's own accounting comes from its checkpoints, not from PodResources (which is what
the exporter reads), so a comparison checks the exporter against an independent source:

* ``cpu_manager_state`` (static policy): ``defaultCpuSet`` is the shared pool, reserved CPUs
  included; ``entries`` the exclusive CPUs of each container. Per zone, allocatable = the zone's
  CPUs without ``reservedSystemCPUs``, available = allocatable without the exclusive ones. Under
  the ``none`` policy nothing is pinned: available = allocatable.
* ``memory_manager_state`` (Static policy): ``machineState[<numa>].memoryMap[<type>]`` holds
  ``allocatable`` and ``free`` of ``memory`` and every hugepage size. Without the Static policy
  there is no per-zone memory figure: memory and hugepages are left out.

Figures are ``{zone name: {resource: (allocatable, available)}}`` with zones named as in NRTs
(``node-<id>``); a resource absent on one side counts as (0, 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from testkit.realnode.node import RealNode
from testkit.realnode.topology import parse_bytes, parse_cpulist

Figures = dict[str, dict[str, tuple[int, int]]]


def kubelet_figures(node: RealNode) -> Figures:
    """The node's zones as its kubelet's checkpoints account for them (see the module docstring)."""
    topology = node.topology
    reserved = set(parse_cpulist(node.settings.reserved_system_cpus))
    figures: Figures = {f"node-{z}": {} for z in range(len(topology.zones))}
    cpu_state = node.cpu_manager_state() or {}
    exclusive: set[int] = set()
    if cpu_state.get("policyName") == "static":
        for containers in (cpu_state.get("entries") or {}).values():
            for cpus in containers.values():
                exclusive.update(parse_cpulist(cpus))
    for z in range(len(topology.zones)):
        allocatable = [c for c in topology.cpus(z) if c not in reserved]
        figures[f"node-{z}"]["cpu"] = (len(allocatable), len([c for c in allocatable if c not in exclusive]))
    memory_state = node.memory_manager_state() or {}
    if memory_state.get("policyName") == "Static":
        for numa, state in (memory_state.get("machineState") or {}).items():
            zone = figures.setdefault(f"node-{numa}", {})
            for resource, entry in (state.get("memoryMap") or {}).items():
                zone[resource] = (int(entry["allocatable"]), int(entry["free"]))
    return figures


def nrt_figures(nrt: Mapping[str, Any], resources: Iterable[str] | None = None) -> Figures:
    """(allocatable, available) per zone and resource of an NRT body (only ``resources`` if given)."""
    wanted = set(resources) if resources is not None else None
    figures: Figures = {}
    for zone in nrt.get("zones") or []:
        figures[zone["name"]] = {
            r["name"]: (parse_bytes(str(r["allocatable"])), parse_bytes(str(r["available"])))
            for r in zone.get("resources") or []
            if wanted is None or r["name"] in wanted
        }
    return figures


def differences(kubelet: Figures, published: Figures, *, available: bool = True) -> list[str]:
    """Readable lines, one per figure that differs (empty when they agree). With
    ``available=False`` only allocatable is compared (an estimate tracks no allocation)."""
    lines = []
    for zone in sorted(set(kubelet) | set(published)):
        mine, theirs = kubelet.get(zone, {}), published.get(zone, {})
        for resource in sorted(set(mine) | set(theirs)):
            k, p = mine.get(resource, (0, 0)), theirs.get(resource, (0, 0))
            for i, what in enumerate(("allocatable", "available")):
                if (available or i == 0) and k[i] != p[i]:
                    lines.append(f"{zone} {resource} {what}: kubelet {k[i]}, NRT {p[i]} (NRT - kubelet = {p[i] - k[i]})")
    return lines


def kubelet_restricted(figures: Figures, resources: Iterable[str]) -> Figures:
    """The same figures with only ``resources`` kept."""
    wanted = set(resources)
    return {zone: {r: v for r, v in values.items() if r in wanted} for zone, values in figures.items()}
