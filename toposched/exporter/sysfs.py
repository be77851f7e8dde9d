"""The machine's NUMA topology from sysfs. Pure: every path hangs off an injectable root.

Facts the parser relies on (and the reference exporters got wrong):
- NUMA ids can have holes; a node's ``distance`` row has one value per *online* node in
  ascending id order, so position != id.
- A node may have no CPUs (memory-only, e.g. CXL/HBM) or no memory.
- Hugepages of every size count (2Mi, 1Gi, 64Ki, 32Mi ...), from ``nr_hugepages`` x size.
- A kernel without NUMA support has no ``devices/system/node``: the whole machine is node 0.
A missing optional file gives a documented default and a warning; a garbled one a SysfsError
naming the file and its content, or (for what only refines the picture: NIC speed, device NUMA
affinity, distances, unusual huge page sizes) a warning and "unknown". Every value is checked
against what a real machine can have (``apis.limits``), and every file is read bounded in size,
only when it is a regular file (a FIFO or a device in the tree cannot block the reader).
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from toposched.apis.limits import (
    HUGEPAGE_SIZES_KB,
    LOCAL_DISTANCE,
    MAX_CPUS,
    MAX_MEMORY,
    MAX_NIC_SPEED_MBPS,
    MAX_NUMA_DISTANCE,
    MAX_NUMA_NODES,
    MAX_SYSFS_FILE_BYTES,
)
from toposched.localfiles import InputError, read_optional

_RANGE = re.compile(r"([0-9]{1,9})(?:-([0-9]{1,9}))?")
_INTEGER = re.compile(r"-?[0-9]{1,19}")
"""ASCII digits only: int() also takes other Unicode digits (``٣``), underscores and blanks."""
_NODE_DIR = re.compile(r"node(0|[1-9][0-9]{0,3})")
BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


class SysfsError(ValueError):
    """A sysfs file that exists but cannot be understood."""


@dataclass(frozen=True)
class NumaNode:
    id: int
    cpus: tuple[int, ...]
    memory_bytes: int
    hugepages: dict[str, int]
    """Resource name (``hugepages-2Mi``) -> bytes reserved as pages of that size."""
    distances: dict[int, int]
    """Other node id -> distance (10 = local)."""
    cores: tuple[tuple[int, ...], ...] = ()
    """The node's physical cores, each as its CPUs; empty when sysfs does not say."""
    socket: int | None = None
    """The physical package of its CPUs (None: no CPUs, several packages, or sysfs does not say)."""


@dataclass(frozen=True)
class Nic:
    name: str
    speed_bps: int | None
    """Link speed in bits per second; None when down or unknown."""
    numa_node: int | None


@dataclass(frozen=True)
class PciDevice:
    address: str
    numa_node: int | None
    """None when the firmware gives no affinity (numa_node = -1)."""


@dataclass
class Machine:
    numa: bool
    """False when the kernel has no NUMA support and node 0 stands for the whole machine."""
    nodes: list[NumaNode]
    nics: list[Nic] = field(default_factory=list)
    pci_devices: list[PciDevice] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def cpu_to_node(self) -> dict[int, int]:
        return {cpu: node.id for node in self.nodes for cpu in node.cpus}

    @property
    def threads_per_core(self) -> int | None:
        """CPUs per core when every core of every node is known and has the same number."""
        sizes = {len(core) for node in self.nodes for core in node.cores}
        if len(sizes) != 1 or any(node.cpus and not node.cores for node in self.nodes):
            return None
        return sizes.pop()


def parse_cpulist(text: str, where: str = "cpulist", limit: int = MAX_CPUS) -> tuple[int, ...]:
    """``0-3,8,10-11`` -> (0, 1, 2, 3, 8, 10, 11); an empty list is valid (a CPU-less node).

    Ids are below ``limit`` (CPUs, or NUMA nodes): ``0-99999999`` is garbage, not a machine."""
    out: set[int] = set()
    text = text.strip()
    if not text:
        return ()
    if len(text) > MAX_SYSFS_FILE_BYTES:
        raise SysfsError(f"{where}: not a CPU list (too long)")
    for part in text.split(","):
        match = _RANGE.fullmatch(part.strip())
        if match is None:
            raise SysfsError(f"{where}: {_short(text)} is not a CPU list")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise SysfsError(f"{where}: {_short(text)} is not a CPU list")
        if last >= limit:
            raise SysfsError(f"{where}: {_short(text)} names id {last}, beyond the largest a machine has ({limit - 1})")
        out.update(range(first, last + 1))
    return tuple(sorted(out))


