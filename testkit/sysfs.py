"""Builders of sysfs trees modelled on real machines, written under a temporary directory."""

from dataclasses import dataclass, field
from pathlib import Path

from toposched.exporter.sysfs import format_cpulist


@dataclass
class FakeNode:
    id: int
    cpus: list[int]
    memory_kb: int
    hugepages: dict[int, int] = field(default_factory=dict)
    """Page size in kB -> nr_hugepages."""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def build(
    root: Path,
    nodes: list[FakeNode],
    distances: list[list[int]] | None = None,
    nics: dict[str, tuple[int, int]] | None = None,
    offline_cpus: tuple[int, ...] = (),
) -> Path:
    """A /sys under ``root`` (returned); ``nics`` maps name -> (speed Mb/s, numa node)."""
    sys = root / "sys"
    all_cpus = sorted(c for n in nodes for c in n.cpus)
    write(sys / "devices/system/cpu/online", format_cpulist([c for c in all_cpus if c not in offline_cpus]) + "\n")
    ids = [n.id for n in nodes]
    write(sys / "devices/system/node/online", format_cpulist(ids) + "\n")
    write(sys / "devices/system/node/possible", format_cpulist(ids) + "\n")
    for i, n in enumerate(nodes):
        d = sys / f"devices/system/node/node{n.id}"
        write(d / "cpulist", format_cpulist(n.cpus) + "\n")
        write(
            d / "meminfo",
            f"Node {n.id} MemTotal:       {n.memory_kb} kB\nNode {n.id} MemFree:        {n.memory_kb // 2} kB\n",
        )
        row = distances[i] if distances else [10 if j == i else 21 for j in range(len(nodes))]
        write(d / "distance", " ".join(map(str, row)) + "\n")
        for size_kb, count in n.hugepages.items():
            write(d / f"hugepages/hugepages-{size_kb}kB/nr_hugepages", f"{count}\n")
            write(d / f"hugepages/hugepages-{size_kb}kB/free_hugepages", f"{count}\n")
    for name, (speed, numa) in (nics or {}).items():
        write(sys / f"class/net/{name}/speed", f"{speed}\n")
        write(sys / f"class/net/{name}/device/numa_node", f"{numa}\n")
        write(sys / f"bus/pci/devices/0000:{len(name):02x}:00.0/numa_node", f"{numa}\n")
    write(sys / "class/net/lo/speed", "-1\n")  # virtual: no device link
    return sys


def two_socket(root: Path) -> Path:
    """2 x 16 cores / 32 threads, 64 GB per socket, 4 x 1Gi + 512 x 2Mi hugepages per node, a 25G NIC."""
    nodes = [
        FakeNode(0, list(range(0, 16)) + list(range(32, 48)), 65536000, {1048576: 4, 2048: 512}),
        FakeNode(1, list(range(16, 32)) + list(range(48, 64)), 65536000, {1048576: 4, 2048: 512}),
    ]
    return build(root, nodes, nics={"ens1f0": (25000, 0)})


def eight_node(root: Path) -> Path:
    """8 NUMA nodes x 32 CPUs (256 CPUs), a typical 2-socket EPYC in NPS4 mode."""
    nodes = [
        FakeNode(
            i, list(range(i * 16, i * 16 + 16)) + list(range(128 + i * 16, 128 + i * 16 + 16)), 33554432, {2048: 256}
        )
        for i in range(8)
    ]
    distances = [[10 if i == j else (12 if i // 4 == j // 4 else 32) for j in range(8)] for i in range(8)]
    return build(root, nodes, distances=distances)
