"""The kubelet's own accounting of exclusive CPUs, pinned memory and devices: its CPU Manager,
Memory Manager and device manager checkpoint files (``cpu_manager_state``,
``memory_manager_state``, ``device-plugins/kubelet_internal_checkpoint`` in the kubelet's root dir).

PodResources ``List`` shows what app and sidecar containers hold, but not what a pod's regular
init containers still hold (the kubelet keeps their CPUs, memory and devices for the app
containers to reuse, and counts every device they got as allocated until the pod ends), nor the
Memory Manager's NUMA groups. The checkpoints do: the CPU Manager's entries are exactly the CPUs
its containers hold (what it can still hand out is the rest: its default set, but for a moment
between its two writes of one change), the Memory Manager's machine state is its free memory per
NUMA node and type, and the device checkpoint lists the devices of every container. A file that is missing,
too big or not what we expect is ignored (the NRT then comes from PodResources alone); it is
never taken as "nothing in use".
"""

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from toposched.exporter.sysfs import parse_cpulist

CPU_STATE = "cpu_manager_state"
MEMORY_STATE = "memory_manager_state"
DEVICE_STATE = "device-plugins/kubelet_internal_checkpoint"
MAX_BYTES = 8 * 2**20
"""A checkpoint of thousands of pods is a few hundred KiB; anything far larger is not one."""
_State = TypeVar("_State")


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or is not what the kubelet writes."""


@dataclass(frozen=True)
class CpuState:
    policy: str
    default_cpus: frozenset[int]
    """CPUs in the shared pool: not held exclusively by any container (reserved ones included)."""
    entries: dict[str, dict[str, frozenset[int]]] = field(default_factory=dict)
    """Pod uid -> container -> its exclusive CPUs."""


Block = tuple[str, int, tuple[int, ...]]
"""A pinned memory block: type, size in bytes, NUMA nodes."""


@dataclass(frozen=True)
class MemoryZoneState:
    allocatable: dict[str, Decimal]
    free: dict[str, Decimal]
    cells: tuple[int, ...]
    """The NUMA nodes this node's pinned memory is grouped with (itself alone when not grouped)."""
    assignments: int


@dataclass(frozen=True)
class MemoryState:
    policy: str
    zones: dict[int, MemoryZoneState] = field(default_factory=dict)
    entries: dict[str, dict[str, tuple[Block, ...]]] = field(default_factory=dict)
    """Pod uid -> container -> its pinned memory blocks."""


DeviceId = tuple[str, str]
"""A device: its resource name and its id."""


@dataclass(frozen=True)
class DeviceState:
    entries: dict[str, dict[str, frozenset[DeviceId]]] = field(default_factory=dict)
    """Pod uid -> container -> the devices it was given (init containers included)."""


@dataclass(frozen=True)
class Checkpoints:
    cpu: CpuState | None = None
    memory: MemoryState | None = None
    devices: DeviceState | None = None
    problems: tuple[str, ...] = ()
    """Why a file was ignored, for the logs."""


def parse_cpu_state(text: str, where: str = CPU_STATE) -> CpuState:
    data = _object(text, where)
    policy, default = data.get("policyName"), data.get("defaultCpuSet")
    if not isinstance(policy, str) or not isinstance(default, str):
        raise CheckpointError(f"{where}: policyName and defaultCpuSet must be strings")
    entries: dict[str, dict[str, frozenset[int]]] = {}
    raw = data.get("entries") or {}
    if not isinstance(raw, dict):
        raise CheckpointError(f"{where}: entries is not an object")
    for uid, containers in raw.items():
        if not isinstance(containers, dict) or not all(isinstance(v, str) for v in containers.values()):
            raise CheckpointError(f"{where}: entries[{uid!r}] is not container -> cpuset")
        entries[str(uid)] = {
            str(name): frozenset(parse_cpulist(cpus, f"{where}: entries[{uid}][{name}]"))
            for name, cpus in containers.items()
        }
    return CpuState(policy, frozenset(parse_cpulist(default, f"{where}: defaultCpuSet")), entries)