def format_cpulist(cpus: tuple[int, ...] | list[int]) -> str:
    """(0, 1, 2, 5) -> ``0-2,5``."""
    ranges: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        ranges.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(ranges)


def hugepage_resource(size_kb: int) -> str:
    """2048 -> ``hugepages-2Mi``; the resource name the kubelet uses for that page size."""
    size = size_kb * 1024
    for suffix, factor in BINARY_SUFFIXES:
        if size % factor == 0:
            return f"hugepages-{size // factor}{suffix}"
    return f"hugepages-{size}"


def _short(text: str, limit: int = 40) -> str:
    """A file's content as a message quotes it: garbage can be long."""
    text = text.strip()
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def _read(path: Path) -> str | None:
    """The file's text, None when it does not exist; SysfsError naming it when it is not a small
    regular text file (a FIFO, a directory or a device where an attribute should be)."""
    try:
        return read_optional(path, MAX_SYSFS_FILE_BYTES)
    except InputError as exc:
        raise SysfsError(str(exc)) from None


def _int(path: Path, text: str, low: int = 0, high: int = MAX_MEMORY) -> int:
    stripped = text.strip()
    if not _INTEGER.fullmatch(stripped):
        raise SysfsError(f"{path}: {_short(stripped)} is not a number")
    value = int(stripped)
    if not low <= value <= high:
        raise SysfsError(f"{path}: {value} is out of range ({low} to {high})")
    return value


def _optional_int(text: str | None) -> int | None:
    """A number in a file whose absence or garbage only means "unknown" (NIC speed, numa_node)."""
    if text is None or not _INTEGER.fullmatch(text.strip()):
        return None
    return int(text.strip())


