"""A node's hardware topology (NUMA zones, cores, SMT, memory, hugepages, distances) and the fake
sysfs/procfs files that make a kubelet believe in it.

What the kubelet 1.36 reads, through its vendored cadvisor (``utils/sysfs``, ``utils/sysinfo``,
``machine``), and therefore what :func:`write_fake_host` writes:

* ``/sys/devices/system/node/node*``: the NUMA nodes are found by globbing these directories; in
  each, the CPUs by globbing ``cpu*`` entries (symlinks to ``../../cpu/cpuN``, as on a real
  machine; ``cpulist`` alone is not enough), ``meminfo`` (``MemTotal``), ``distance`` and
  ``hugepages/hugepages-<size>kB/nr_hugepages``.
* ``/sys/devices/system/cpu/online`` (CPUs not listed are skipped) and per CPU
  ``topology/core_id`` and ``topology/physical_package_id``; ``cache/index*/{id,size,level,type,
  shared_cpu_map}`` feed the uncore-cache alignment of the CPU manager (optional for cadvisor).
* ``/sys/kernel/mm/hugepages/hugepages-<size>kB/nr_hugepages``: the node's hugepages capacity.
* ``/proc/meminfo`` ``MemTotal``: the node's memory capacity (not the sum of the zones).
* ``/proc/cpuinfo``: the socket and physical-core counts in MachineInfo (``physical id``,
  ``core id``). The CPU Manager reads the socket count from there: it packs by NUMA node first
  when sockets are no fewer than NUMA nodes, else by socket, and align-by-socket divides NUMA
  nodes by sockets. So a fake one is written too: one block per fake CPU with its package and
  core, the rest (vendor, model, MHz, flags) copied from the host's first CPU.

The rest of what is written (``possible``, ``present``, siblings lists, ``cpumap``, ``has_*``)
is what other readers (the exporter, ghw, numactl) expect on a real machine.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toposched.exporter import sysfs

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
HUGEPAGE_2MI = 2 * MIB
HUGEPAGE_1GI = GIB

_QUANTITY = re.compile(r"^\s*(\d+)\s*(Ki|Mi|Gi|Ti|K|M|G|T|k)?\s*$")
_FACTORS = {
    None: 1,
    "Ki": KIB,
    "Mi": MIB,
    "Gi": GIB,
    "Ti": 1024 * GIB,
    "k": 1000,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
}


def parse_bytes(value: int | str) -> int:
    """Bytes from an int or a Kubernetes-style integer quantity ("4Gi", "512Mi", "1000000")."""
    if isinstance(value, int):
        return value
    match = _QUANTITY.match(value)
    if not match:
        raise ValueError(f"not a memory quantity: {value!r} (use e.g. 4Gi, 512Mi or a number of bytes)")
    return int(match.group(1)) * _FACTORS[match.group(2)]


def format_bytes(value: int) -> str:
    """The shortest exact binary-suffixed quantity ("4Gi", "1536Mi", "100")."""
    for suffix, factor in (("Ti", 1024 * GIB), ("Gi", GIB), ("Mi", MIB), ("Ki", KIB)):
        if value and value % factor == 0:
            return f"{value // factor}{suffix}"
    return str(value)


def format_cpulist(cpus: Iterable[int]) -> str:
    """Kernel list format: ``0-3,8,10-11`` (empty string for no CPUs); the exporter's own writer."""
    return sysfs.format_cpulist(list(cpus))


def parse_cpulist(text: str) -> list[int]:
    """Inverse of :func:`format_cpulist` (the exporter's reader: bounded, errors name the text)."""
    return list(sysfs.parse_cpulist(text))


