"""A garbled sysfs tree or kubelet configuration: one clear error naming the file, or a warning and
"unknown" for what only refines the picture; never a hang, never a value no machine has."""

import os
import re
import time
from pathlib import Path

import pytest

from testkit.sysfs import FakeNode, build, two_socket, write
from toposched.exporter.kubeletconfig import KubeletConfig, KubeletConfigError, load
from toposched.exporter.sysfs import SysfsError, parse_cpulist, read_machine
from toposched.exporter.topology import Inputs
from toposched.exporter.topology import build as build_nrt

NODE0 = "devices/system/node/node0"


def _text(content: str | bytes) -> object:
    def make(path: Path) -> None:
        path.unlink(missing_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)

    return make


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize(
    ("relative", "make", "message"),
    [
        (f"{NODE0}/cpulist", _text("0-99999999\n"), "names id 99999999, beyond the largest a machine has (8191)"),
        (f"{NODE0}/cpulist", _fifo, "not a regular file"),
        (f"{NODE0}/cpulist", _directory, "is a directory, not a file"),
        (f"{NODE0}/meminfo", _text(b"\xff\xfe\x00binary"), "not UTF-8 text"),
        (f"{NODE0}/meminfo", _text("Node 0 MemTotal: 99999999999999999 kB\n"), "out of range"),
        (f"{NODE0}/meminfo", _text("Node 0 MemTotal: --5 kB\n"), "'--5' is not a number"),
        (f"{NODE0}/meminfo", _text("x" * 70_000), "larger than 65536 bytes"),
        (f"{NODE0}/hugepages/hugepages-2048kB/nr_hugepages", _text("\u00b2\n"), "'²' is not a number"),
        (f"{NODE0}/hugepages/hugepages-2048kB/nr_hugepages", _text("-1\n"), "-1 is out of range"),
        ("devices/system/node/node1/cpulist", _text("0-3\n"), "CPU 0 is also listed by node0"),
        ("devices/system/node/online", _text("0-5000\n"), "names id 5000, beyond the largest a machine has (1023)"),
    ],
    ids=[
        "cpulist-0-99999999",
        "cpulist-fifo",
        "cpulist-directory",
        "meminfo-binary",
        "meminfo-beyond-a-machine",
        "meminfo-double-minus",
        "meminfo-huge-file",
        "hugepages-superscript",
        "hugepages-negative",
        "cpu-in-two-nodes",
        "more-numa-nodes-than-linux",
    ],
)
def test_garbled_sysfs_is_one_error_naming_the_file(tmp_path: Path, relative: str, make: object, message: str) -> None:
    sys = two_socket(tmp_path)
    make(sys / relative)  # type: ignore[operator]
    started = time.monotonic()
    with pytest.raises(SysfsError, match=re.escape(message)) as info:
        read_machine(sys)
    assert time.monotonic() - started < 2
    assert relative.split("/")[-1] in str(info.value) or "node" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("relative", "content", "warning"),
    [
        ("class/net/ens1f0/speed", "\u00b2", "'²' is not a link speed in Mb/s; speed unknown"),
        ("class/net/ens1f0/speed", "99999999999", "is not a link speed in Mb/s"),
        ("class/net/ens1f0/device/numa_node", "--5", "'--5' is not a NUMA node; no affinity assumed"),
        ("class/net/ens1f0/device/numa_node", "\u00b2", "'²' is not a NUMA node"),
        (f"{NODE0}/distance", "10 -21", "'-21' is not a distance to node 1 (10 to itself, 11 to 255 to others)"),
        (f"{NODE0}/distance", "11 21", "'11' is not a distance to node 0"),
        (f"{NODE0}/distance", "10 256", "'256' is not a distance to node 1"),
    ],
    ids=["speed-superscript", "speed-beyond-10T", "numa-double-minus", "numa-superscript", "negative-distance",
         "local-distance-not-10", "distance-above-255"],
)  # fmt: skip
def test_what_only_refines_the_picture_is_a_warning_and_unknown(
    tmp_path: Path, relative: str, content: str, warning: str
) -> None:
    sys = two_socket(tmp_path)
    write(sys / relative, content + "\n")
    machine = read_machine(sys)
    assert any(warning in w for w in machine.warnings), machine.warnings
    nrt = build_nrt(Inputs(node="n", machine=machine, kubelet=KubeletConfig())).to_dict()
    for zone in nrt["zones"]:
        assert all(10 <= c["value"] <= 255 for c in zone.get("costs") or [])  # never published as it was


