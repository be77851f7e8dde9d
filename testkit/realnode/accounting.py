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
* ``device-plugins/kubelet_internal_checkpoint`` (the device manager): ``RegisteredDevices`` are
  the ids it holds healthy per resource, ``PodDeviceEntries`` the ids each container got (init
  containers too: the kubelet counts them allocated until the pod ends). Each device's NUMA zones
  are what the node's plugin reports (``node.device_plugin.devices()``). Per zone and resource,
  allocatable = the healthy devices attached to the zone, available = those no live pod got. A
  device attached to two zones counts in both, as the NRT counts it; one without topology is in
  no zone. :func:`kubelet_device_groups` gives those two kinds again, per NUMA set, as the NRT's
  ``toposched.io/device-groups`` attribute lists them. The kubelet writes this checkpoint when a
  plugin sends a list, at an allocation and when a resource's 5-minute grace period ends, not
  when a plugin disconnects: it then drops the plugin's devices from its healthy set (Node
  allocatable, PodResources) at once, while the file lists them until its next write.

Figures are ``{zone name: {resource: (allocatable, available)}}`` with zones named as in NRTs
(``node-<id>``); a resource absent on one side counts as (0, 0).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from testkit.realnode.node import RealNode
from testkit.realnode.topology import parse_bytes, parse_cpulist
from toposched.apis.constants import NRT_ATTR_DEVICE_GROUPS
from toposched.apis.devicegroups import NO_TOPOLOGY, parse_groups

Figures = dict[str, dict[str, tuple[int, int]]]
GROUP_PREFIX = "device group "
"""Device groups are figures too, one "zone" per NUMA set: ``device group 0,1``, ``device group -``."""


def kubelet_figures(node: RealNode, active: Collection[str] | None = None) -> Figures:
    """The node's zones as its kubelet's checkpoints account for them (see the module docstring).

    ``active``: the UIDs of the pods the kubelet still runs. Checkpoint entries of other pods are
    stale and count as free, as the kubelet counts them before its next admission: it drops them
    (``removeStaleState``) when it computes the next pod's hints. Until then they stay in the
    files; the CPU Manager also drops them in its 10 s reconcile loop, the Memory Manager never
    does on its own, the device manager forgets them at once (every PodResources List and
    allocation) and writes its file again at its next allocation.
    """
    figures: Figures = {f"node-{z}": {} for z in range(len(node.topology.zones))}

    def live(uid: str) -> bool:
        return active is None or uid in active

    _cpu_figures(node, live, figures)
    _memory_figures(node, live, figures)
    devices = kubelet_devices(node, active)
    for zone in range(len(node.topology.zones)):
        figures[f"node-{zone}"].update(_count(devices, _attached_to(zone)))
    return figures


def kubelet_device_groups(node: RealNode, active: Collection[str] | None = None) -> Figures:
    """The healthy devices attached to several zones or to none, per NUMA set, as figures whose
    zones are the sets (``device group 0,1``, ``device group -``): what the NRT's
    ``toposched.io/device-groups`` attribute should list (:func:`nrt_device_groups` reads it)."""
    devices = kubelet_devices(node, active)
    groups: Figures = {}
    for numa in sorted({zones for zones, _ in devices.values() if len(zones) != 1}):
        counts = _count(devices, numa.__eq__)
        groups[_group_name(numa)] = {resource: n for resource, n in counts.items() if n[0]}
    return groups


def kubelet_devices(
    node: RealNode, active: Collection[str] | None = None
) -> dict[tuple[str, str], tuple[tuple[int, ...], bool]]:
    """(resource, device id) -> (the NUMA zones it is attached to, allocated) for every device the
    kubelet holds healthy, from its device checkpoint and the node's device data (see the module
    docstring). NUMA ids the topology lacks are left out, as the kubelet leaves them out of its
    masks; ``active`` as for :func:`kubelet_figures`."""
    data = device_checkpoint(node)
    allocated = {
        (str(entry["ResourceName"]), str(device_id))
        for entry in data.get("PodDeviceEntries") or []
        if active is None or entry["PodUID"] in active
        for ids in (entry.get("DeviceIDs") or {}).values()
        for device_id in ids or []
    }
    zones = range(len(node.topology.zones))
    attached = {
        (resource.name, device.id): tuple(sorted(z for z in set(device.numa) if z in zones))
        for resource in node.device_plugin.devices().resources
        for device in resource.devices
    }
    return {
        (resource, device_id): (attached.get((resource, device_id), ()), (resource, device_id) in allocated)
        for resource, ids in (data.get("RegisteredDevices") or {}).items()
        for device_id in ids or []
    }


def device_checkpoint(node: RealNode) -> dict[str, Any]:
    """The ``Data`` of the kubelet's device checkpoint (``PodDeviceEntries``, ``RegisteredDevices``);
    empty before its device manager wrote one."""
    path = node.layout.device_plugins / "kubelet_internal_checkpoint"
    data: dict[str, Any] = (json.loads(path.read_text()).get("Data") or {}) if path.is_file() else {}
    return data


def _count(
    devices: Mapping[tuple[str, str], tuple[tuple[int, ...], bool]], where: Callable[[tuple[int, ...]], bool]
) -> dict[str, tuple[int, int]]:
    """Per resource, (healthy, free) of the devices whose NUMA zones satisfy ``where``."""
    counts = {resource: (0, 0) for resource, _ in devices}
    for (resource, _), (numa, allocated) in devices.items():
        if where(numa):
            healthy, free = counts[resource]
            counts[resource] = (healthy + 1, free + (not allocated))
    return counts


def _attached_to(zone: int) -> Callable[[tuple[int, ...]], bool]:
    return lambda numa: zone in numa


def _group_name(numa: Iterable[int]) -> str:
    return GROUP_PREFIX + (",".join(map(str, numa)) or NO_TOPOLOGY)


def _cpu_figures(node: RealNode, live: Callable[[str], bool], figures: Figures) -> None:
    topology = node.topology
    reserved = set(parse_cpulist(node.settings.reserved_system_cpus))
    cpu_state = node.cpu_manager_state() or {}
    exclusive: set[int] = set()
    if cpu_state.get("policyName") == "static":
        for uid, containers in (cpu_state.get("entries") or {}).items():
            for cpus in containers.values() if live(uid) else ():
                exclusive.update(parse_cpulist(cpus))
    for z in range(len(topology.zones)):
        allocatable = [c for c in topology.cpus(z) if c not in reserved]
        figures[f"node-{z}"]["cpu"] = (len(allocatable), len([c for c in allocatable if c not in exclusive]))


def _memory_figures(node: RealNode, live: Callable[[str], bool], figures: Figures) -> None:
    memory_state = node.memory_manager_state() or {}
    if memory_state.get("policyName") != "Static":
        return
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


def nrt_device_groups(nrt: Mapping[str, Any]) -> Figures:
    """The NRT's ``toposched.io/device-groups`` attribute as figures (see :func:`kubelet_device_groups`)."""
    raw = next((str(a["value"]) for a in nrt.get("attributes") or [] if a["name"] == NRT_ATTR_DEVICE_GROUPS), "")
    groups: Figures = {}
    for resource, listed in parse_groups(raw).items():
        for group in listed:
            groups.setdefault(_group_name(group.numa), {})[resource] = (group.allocatable, group.available)
    return groups


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
