from pathlib import Path

import pytest

from testkit.sysfs import FakeNode, build, eight_node, two_socket, write
from toposched.exporter.sysfs import SysfsError, format_cpulist, hugepage_resource, parse_cpulist, read_machine


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-3,8,10-11\n", (0, 1, 2, 3, 8, 10, 11)), ("\n", ()), ("5", (5,)), ("0-1,1-2", (0, 1, 2))],
    ids=["ranges", "empty", "single", "overlap"],
)
def test_parse_cpulist(text: str, cpus: tuple[int, ...]) -> None:
    assert parse_cpulist(text) == cpus


@pytest.mark.parametrize("text", ["a-b", "3-1", "1,,x", "-2"], ids=["letters", "backwards", "junk", "negative"])
def test_garbled_cpulist_is_a_clear_error(text: str) -> None:
    with pytest.raises(SysfsError, match="is not a CPU list"):
        parse_cpulist(text, "node0/cpulist")


def test_format_cpulist_round_trips() -> None:
    assert format_cpulist([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert parse_cpulist(format_cpulist([3, 1, 2, 9])) == (1, 2, 3, 9)


@pytest.mark.parametrize(
    ("size_kb", "name"),
    [(2048, "hugepages-2Mi"), (1048576, "hugepages-1Gi"), (64, "hugepages-64Ki"), (32768, "hugepages-32Mi")],
    ids=["2Mi", "1Gi", "64Ki-arm64", "32Mi-arm64"],
)
def test_hugepage_resource_names(size_kb: int, name: str) -> None:
    assert hugepage_resource(size_kb) == name


def test_two_socket_machine(tmp_path: Path) -> None:
    m = read_machine(two_socket(tmp_path))
    assert m.numa
    assert [n.id for n in m.nodes] == [0, 1]
    assert len(m.nodes[0].cpus) == 32
    assert m.nodes[1].cpus[:2] == (16, 17)
    assert m.nodes[0].memory_bytes == 65536000 * 1024
    assert m.nodes[0].hugepages == {"hugepages-1Gi": 4 * 2**30, "hugepages-2Mi": 512 * 2**21}
    assert m.nodes[1].distances == {0: 21, 1: 10}
    assert [(n.name, n.speed_bps, n.numa_node) for n in m.nics] == [("ens1f0", 25 * 10**9, 0)]
    assert m.warnings == []


def test_single_numa_node(tmp_path: Path) -> None:
    m = read_machine(build(tmp_path, [FakeNode(0, list(range(8)), 16000000)]))
    assert [(n.id, len(n.cpus), n.distances) for n in m.nodes] == [(0, 8, {0: 10})]


def test_four_nodes_distance_matrix(tmp_path: Path) -> None:
    dist = [[10, 16, 16, 16], [16, 10, 16, 16], [16, 16, 10, 16], [16, 16, 16, 10]]
    nodes = [FakeNode(i, list(range(i * 4, i * 4 + 4)), 8000000) for i in range(4)]
    m = read_machine(build(tmp_path, nodes, distances=dist))
    assert m.nodes[2].distances == {0: 16, 1: 16, 2: 10, 3: 16}


def test_eight_nodes_256_cpus(tmp_path: Path) -> None:
    m = read_machine(eight_node(tmp_path))
    assert len(m.nodes) == 8
    assert sum(len(n.cpus) for n in m.nodes) == 256
    assert m.nodes[5].distances[4] == 12
    assert m.nodes[5].distances[0] == 32


def test_sparse_ids_map_distances_by_online_position(tmp_path: Path) -> None:
    # Nodes 0 and 2 online (1 is a hole): node 2's row "20 10" means 0 -> 20, 2 -> 10.
    nodes = [FakeNode(0, [0, 1], 4000000), FakeNode(2, [2, 3], 4000000)]
    m = read_machine(build(tmp_path, nodes, distances=[[10, 20], [20, 10]]))
    assert [n.id for n in m.nodes] == [0, 2]
    assert m.nodes[1].distances == {0: 20, 2: 10}
    assert m.cpu_to_node() == {0: 0, 1: 0, 2: 2, 3: 2}


def test_memory_only_node(tmp_path: Path) -> None:
    nodes = [FakeNode(0, [0, 1, 2, 3], 8000000), FakeNode(1, [], 32000000)]
    m = read_machine(build(tmp_path, nodes))
    assert m.nodes[1].cpus == ()
    assert m.nodes[1].memory_bytes == 32000000 * 1024


def test_offline_cpus_are_not_counted(tmp_path: Path) -> None:
    m = read_machine(build(tmp_path, [FakeNode(0, [0, 1, 2, 3], 8000000)], offline_cpus=(3,)))
    assert m.nodes[0].cpus == (0, 1, 2)


def test_kernel_without_numa(tmp_path: Path) -> None:
    sys = tmp_path / "sys"
    write(sys / "devices/system/cpu/online", "0-3\n")
    write(sys / "kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "10\n")
    write(tmp_path / "proc/meminfo", "MemTotal:       16384000 kB\nMemFree:  1 kB\n")
    m = read_machine(sys)
    assert not m.numa
    (node,) = m.nodes
    assert (node.id, node.cpus, node.memory_bytes, node.distances) == (0, (0, 1, 2, 3), 16384000 * 1024, {0: 10})
    assert node.hugepages == {"hugepages-2Mi": 10 * 2**21}
    assert "no NUMA support" in m.warnings[0]


def test_missing_meminfo_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    sys = two_socket(tmp_path)
    (sys / "devices/system/node/node1/meminfo").unlink()
    m = read_machine(sys)
    assert m.nodes[1].memory_bytes == 0
    assert any("node1/meminfo missing" in w for w in m.warnings)


def test_distance_row_of_the_wrong_length_drops_costs(tmp_path: Path) -> None:
    sys = two_socket(tmp_path)
    write(sys / "devices/system/node/node0/distance", "10 21 31\n")
    m = read_machine(sys)
    assert m.nodes[0].distances == {}
    assert any("3 values for 2 online nodes" in w for w in m.warnings)


@pytest.mark.parametrize(
    ("relative", "content", "message"),
    [
        ("devices/system/node/node0/cpulist", "zero-three\n", "is not a CPU list"),
        ("devices/system/node/node0/meminfo", "Node 0 MemTotal: lots kB\n", "'lots' is not a number"),
        ("devices/system/node/node0/meminfo", "nothing useful\n", "no MemTotal line"),
        ("devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages", "many\n", "'many' is not a number"),
    ],
    ids=["cpulist", "meminfo-number", "meminfo-no-total", "hugepages"],
)
def test_garbled_files_name_the_file(tmp_path: Path, relative: str, content: str, message: str) -> None:
    sys = two_socket(tmp_path)
    write(sys / relative, content)
    with pytest.raises(SysfsError, match=message) as info:
        read_machine(sys)
    assert "node0" in str(info.value)


def test_this_machines_real_sysfs() -> None:
    m = read_machine(Path("/sys"), total_memory=lambda: 1)
    assert m.nodes
    assert sum(len(n.cpus) for n in m.nodes) >= 1
    assert all(n.memory_bytes > 0 for n in m.nodes if n.cpus)