def parse_memory_state(text: str, where: str = MEMORY_STATE) -> MemoryState:
    data = _object(text, where)
    policy, machine = data.get("policyName"), data.get("machineState") or {}
    if not isinstance(policy, str) or not isinstance(machine, dict):
        raise CheckpointError(f"{where}: policyName must be a string and machineState an object")
    zones = {}
    for key, node in machine.items():
        if not str(key).isdigit() or not isinstance(node, dict):
            raise CheckpointError(f"{where}: machineState[{key!r}] is not a NUMA node's state")
        memory_map = node.get("memoryMap", {})
        if not isinstance(memory_map, dict):
            raise CheckpointError(f"{where}: machineState[{key}].memoryMap is not an object")
        allocatable, free = {}, {}
        for kind, sizes in memory_map.items():
            if not isinstance(sizes, dict):
                raise CheckpointError(f"{where}: machineState[{key}].memoryMap[{kind!r}] is not an object")
            allocatable[str(kind)] = _size(sizes.get("allocatable"), f"{where}: {key}/{kind}/allocatable")
            free[str(kind)] = _size(sizes.get("free"), f"{where}: {key}/{kind}/free")
        cells = node.get("cells") or [int(key)]
        if not isinstance(cells, list) or not all(isinstance(c, int) and c >= 0 for c in cells):
            raise CheckpointError(f"{where}: machineState[{key}].cells is not a list of NUMA ids")
        assignments = node.get("numberOfAssignments", 0)
        if not isinstance(assignments, int) or assignments < 0:
            raise CheckpointError(f"{where}: machineState[{key}].numberOfAssignments is not a count")
        zones[int(key)] = MemoryZoneState(allocatable, free, tuple(sorted(set(cells))), assignments)
    entries: dict[str, dict[str, tuple[Block, ...]]] = {}
    raw = data.get("entries") or {}
    if not isinstance(raw, dict):
        raise CheckpointError(f"{where}: entries is not an object")
    for uid, containers in raw.items():
        if not isinstance(containers, dict):
            raise CheckpointError(f"{where}: entries[{uid!r}] is not container -> blocks")
        entries[str(uid)] = {
            str(name): tuple(_block(b, f"{where}: entries[{uid}][{name}]") for b in blocks or [])
            for name, blocks in containers.items()
        }
    return MemoryState(policy, zones, entries)


def parse_device_state(text: str, where: str = DEVICE_STATE) -> DeviceState:
    """The device manager's checkpoint: ``Data.PodDeviceEntries``, one per container and resource,
    with the device ids per NUMA node (-1: without topology). ``RegisteredDevices`` is not read:
    the healthy devices come from PodResources, which also drops a plugin that disconnected."""
    data = _object(text, where).get("Data")
    if not isinstance(data, dict):
        raise CheckpointError(f"{where}: Data is not an object")
    raw = data.get("PodDeviceEntries")
    raw = [] if raw is None else raw  # null: no allocation yet
    if not isinstance(raw, list):
        raise CheckpointError(f"{where}: PodDeviceEntries is not a list")
    entries: dict[str, dict[str, set[DeviceId]]] = {}
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise CheckpointError(f"{where}: PodDeviceEntries[{i}] is not an object")
        uid, container, resource = (entry.get(key) for key in ("PodUID", "ContainerName", "ResourceName"))
        if not (isinstance(uid, str) and isinstance(container, str) and isinstance(resource, str)):
            raise CheckpointError(
                f"{where}: PodDeviceEntries[{i}]: PodUID, ContainerName and ResourceName must be strings"
            )
        per_numa = entry.get("DeviceIDs")
        per_numa = {} if per_numa is None else per_numa  # a Go map marshals to null when nil
        if not isinstance(per_numa, dict):
            raise CheckpointError(f"{where}: PodDeviceEntries[{i}].DeviceIDs is not an object")
        held = entries.setdefault(uid, {}).setdefault(container, set())
        for numa, ids in per_numa.items():
            if not isinstance(ids, list) or not all(isinstance(d, str) for d in ids):
                raise CheckpointError(f"{where}: PodDeviceEntries[{i}].DeviceIDs[{numa!r}] is not a list of ids")
            held.update((resource, str(d)) for d in ids)
    return DeviceState({uid: {c: frozenset(ids) for c, ids in held.items()} for uid, held in entries.items()})


def _block(raw: object, where: str) -> Block:
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise CheckpointError(f"{where}: not a memory block")
    numa = raw.get("numaAffinity") or []
    if not isinstance(numa, list) or not all(isinstance(n, int) and n >= 0 for n in numa):
        raise CheckpointError(f"{where}: numaAffinity is not a list of NUMA ids")
    return str(raw["type"]), int(_size(raw.get("size"), f"{where}: size")), tuple(sorted(numa))


