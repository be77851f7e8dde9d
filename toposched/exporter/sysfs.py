"""The machine's NUMA topology from sysfs. Pure: every path hangs off an injectable root.

Facts the parser relies on (and the reference exporters got wrong):
- NUMA ids can have holes; a node's ``distance`` row has one value per *online* node in
  ascending id order, so position != id.
- A node may have no CPUs (memory-only, e.g. CXL/HBM) or no memory.
- Hugepages of every size count (2Mi, 1Gi, 64Ki, 32Mi ...), from ``nr_hugepages`` x size.
- A kernel without NUMA support has no ``devices/system/node``: the whole machine is node 0.
A missing optional file gives a documented default and a warning; a garbled one a SysfsError
naming the file and its content.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

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


def parse_cpulist(text: str, where: str = "cpulist") -> tuple[int, ...]:
    """``0-3,8,10-11`` -> (0, 1, 2, 3, 8, 10, 11); an empty list is valid (a CPU-less node)."""
    out: list[int] = []
    text = text.strip()
    if not text:
        return ()
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            first = int(lo)
            last = int(hi) if sep else first
        except ValueError:
            raise SysfsError(f"{where}: {text!r} is not a CPU list") from None
        if first < 0 or last < first:
            raise SysfsError(f"{where}: {text!r} is not a CPU list")
        out.extend(range(first, last + 1))
    return tuple(sorted(set(out)))


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


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _int(path: Path, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise SysfsError(f"{path}: {text.strip()!r} is not a number") from None


def _hugepages(directory: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    if not directory.is_dir():
        return found
    for entry in sorted(directory.glob("hugepages-*kB")):
        size_text = entry.name.removeprefix("hugepages-").removesuffix("kB")
        if not size_text.isdigit():
            continue
        count_path = entry / "nr_hugepages"
        text = _read(count_path)
        if text is None:
            continue
        found[hugepage_resource(int(size_text))] = _int(count_path, text) * int(size_text) * 1024
    return found


def _meminfo_total(path: Path, text: str) -> int:
    """``Node 0 MemTotal:  65536000 kB`` (per node) or ``MemTotal:  65536000 kB`` (/proc) -> bytes."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.split()[-1:] == ["MemTotal"]:
            number, _, unit = value.strip().partition(" ")
            factor = 1024 if unit.strip() == "kB" else 1
            return _int(path, number) * factor
    raise SysfsError(f"{path}: no MemTotal line")


def _read_nics(root: Path) -> list[Nic]:
    nics: list[Nic] = []
    net = root / "class" / "net"
    if not net.is_dir():
        return nics
    for iface in sorted(net.iterdir()):
        if not (iface / "device").exists():
            continue  # virtual interfaces (lo, bridges, veth) have no device
        speed = None
        text = _read(iface / "speed")
        if text is not None and text.strip().lstrip("-").isdigit() and int(text) > 0:
            speed = int(text) * 1_000_000  # sysfs speaks Mb/s
        numa_text = _read(iface / "device" / "numa_node")
        numa = int(numa_text) if numa_text and numa_text.strip().lstrip("-").isdigit() else None
        nics.append(Nic(iface.name, speed, numa if numa is not None and numa >= 0 else None))
    return nics


def _read_pci(root: Path) -> list[PciDevice]:
    devices: list[PciDevice] = []
    pci = root / "bus" / "pci" / "devices"
    if not pci.is_dir():
        return devices
    for dev in sorted(pci.iterdir()):
        text = _read(dev / "numa_node")
        numa = int(text) if text and text.strip().lstrip("-").isdigit() else None
        devices.append(PciDevice(dev.name, numa if numa is not None and numa >= 0 else None))
    return devices


def read_machine(root: Path, total_memory: Callable[[], int] | None = None, proc: Path | None = None) -> Machine:
    """Read the topology under ``root`` (what stands for /sys).

    ``proc`` (default: the sibling ``proc`` of root's parent, else /proc) gives MemTotal on a
    kernel without NUMA; ``total_memory`` is the last resort (psutil in production).
    """
    system = root / "devices" / "system"
    online_cpus_text = _read(system / "cpu" / "online")
    online_cpus = set(parse_cpulist(online_cpus_text, str(system / "cpu" / "online"))) if online_cpus_text else None
    node_dir = system / "node"
    nics, pci = _read_nics(root), _read_pci(root)
    if not node_dir.is_dir():
        return _without_numa(root, online_cpus, total_memory, proc, nics, pci)

    warnings: list[str] = []
    online_text = _read(node_dir / "online")
    if online_text is not None:
        ids = list(parse_cpulist(online_text, str(node_dir / "online")))
    else:
        ids = sorted(int(d.name[4:]) for d in node_dir.glob("node[0-9]*") if d.name[4:].isdigit())
        warnings.append(f"{node_dir / 'online'} missing; using the node directories present")
    nodes = []
    for nid in ids:
        d = node_dir / f"node{nid}"
        if not d.is_dir():
            warnings.append(f"{d} missing although node {nid} is online; skipped")
            continue
        cpu_text = _read(d / "cpulist")
        cpus = parse_cpulist(cpu_text, str(d / "cpulist")) if cpu_text is not None else ()
        if online_cpus is not None:
            cpus = tuple(c for c in cpus if c in online_cpus)
        meminfo = _read(d / "meminfo")
        if meminfo is None:
            warnings.append(f"{d / 'meminfo'} missing; node {nid} memory taken as 0")
            memory = 0
        else:
            memory = _meminfo_total(d / "meminfo", meminfo)
        distances: dict[int, int] = {}
        distance_text = _read(d / "distance")
        if distance_text is not None:
            row = distance_text.split()
            if len(row) == len(ids):
                distances = {other: _int(d / "distance", value) for other, value in zip(ids, row, strict=True)}
            else:
                warnings.append(f"{d / 'distance'}: {len(row)} values for {len(ids)} online nodes; costs omitted")
        nodes.append(NumaNode(nid, cpus, memory, _hugepages(d / "hugepages"), distances))
    if not nodes:
        raise SysfsError(f"{node_dir}: no online NUMA node found")
    return Machine(numa=True, nodes=nodes, nics=nics, pci_devices=pci, warnings=warnings)


def _without_numa(
    root: Path,
    online_cpus: set[int] | None,
    total_memory: Callable[[], int] | None,
    proc: Path | None,
    nics: list[Nic],
    pci: list[PciDevice],
) -> Machine:
    warnings = ["no NUMA support in this kernel (no devices/system/node): the machine is one zone, node-0"]
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
    hugepages = _hugepages(root / "kernel" / "mm" / "hugepages")
    node = NumaNode(0, tuple(sorted(online_cpus)), memory, hugepages, {0: 10})
    return Machine(numa=False, nodes=[node], nics=nics, pci_devices=pci, warnings=warnings)