def _hugepages(directory: Path, warnings: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    if not directory.is_dir():
        return found
    for entry in sorted(directory.glob("hugepages-*kB")):
        size_text = entry.name.removeprefix("hugepages-").removesuffix("kB")
        size_kb = int(size_text) if _INTEGER.fullmatch(size_text) and len(size_text) < 12 else None
        if size_kb not in HUGEPAGE_SIZES_KB:
            warnings.append(f"{entry}: not a huge page size Linux has; ignored")
            continue
        assert size_kb is not None
        count_path = entry / "nr_hugepages"
        text = _read(count_path)
        if text is None:
            continue
        found[hugepage_resource(size_kb)] = _int(count_path, text, high=MAX_MEMORY // (size_kb * 1024)) * size_kb * 1024
    return found


def _meminfo_total(path: Path, text: str) -> int:
    """``Node 0 MemTotal:  65536000 kB`` (per node) or ``MemTotal:  65536000 kB`` (/proc) -> bytes."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.split()[-1:] == ["MemTotal"]:
            number, _, unit = value.strip().partition(" ")
            factor = {"kB": 1024, "": 1}.get(unit.strip())
            if factor is None:
                raise SysfsError(f"{path}: MemTotal in {_short(unit)}, not kB")
            return _int(path, number, high=MAX_MEMORY // factor) * factor
    raise SysfsError(f"{path}: no MemTotal line")


def _read_nics(root: Path, warnings: list[str]) -> list[Nic]:
    nics: list[Nic] = []
    net = root / "class" / "net"
    if not net.is_dir():
        return nics
    for iface in sorted(net.iterdir()):
        if not (iface / "device").exists():
            continue  # virtual interfaces (lo, bridges, veth) have no device
        speed = None
        text = _read(iface / "speed")
        mbps = _optional_int(text)
        if mbps is not None and 0 < mbps <= MAX_NIC_SPEED_MBPS:
            speed = mbps * 1_000_000  # sysfs speaks Mb/s
        elif text is not None and mbps != -1:  # -1: link down or speed unknown, as the kernel says
            warnings.append(f"{iface / 'speed'}: {_short(text)} is not a link speed in Mb/s; speed unknown")
        nics.append(Nic(iface.name, speed, _numa_node(iface / "device" / "numa_node", warnings)))
    return nics


def _numa_node(path: Path, warnings: list[str]) -> int | None:
    """A device's NUMA node; None when the firmware gives none (-1) or the file says nothing usable."""
    text = _read(path)
    numa = _optional_int(text)
    if numa is not None and 0 <= numa < MAX_NUMA_NODES:
        return numa
    if text is not None and numa != -1:
        warnings.append(f"{path}: {_short(text)} is not a NUMA node; no affinity assumed")
    return None


def _read_pci(root: Path, warnings: list[str]) -> list[PciDevice]:
    devices: list[PciDevice] = []
    pci = root / "bus" / "pci" / "devices"
    if not pci.is_dir():
        return devices
    for dev in sorted(pci.iterdir()):
        devices.append(PciDevice(dev.name, _numa_node(dev / "numa_node", warnings)))
    return devices


def _distances(path: Path, text: str, me: int, ids: list[int], warnings: list[str]) -> dict[int, int]:
    """A node's row of the distance table (positions are the online nodes in order); empty, with a
    warning, when it is not one a firmware may give (ACPI SLIT: 10 to itself, 11..255 to others)."""
    row = text.split()
    if len(row) != len(ids):
        warnings.append(f"{path}: {len(row)} values for {len(ids)} online nodes; costs omitted")
        return {}
    distances = {}
    for other, value in zip(ids, row, strict=True):
        distance = _optional_int(value)
        if other == me:
            valid = distance == LOCAL_DISTANCE
        else:
            valid = distance is not None and LOCAL_DISTANCE < distance <= MAX_NUMA_DISTANCE
        if distance is None or not valid:
            warnings.append(
                f"{path}: {_short(value)} is not a distance to node {other} "
                f"({LOCAL_DISTANCE} to itself, {LOCAL_DISTANCE + 1} to {MAX_NUMA_DISTANCE} to others); costs omitted"
            )
            return {}
        distances[other] = distance
    return distances


def read_machine(root: Path, total_memory: Callable[[], int] | None = None, proc: Path | None = None) -> Machine:
    """Read the topology under ``root`` (what stands for /sys).

    ``proc`` (default: the sibling ``proc`` of root's parent, else /proc) gives MemTotal on a
    kernel without NUMA; ``total_memory`` is the last resort (psutil in production).
    """
    system = root / "devices" / "system"
    online_cpus_text = _read(system / "cpu" / "online")
    online_cpus = set(parse_cpulist(online_cpus_text, str(system / "cpu" / "online"))) if online_cpus_text else None
    node_dir = system / "node"
    warnings: list[str] = []
    nics, pci = _read_nics(root, warnings), _read_pci(root, warnings)
    if not node_dir.is_dir():
        return _without_numa(root, online_cpus, total_memory, proc, nics, pci, warnings)

    online_text = _read(node_dir / "online")
    if online_text is not None:
        ids = list(parse_cpulist(online_text, str(node_dir / "online"), limit=MAX_NUMA_NODES))
    else:
        present = (_NODE_DIR.fullmatch(d.name) for d in node_dir.glob("node[0-9]*"))
        ids = sorted(n for match in present if match and (n := int(match.group(1))) < MAX_NUMA_NODES)
        warnings.append(f"{node_dir / 'online'} missing; using the node directories present")
    nodes = []
    owner: dict[int, int] = {}
    for nid in ids:
        d = node_dir / f"node{nid}"
        if not d.is_dir():
            warnings.append(f"{d} missing although node {nid} is online; skipped")
            continue
        cpu_text = _read(d / "cpulist")
        cpus = parse_cpulist(cpu_text, str(d / "cpulist")) if cpu_text is not None else ()
        if online_cpus is not None:
            cpus = tuple(c for c in cpus if c in online_cpus)
        for cpu in cpus:  # a CPU belongs to one node: two claims make a machine that cannot be
            if owner.setdefault(cpu, nid) != nid:
                raise SysfsError(f"{d / 'cpulist'}: CPU {cpu} is also listed by node{owner[cpu]}")
        meminfo = _read(d / "meminfo")
        if meminfo is None:
            warnings.append(f"{d / 'meminfo'} missing; node {nid} memory taken as 0")
            memory = 0
        else:
            memory = _meminfo_total(d / "meminfo", meminfo)
        distance_text = _read(d / "distance")
        distances = _distances(d / "distance", distance_text, nid, ids, warnings) if distance_text is not None else {}
        cores, packages = _cores(system / "cpu", cpus)
        socket = packages[0] if len(packages) == 1 else None
        nodes.append(NumaNode(nid, cpus, memory, _hugepages(d / "hugepages", warnings), distances, cores, socket))
    if not nodes:
        raise SysfsError(f"{node_dir}: no online NUMA node found")
    _within_one_machine(node_dir, nodes)
    return Machine(numa=True, nodes=nodes, nics=nics, pci_devices=pci, warnings=warnings)


def _cores(cpu_dir: Path, cpus: tuple[int, ...]) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """The node's CPUs grouped by (package, core id), as the kubelet's cadvisor groups threads,
    and the packages they are on; both empty when a CPU's topology files are missing or unreadable."""
    cores: dict[tuple[int, int], list[int]] = {}
    for cpu in cpus:
        topology = cpu_dir / f"cpu{cpu}" / "topology"
        try:
            core = _optional_int(_read(topology / "core_id"))
            package = _optional_int(_read(topology / "physical_package_id"))
        except SysfsError:  # a strange file only means the cores are unknown
            return (), ()
        if core is None or package is None:
            return (), ()
        cores.setdefault((package, core), []).append(cpu)
    return tuple(tuple(sorted(c)) for c in sorted(cores.values())), tuple(sorted({p for p, _ in cores}))


def _within_one_machine(where: Path, nodes: list[NumaNode]) -> None:
    """The nodes together: no more memory, or huge pages of one size, than a machine can hold."""
    totals = {"memory": sum(n.memory_bytes for n in nodes)}
    for n in nodes:
        for name, size in n.hugepages.items():
            totals[name] = totals.get(name, 0) + size
    for name, total in totals.items():
        if total > MAX_MEMORY:
            raise SysfsError(f"{where}: the nodes together have {total} bytes of {name}, more than a machine holds")


def _without_numa(
    root: Path,
    online_cpus: set[int] | None,
    total_memory: Callable[[], int] | None,
    proc: Path | None,
    nics: list[Nic],
    pci: list[PciDevice],
    warnings: list[str],
) -> Machine:
    warnings.insert(0, "no NUMA support in this kernel (no devices/system/node): the machine is one zone, node-0")
    if online_cpus is None:
        raise SysfsError(f"{root / 'devices/system/cpu/online'} missing: cannot tell which CPUs exist")
    memory = None
    for candidate in [proc, root.parent / "proc", Path("/proc")]:
        if candidate is not None and (text := _read(candidate / "meminfo")) is not None:
            memory = _meminfo_total(candidate / "meminfo", text)
            break
    if memory is None:
        if total_memory is None:
            raise SysfsError("no meminfo found for a kernel without NUMA")
        memory = total_memory()
    if not 0 <= memory <= MAX_MEMORY:
        raise SysfsError(f"total memory of {memory} bytes is not a machine's")
    hugepages = _hugepages(root / "kernel" / "mm" / "hugepages", warnings)
    node = NumaNode(0, tuple(sorted(online_cpus)), memory, hugepages, {0: LOCAL_DISTANCE})
    _within_one_machine(root, [node])
    return Machine(numa=False, nodes=[node], nics=nics, pci_devices=pci, warnings=warnings)