Holding = tuple[str, frozenset[int], frozenset[Block]]
"""What one container holds: its name, exclusive CPUs and pinned memory blocks."""


def stale_pods(checkpoints: Checkpoints, listed: Iterable[Iterable[Holding]]) -> set[str]:
    """Pods the checkpoints still hold that the kubelet no longer runs (one it rejected after its
    first containers got their CPUs, say: the kubelet drops those at its next admission or
    reconcile). A pod is live when one of its containers is a container PodResources lists: the
    same name, and what the listing shows of it held the same; ``listed`` gives per listed pod its
    containers' (name, CPUs, memory blocks).

    The listing may be a moment older than the checkpoints and show a container between the CPU
    Manager's allocation and the Memory Manager's: its CPUs, no memory yet. Its pod is live all the
    same (its CPUs are its own); were it taken for stale, the NRT would count its CPUs and memory
    free while its pods fingerprint (from the listing) already includes it, and the scheduler would
    give them away again."""
    held: dict[str, list[Holding]] = {}
    for pod in listed:
        for name, cpus, blocks in pod:
            if cpus or blocks:
                held.setdefault(name, []).append((name, cpus, blocks))
    cpu = checkpoints.cpu.entries if checkpoints.cpu is not None else {}
    memory = checkpoints.memory.entries if checkpoints.memory is not None else {}
    stale = set()
    for uid in {*cpu, *memory}:
        names = {*cpu.get(uid, {}), *memory.get(uid, {})}
        mine = [
            (name, cpu.get(uid, {}).get(name, frozenset()), frozenset(memory.get(uid, {}).get(name, ())))
            for name in names
        ]
        if not any(_shows(seen, container) for container in mine for seen in held.get(container[0], ())):
            stale.add(uid)
    return stale


def _shows(listed: Holding, checkpointed: Holding) -> bool:
    """What PodResources lists of a container is what the checkpoints hold of it, as far as it goes."""
    _, cpus, blocks = listed
    return (not cpus or cpus == checkpointed[1]) and (not blocks or blocks == checkpointed[2])


DeviceHolding = tuple[str, frozenset[DeviceId]]
"""What one container holds of devices: its name and its devices."""


def device_holders(checkpoints: Checkpoints, listed: Iterable[DeviceHolding], stale: set[str]) -> set[str]:
    """Pods of the device checkpoint the kubelet still runs: one of their containers holds exactly
    the devices a container PodResources lists holds (``listed``), or the CPU or Memory Manager
    checkpoint holds them and :func:`stale_pods` found them live (not in ``stale``). Others are gone:
    the kubelet forgets their devices at once and writes its checkpoint again at its next allocation."""
    if checkpoints.devices is None:
        return set()
    held = {(name, devices) for name, devices in listed if devices}
    pinned = {*checkpoints.cpu.entries} if checkpoints.cpu is not None else set()
    pinned |= {*checkpoints.memory.entries} if checkpoints.memory is not None else set()
    return {
        uid
        for uid, containers in checkpoints.devices.entries.items()
        if (uid in pinned and uid not in stale) or not held.isdisjoint(containers.items())
    }


def read(state_dir: Path) -> Checkpoints:
    """The three checkpoints of the kubelet whose root dir is ``state_dir``, each only when readable."""
    problems: list[str] = []

    def parsed(name: str, parse: Callable[[str, str], _State]) -> _State | None:
        path = state_dir / name
        try:
            if not path.is_file():
                return None
            if path.stat().st_size > MAX_BYTES:
                raise CheckpointError(f"{path}: larger than {MAX_BYTES} bytes")
            return parse(path.read_text(), str(path))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            problems.append(f"{path}: {exc}" if str(path) not in str(exc) else str(exc))
            return None

    cpu = parsed(CPU_STATE, parse_cpu_state)
    memory = parsed(MEMORY_STATE, parse_memory_state)
    devices = parsed(DEVICE_STATE, parse_device_state)
    return Checkpoints(cpu, memory, devices, tuple(problems))


def _object(text: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{where}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{where}: not a JSON object")
    return data


def _size(value: object, where: str) -> Decimal:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CheckpointError(f"{where}: {value!r} is not a size in bytes")
    return Decimal(value)
