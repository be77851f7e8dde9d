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

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from testkit.realnode.node import RealNode
from testkit.realnode.topology import parse_bytes, parse_cpulist

Figures = dict[str, dict[str, tuple[int, int]]]


def kubelet_figures(node: RealNode, active: Collection[str] | None = None) -> Figures:
    """The node's zones as its kubelet's checkpoints account for them (see the module docstring).

    ``active``: the UIDs of the pods the kubelet still runs. Checkpoint entries of other pods are
    stale and count as free, as the kubelet counts them before its next admission: it drops them
    (``removeStaleState``) when it computes the next pod's hints. Until then they stay in the
    files; the CPU Manager also drops them in its 10 s reconcile loop, the Memory Manager never
    does on its own.
    """
    topology = node.topology
    reserved = set(parse_cpulist(node.settings.reserved_system_cpus))
    figures: Figures = {f"node-{z}": {} for z in range(len(topology.zones))}

    def live(uid: str) -> bool:
        return active is None or uid in active

    cpu_state = node.cpu_manager_state() or {}
    exclusive: set[int] = set()
    if cpu_state.get("policyName") == "static":
        for uid, containers in (cpu_state.get("entries") or {}).items():
            for cpus in containers.values() if live(uid) else ():
                exclusive.update(parse_cpulist(cpus))
    for z in range(len(topology.zones)):
        allocatable = [c for c in topology.cpus(z) if c not in reserved]
        figures[f"node-{z}"]["cpu"] = (len(allocatable), len([c for c in allocatable if c not in exclusive]))
    memory_state = node.memory_manager_state() or {}
    if memory_state.get("policyName") != "Static":
        return figures
    free: dict[tuple[int, str], int] = {}
    allocatable_memory: dict[tuple[int, str], int] = {}
    for numa, state in (memory_state.get("machineState") or {}).items():
        for resource, entry in (state.get("memoryMap") or {}).items():
            allocatable_memory[(int(numa), resource)] = int(entry["allocatable"])
            free[(int(numa), resource)] = int(entry["free"])
    for uid, containers in (memory_state.get("entries") or {}).items():
        for blocks in containers.values() if not live(uid) else ():
            for block in blocks:  # give a stale block back, zone by zone, as far as the zone lent it
                left = int(block["size"])
                for numa in block.get("numaAffinity") or []:
                    key = (int(numa), str(block["type"]))
                    back = min(left, allocatable_memory.get(key, 0) - free.get(key, 0))
                    free[key] = free.get(key, 0) + back
                    left -= back
    for (numa, resource), amount in allocatable_memory.items():
        figures.setdefault(f"node-{numa}", {})[resource] = (amount, free[(numa, resource)])
    return figures


def active_pod_uids(node: RealNode) -> set[str]:
    """UIDs of the pods bound to the node that have not finished (what its kubelet still runs)."""
    listed = node.cluster.get_json("pods", "--all-namespaces", f"--field-selector=spec.nodeName={node.name}")
    return {
        str(pod["metadata"]["uid"])
        for pod in (listed or {}).get("items", [])
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    }


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
                    lines.append(f"{zone} {resource} {what}: kubelet {k[i]}, NRT {p[i]} (NRT - kubelet {p[i] - k[i]})")
    return lines