def test_hugepages_of_a_size_linux_does_not_have_are_ignored(tmp_path: Path) -> None:
    sys = build(tmp_path, [FakeNode(0, [0, 1], 8000000, {2048: 4})])
    write(sys / f"{NODE0}/hugepages/hugepages-0kB/nr_hugepages", "5\n")
    write(sys / f"{NODE0}/hugepages/hugepages-3kB/nr_hugepages", "5\n")
    machine = read_machine(sys)
    assert machine.nodes[0].hugepages == {"hugepages-2Mi": 4 * 2**21}
    assert sum("not a huge page size Linux has" in w for w in machine.warnings) == 2
    nrt = build_nrt(Inputs(node="n", machine=machine, kubelet=KubeletConfig())).to_dict()
    names = {r["name"] for z in nrt["zones"] for r in z["resources"]}
    assert "hugepages-0Ei" not in names


@pytest.mark.parametrize("text", ["0-99999999", "99999999-0", "1-2-3", "\u00b2", "0x1", "+1"], ids=str)
def test_cpulists_no_machine_has_are_refused_at_once(text: str) -> None:
    started = time.monotonic()
    with pytest.raises(SysfsError):
        parse_cpulist(text)
    assert time.monotonic() - started < 0.1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("reservedMemory: 5\n", "reservedMemory: expected a list"),
        ("reservedMemory: [{numaNode: 5000, limits: {memory: 1Gi}}]\n", "numaNode: 5000 is not a NUMA node id"),
        ("evictionHard: {memory.available: lots}\n", "evictionHard.memory.available: 'lots' is not a Kubernetes"),
        ("evictionHard: [1]\n", "evictionHard: expected a map"),
        ("systemReserved: {memory: 1e999999}\n", "systemReserved: '1e999999' is more than any machine has"),
        ("kubeReserved: {cpu: '-1'}\n", "kubeReserved: cpu -1 is negative"),
        ("topologyManagerPolicyOptions: [a]\n", "topologyManagerPolicyOptions: expected a map"),
        ("topologyManagerPolicy: strict\n", "topologyManagerPolicy: 'strict' is not one of none, best-effort"),
        ("cpuManagerPolicy: [static]\n", "cpuManagerPolicy: a list is not one of none, static"),
        ("reservedSystemCPUs: 0-99999999\n", "reservedSystemCPUs: '0-99999999' names id 99999999"),
        ("reservedSystemCPUs: {a: 1}\n", "reservedSystemCPUs: expected a CPU list"),
        ("a: 1\n---\nb: 2\n", "not a KubeletConfiguration"),
    ],
    ids=[
        "reserved-memory-a-number",
        "numa-node-beyond-linux",
        "eviction-not-a-quantity",
        "eviction-a-list",
        "reserved-beyond-a-machine",
        "reserved-negative",
        "options-a-list",
        "unknown-policy",
        "policy-a-list",
        "reserved-cpus-0-99999999",
        "reserved-cpus-a-map",
        "two-documents",
    ],
)
def test_bad_kubelet_config_is_one_line_naming_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(content)
    with pytest.raises(KubeletConfigError, match=re.escape(message)) as info:
        load(path)
    assert str(info.value).startswith(str(path))
    assert "\n" not in str(info.value)


def test_kubelet_config_that_is_a_fifo_does_not_hang(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    os.mkfifo(path)
    with pytest.raises(KubeletConfigError, match="not a regular file"):
        load(path)