def format_cpumask(cpus: Iterable[int], width: int) -> str:
    """Kernel bitmap format (``cpumap``, ``*_siblings``): 32-bit hex words, comma-separated,
    most significant first, the first word only as wide as ``width`` bits need."""
    mask = 0
    for cpu in cpus:
        mask |= 1 << cpu
    words = max(1, (width + 31) // 32)
    first_bits = width - 32 * (words - 1) if width else 32
    chunks = [f"{(mask >> (32 * i)) & 0xFFFFFFFF:08x}" for i in reversed(range(words))]
    chunks[0] = chunks[0][-max(1, (first_bits + 3) // 4) :]
    return ",".join(chunks)


@dataclass(frozen=True)
class Zone:
    """One NUMA zone.

    ``memory`` is the zone's MemTotal in bytes, hugepages included (as the kernel counts it);
    ``cores`` may be 0 (a memory-only zone, e.g. CXL or HBM) and ``memory`` may be 0 (a CPU-only
    zone). ``socket`` is the physical package the zone's cores belong to (default: one socket
    per zone).
    """

    cores: int
    memory: int
    hugepages_2mi: int = 0
    hugepages_1gi: int = 0
    socket: int | None = None

    @property
    def hugepages_bytes(self) -> int:
        return self.hugepages_2mi * HUGEPAGE_2MI + self.hugepages_1gi * HUGEPAGE_1GI


@dataclass(frozen=True)
class Topology:
    """A machine: NUMA zones (numbered 0..n-1 in order), SMT and the SLIT distance matrix.

    CPU ids follow Linux on x86: the first thread of every core is numbered first, zone after
    zone (0..C-1 for C cores), then the second threads in the same order (C..2C-1), so the
    thread siblings of CPU ``k`` are ``k`` and ``k + C``.
    """

    zones: tuple[Zone, ...]
    threads_per_core: int = 1
    distances: tuple[tuple[int, ...], ...] | None = None
    _cpus_by_zone: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.validate()
        total_cores = sum(z.cores for z in self.zones)
        by_zone: list[tuple[int, ...]] = []
        first_core = 0
        for zone in self.zones:
            cpus = [
                thread * total_cores + core
                for thread in range(self.threads_per_core)
                for core in range(first_core, first_core + zone.cores)
            ]
            by_zone.append(tuple(sorted(cpus)))
            first_core += zone.cores
        object.__setattr__(self, "_cpus_by_zone", tuple(by_zone))

    @classmethod
    def uniform(
        cls,
        zones: int = 2,
        cores_per_zone: int = 4,
        memory_per_zone: int | str = 4 * GIB,
        *,
        threads_per_core: int = 1,
        hugepages_2mi: int = 0,
        hugepages_1gi: int = 0,
        zones_per_socket: int = 1,
    ) -> Topology:
        """``zones`` identical zones; ``zones_per_socket`` > 1 models sub-NUMA clustering."""
        memory = parse_bytes(memory_per_zone)
        return cls(
            tuple(
                Zone(cores_per_zone, memory, hugepages_2mi, hugepages_1gi, socket=i // zones_per_socket)
                for i in range(zones)
            ),
            threads_per_core=threads_per_core,
        )

    def validate(self) -> None:
        if not self.zones:
            raise ValueError("a topology needs at least one NUMA zone")
        if self.threads_per_core not in (1, 2, 4, 8):
            raise ValueError(f"threads_per_core must be 1, 2, 4 or 8, not {self.threads_per_core}")
        if sum(z.cores for z in self.zones) == 0:
            raise ValueError("a topology needs at least one CPU")
        if all(z.memory == 0 for z in self.zones):
            raise ValueError("a topology needs memory in at least one zone")
        for i, zone in enumerate(self.zones):
            if zone.cores < 0 or zone.memory < 0 or zone.hugepages_2mi < 0 or zone.hugepages_1gi < 0:
                raise ValueError(f"zone {i}: negative cores, memory or hugepages")
            if zone.hugepages_bytes > zone.memory:
                raise ValueError(
                    f"zone {i}: hugepages ({format_bytes(zone.hugepages_bytes)}) exceed its memory "
                    f"({format_bytes(zone.memory)}); memory counts the hugepages, as MemTotal does"
                )
        n = len(self.zones)
        if self.distances is not None:
            if len(self.distances) != n or any(len(row) != n for row in self.distances):
                raise ValueError(f"distances must be a {n}x{n} matrix")
            for i in range(n):
                if self.distances[i][i] != 10:
                    raise ValueError("distances: a zone's distance to itself is 10 (SLIT)")
                for j in range(n):
                    if i != j and self.distances[i][j] <= 10:
                        raise ValueError(f"distances: {i}->{j} must be greater than 10")

    # -- derived views ---------------------------------------------------------------------------

    @property
    def total_cores(self) -> int:
        return sum(z.cores for z in self.zones)

    @property
    def cpu_count(self) -> int:
        return self.total_cores * self.threads_per_core

    @property
    def memory(self) -> int:
        return sum(z.memory for z in self.zones)

    def cpus(self, zone: int) -> tuple[int, ...]:
        return self._cpus_by_zone[zone]

    def all_cpus(self) -> list[int]:
        return list(range(self.cpu_count))

    def socket_of_zone(self, zone: int) -> int:
        socket = self.zones[zone].socket
        return zone if socket is None else socket

    def zone_of_cpu(self, cpu: int) -> int:
        for i, cpus in enumerate(self._cpus_by_zone):
            if cpu in cpus:
                return i
        raise ValueError(f"no CPU {cpu} in this topology ({self.cpu_count} CPUs)")

    def core_of_cpu(self, cpu: int) -> int:
        """Machine-wide physical core index of a CPU."""
        return cpu % self.total_cores

    def siblings(self, cpu: int) -> list[int]:
        core = self.core_of_cpu(cpu)
        return [core + t * self.total_cores for t in range(self.threads_per_core)]

    def core_id(self, cpu: int) -> int:
        """``topology/core_id``: the core's index within its socket."""
        core = self.core_of_cpu(cpu)
        socket = self.socket_of_zone(self.zone_of_cpu(cpu))
        before = 0
        first = 0
        for i, zone in enumerate(self.zones):
            if first + zone.cores > core:
                break
            if self.socket_of_zone(i) == socket:
                before += zone.cores
            first += zone.cores
        return before + (core - first)

    def socket_cpus(self, socket: int) -> list[int]:
        return sorted(c for i in range(len(self.zones)) if self.socket_of_zone(i) == socket for c in self.cpus(i))

    def distance(self, i: int, j: int) -> int:
        if self.distances is not None:
            return self.distances[i][j]
        if i == j:
            return 10
        return 12 if self.socket_of_zone(i) == self.socket_of_zone(j) else 21

    def describe(self) -> str:
        """One line, e.g. ``2 zones x ... : 0[cpus 0-3, 4Gi] 1[cpus 4-7, 4Gi]``."""
        parts = []
        for i, zone in enumerate(self.zones):
            extra = ""
            if zone.hugepages_2mi or zone.hugepages_1gi:
                extra = f", hugepages 2Mi x{zone.hugepages_2mi} 1Gi x{zone.hugepages_1gi}"
            if zone.socket is not None and zone.socket != i:
                extra += f", socket {zone.socket}"
            parts.append(f"{i}[cpus {format_cpulist(self.cpus(i)) or '-'}, {format_bytes(zone.memory)}{extra}]")
        smt = f", SMT x{self.threads_per_core}" if self.threads_per_core > 1 else ""
        return f"{len(self.zones)} NUMA zones, {self.cpu_count} CPUs{smt}: " + " ".join(parts)

    # -- (de)serialisation -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        zones = []
        for zone in self.zones:
            entry: dict[str, Any] = {"cores": zone.cores, "memory": format_bytes(zone.memory)}
            if zone.hugepages_2mi:
                entry["hugepages2Mi"] = zone.hugepages_2mi
            if zone.hugepages_1gi:
                entry["hugepages1Gi"] = zone.hugepages_1gi
            if zone.socket is not None:
                entry["socket"] = zone.socket
            zones.append(entry)
        out: dict[str, Any] = {"zones": zones, "threadsPerCore": self.threads_per_core}
        if self.distances is not None:
            out["distances"] = [list(row) for row in self.distances]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Topology:
        """Inverse of :meth:`to_dict` (the YAML a ``--topology`` file holds)."""
        unknown = set(data) - {"zones", "threadsPerCore", "distances"}
        if unknown:
            raise ValueError(f"unknown topology fields: {sorted(unknown)}")
        zones = []
        for i, entry in enumerate(data["zones"]):
            extra = set(entry) - {"cores", "memory", "hugepages2Mi", "hugepages1Gi", "socket"}
            if extra:
                raise ValueError(f"zone {i}: unknown fields {sorted(extra)}")
            zones.append(
                Zone(
                    cores=int(entry["cores"]),
                    memory=parse_bytes(entry["memory"]),
                    hugepages_2mi=int(entry.get("hugepages2Mi", 0)),
                    hugepages_1gi=int(entry.get("hugepages1Gi", 0)),
                    socket=None if entry.get("socket") is None else int(entry["socket"]),
                )
            )
        distances = data.get("distances")
        return cls(
            tuple(zones),
            threads_per_core=int(data.get("threadsPerCore", 1)),
            distances=None if distances is None else tuple(tuple(int(v) for v in row) for row in distances),
        )


# -- the fake host files ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FakeHost:
    """Where :func:`write_fake_host` put each tree; each is bind-mounted over the real path."""

    cpu: Path  # over /sys/devices/system/cpu
    node: Path  # over /sys/devices/system/node
    hugepages: Path  # over /sys/kernel/mm/hugepages
    meminfo: Path  # over /proc/meminfo
    cpuinfo: Path  # over /proc/cpuinfo

    def mounts(self) -> list[tuple[Path, str]]:
        return [
            (self.cpu, "/sys/devices/system/cpu"),
            (self.node, "/sys/devices/system/node"),
            (self.hugepages, "/sys/kernel/mm/hugepages"),
            (self.meminfo, "/proc/meminfo"),
            (self.cpuinfo, "/proc/cpuinfo"),
        ]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _link(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)


_CACHES: Sequence[tuple[int, str, int, str]] = (
    # (index, type, level, size) per core; index 3 (L3) is shared by a zone
    (0, "Data", 1, "48K"),
    (1, "Instruction", 1, "32K"),
    (2, "Unified", 2, "2048K"),
)
_L3_SIZE = "32768K"


def _kb(value: int) -> int:
    return value // KIB


def write_fake_host(topology: Topology, root: Path) -> FakeHost:
    """Write the fake trees under ``root`` (which must not exist yet) and say where they are."""
    root.mkdir(parents=True)
    host = FakeHost(root / "cpu", root / "node", root / "hugepages", root / "meminfo", root / "cpuinfo")
    _write_cpu_tree(topology, host.cpu)
    _write_node_tree(topology, host.node)
    _write_hugepages_tree(topology, host.hugepages)
    _write(host.meminfo, fake_meminfo(topology))
    try:
        real = Path("/proc/cpuinfo").read_text()
    except OSError:
        real = ""
    _write(host.cpuinfo, fake_cpuinfo(topology, real))
    return host


_CPUINFO_TOPOLOGY = ("processor", "physical id", "siblings", "core id", "cpu cores", "apicid", "initial apicid")


def fake_cpuinfo(topology: Topology, real: str) -> str:
    """A /proc/cpuinfo of the fake CPUs: each with its socket (``physical id``) and core, the other
    fields from the host's first CPU."""
    first = real.split("\n\n", 1)[0].splitlines()
    template = [line for line in first if line.split(":", 1)[0].strip() not in _CPUINFO_TOPOLOGY]
    blocks = []
    for cpu in range(topology.cpu_count):
        socket = topology.socket_of_zone(topology.zone_of_cpu(cpu))
        in_socket = len(topology.socket_cpus(socket))
        head = [
            f"processor\t: {cpu}",
            f"physical id\t: {socket}",
            f"siblings\t: {in_socket}",
            f"core id\t\t: {topology.core_id(cpu)}",
            f"cpu cores\t: {in_socket // topology.threads_per_core}",
        ]
        blocks.append("\n".join(head[:1] + template[:1] + head[1:] + template[1:]))
    return "\n\n".join(blocks) + "\n\n"


def _write_cpu_tree(topology: Topology, cpu_dir: Path) -> None:
    n = topology.cpu_count
    everything = format_cpulist(range(n)) + "\n"
    for name in ("online", "possible", "present"):
        _write(cpu_dir / name, everything)
    _write(cpu_dir / "offline", "\n")
    _write(cpu_dir / "isolated", "\n")
    _write(cpu_dir / "kernel_max", f"{max(n - 1, 0)}\n")
    for cpu in range(n):
        zone = topology.zone_of_cpu(cpu)
        socket = topology.socket_of_zone(zone)
        d = cpu_dir / f"cpu{cpu}"
        _write(d / "online", "1\n")
        _link(d / f"node{zone}", f"../../node/node{zone}")
        siblings = topology.siblings(cpu)
        package = topology.socket_cpus(socket)
        zone_cpus = list(topology.cpus(zone))
        topo = d / "topology"
        _write(topo / "core_id", f"{topology.core_id(cpu)}\n")
        _write(topo / "physical_package_id", f"{socket}\n")
        _write(topo / "die_id", "0\n")
        _write(topo / "cluster_id", f"{topology.core_of_cpu(cpu)}\n")
        for name, cpus in (
            ("thread_siblings", siblings),
            ("core_cpus", siblings),
            ("cluster_cpus", siblings),
            ("core_siblings", package),
            ("package_cpus", package),
            ("die_cpus", package),
        ):
            _write(topo / name, format_cpumask(cpus, n) + "\n")
            _write(topo / f"{name}_list", format_cpulist(cpus) + "\n")
        core = topology.core_of_cpu(cpu)
        for index, kind, level, size in _CACHES:
            c = d / "cache" / f"index{index}"
            _write(c / "id", f"{core}\n")
            _write(c / "type", kind + "\n")
            _write(c / "level", f"{level}\n")
            _write(c / "size", size + "\n")
            _write(c / "shared_cpu_map", format_cpumask(siblings, n) + "\n")
            _write(c / "shared_cpu_list", format_cpulist(siblings) + "\n")
        l3 = d / "cache" / "index3"
        _write(l3 / "id", f"{zone}\n")
        _write(l3 / "type", "Unified\n")
        _write(l3 / "level", "3\n")
        _write(l3 / "size", _L3_SIZE + "\n")
        _write(l3 / "shared_cpu_map", format_cpumask(zone_cpus, n) + "\n")
        _write(l3 / "shared_cpu_list", format_cpulist(zone_cpus) + "\n")


def _write_node_tree(topology: Topology, node_dir: Path) -> None:
    n = topology.cpu_count
    ids = range(len(topology.zones))
    with_cpus = [i for i in ids if topology.zones[i].cores]
    with_memory = [i for i in ids if topology.zones[i].memory]
    _write(node_dir / "online", format_cpulist(ids) + "\n")
    _write(node_dir / "possible", format_cpulist(ids) + "\n")
    _write(node_dir / "has_cpu", format_cpulist(with_cpus) + "\n")
    _write(node_dir / "has_memory", format_cpulist(with_memory) + "\n")
    _write(node_dir / "has_normal_memory", format_cpulist(with_memory) + "\n")
    _write(node_dir / "has_generic_initiator", "\n")
    for i, zone in enumerate(topology.zones):
        d = node_dir / f"node{i}"
        cpus = topology.cpus(i)
        _write(d / "cpulist", format_cpulist(cpus) + "\n")
        _write(d / "cpumap", format_cpumask(cpus, n) + "\n")
        for cpu in cpus:
            _link(d / f"cpu{cpu}", f"../../cpu/cpu{cpu}")
        _write(d / "distance", " ".join(str(topology.distance(i, j)) for j in ids) + "\n")
        _write(d / "meminfo", _node_meminfo(i, zone))
        for size_kb, count in ((2048, zone.hugepages_2mi), (1048576, zone.hugepages_1gi)):
            h = d / "hugepages" / f"hugepages-{size_kb}kB"
            _write(h / "nr_hugepages", f"{count}\n")
            _write(h / "free_hugepages", f"{count}\n")
            _write(h / "surplus_hugepages", "0\n")


def _node_meminfo(node: int, zone: Zone) -> str:
    total = _kb(zone.memory)
    free = _kb(zone.memory - zone.hugepages_bytes)
    rows = [
        ("MemTotal", f"{total} kB"),
        ("MemFree", f"{free} kB"),
        ("MemUsed", f"{total - free} kB"),
        ("HugePages_Total", str(zone.hugepages_2mi)),
        ("HugePages_Free", str(zone.hugepages_2mi)),
        ("HugePages_Surp", "0"),
    ]
    return "".join(f"Node {node} {key + ':':<16}{value:>12}\n" for key, value in rows)


def _write_hugepages_tree(topology: Topology, hugepages_dir: Path) -> None:
    for size_kb, count in (
        (2048, sum(z.hugepages_2mi for z in topology.zones)),
        (1048576, sum(z.hugepages_1gi for z in topology.zones)),
    ):
        h = hugepages_dir / f"hugepages-{size_kb}kB"
        for name, value in (
            ("nr_hugepages", count),
            ("nr_hugepages_mempolicy", count),
            ("free_hugepages", count),
            ("resv_hugepages", 0),
            ("surplus_hugepages", 0),
            ("nr_overcommit_hugepages", 0),
        ):
            _write(h / name, f"{value}\n")


def fake_meminfo(topology: Topology) -> str:
    """A /proc/meminfo whose MemTotal is the zones' sum (a frozen snapshot: only totals matter)."""
    total = _kb(topology.memory)
    huge_2mi = sum(z.hugepages_2mi for z in topology.zones)
    huge = _kb(sum(z.hugepages_bytes for z in topology.zones))
    free = total - huge
    rows = [
        ("MemTotal", total),
        ("MemFree", free),
        ("MemAvailable", free),
        ("Buffers", 0),
        ("Cached", 0),
        ("SwapCached", 0),
        ("Active", 0),
        ("Inactive", 0),
        ("SwapTotal", 0),
        ("SwapFree", 0),
        ("Shmem", 0),
        ("CommitLimit", free),
        ("Committed_AS", 0),
    ]
    lines = [f"{key + ':':<16}{value:>8} kB\n" for key, value in rows]
    lines += [
        f"{'HugePages_Total:':<16}{huge_2mi:>8}\n",
        f"{'HugePages_Free:':<16}{huge_2mi:>8}\n",
        f"{'HugePages_Rsvd:':<16}{0:>8}\n",
        f"{'HugePages_Surp:':<16}{0:>8}\n",
        f"{'Hugepagesize:':<16}{2048:>8} kB\n",
        f"{'Hugetlb:':<16}{huge:>8} kB\n",
    ]
    return "".join(lines)
