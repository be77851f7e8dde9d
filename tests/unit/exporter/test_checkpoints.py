"""The kubelet's CPU and Memory Manager checkpoints, and the NRT figures taken from them."""

import json
from decimal import Decimal
from pathlib import Path

import pytest

from testkit.realnode.topology import Topology, write_fake_host
from testkit.sysfs import FakeNode, build
from toposched.apis.constants import (
    NRT_ATTR_MEMORY_NUMA_GROUPS,
    NRT_ATTR_THREADS_PER_CORE,
    NRT_ZONE_ATTR_FREE_CORES,
    NRT_ZONE_ATTR_MEMORY_CELLS,
    NRT_ZONE_ATTR_SOCKET,
)
from toposched.exporter.checkpoints import (
    CheckpointError,
    Checkpoints,
    parse_cpu_state,
    parse_memory_state,
    read,
    stale_pods,
)
from toposched.exporter.kubeletconfig import parse as parse_kubelet
from toposched.exporter.sysfs import Machine, parse_cpulist, read_machine
from toposched.exporter.topology import Allocatable, ContainerUse, Inputs, MemoryBlock, PodUse
from toposched.exporter.topology import build as build_nrt
from toposched.schedhook.placement.kubelet.topologymanager import mask
from toposched.schedhook.placement.parse import from_nrt

GI = 2**30


def memory_state(zones: dict[int, tuple[int, int, list[int], int]]) -> str:
    """numa -> (allocatable, free, cells, assignments) of ``memory``."""
    return json.dumps(
        {
            "policyName": "Static",
            "machineState": {
                str(n): {
                    "numberOfAssignments": assigned,
                    "memoryMap": {
                        "memory": {"total": a, "systemReserved": 0, "allocatable": a, "reserved": a - f, "free": f}
                    },
                    "cells": cells,
                }
                for n, (a, f, cells, assigned) in zones.items()
            },
            "checksum": 1,
        }
    )


def test_cpu_state() -> None:
    state = parse_cpu_state('{"policyName":"static","defaultCpuSet":"0,3-5","entries":{"u":{"init":"1-2"}}}')
    assert state.policy == "static"
    assert state.default_cpus == frozenset({0, 3, 4, 5})


def test_memory_state_and_its_groups() -> None:
    state = parse_memory_state(
        memory_state({0: (4 * GI, GI, [0, 1], 2), 1: (4 * GI, 0, [0, 1], 2), 2: (GI, GI, [2], 0)})
    )
    assert state.zones[0].free == {"memory": Decimal(GI)}
    assert [(z.cells, z.assignments) for z in state.zones.values()] == [((0, 1), 2), ((0, 1), 2), ((2,), 0)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not JSON"),
        ("[]", "not a JSON object"),
        ('{"policyName": "static"}', "must be strings"),
        ('{"policyName": "static", "defaultCpuSet": "x"}', "defaultCpuSet"),
    ],
    ids=["garbage", "list", "no-default-set", "bad-cpulist"],
)
def test_bad_cpu_state_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):  # CheckpointError, or the cpulist parser's error
        parse_cpu_state(text)


@pytest.mark.parametrize(
    "machine",
    [
        {"x": {}},
        {"0": {"memoryMap": {"memory": {"allocatable": -1, "free": 0}}}},
        {"0": {"memoryMap": {"memory": {"allocatable": 1, "free": 0}}, "cells": ["a"]}},
        {"0": {"memoryMap": [], "cells": [0]}},
    ],
    ids=["not-a-numa-id", "negative-size", "bad-cells", "map-not-an-object"],
)
def test_bad_memory_state_is_refused(machine: dict[str, object]) -> None:
    with pytest.raises(CheckpointError):
        parse_memory_state(json.dumps({"policyName": "Static", "machineState": machine}))


def test_read_ignores_what_it_cannot_use(tmp_path: Path) -> None:
    (tmp_path / "cpu_manager_state").write_text("{broken")
    (tmp_path / "memory_manager_state").write_text(memory_state({0: (GI, GI, [0], 0)}))
    found = read(tmp_path)
    assert found.cpu is None
    assert found.memory is not None
    assert len(found.problems) == 1
    assert "cpu_manager_state" in found.problems[0]
    assert read(tmp_path / "missing") == Checkpoints()


def test_the_nrt_counts_what_init_containers_hold(tmp_path: Path) -> None:
    """An init container's CPUs and memory are in the checkpoints only: PodResources lists the app
    container (1 CPU it reused from the init container's 3) and nothing of the init container."""
    sysfs = build(tmp_path, [FakeNode(0, [0, 1, 2, 3], 4 * 1024 * 1024), FakeNode(1, [4, 5, 6, 7], 4 * 1024 * 1024)])
    app = ContainerUse(cpu_ids=(1,), memory=(MemoryBlock("memory", GI // 2, (0,)),), name="app")
    memory = json.loads(memory_state({0: (4 * GI, 3 * GI, [0], 2), 1: (4 * GI, 4 * GI, [1], 0)}))
    memory["entries"] = {
        "p": {
            "init": [{"numaAffinity": [0], "type": "memory", "size": GI}],
            "app": [{"numaAffinity": [0], "type": "memory", "size": GI // 2}],
        }
    }
    inputs = Inputs(
        node="n",
        machine=read_machine(sysfs),
        kubelet=parse_kubelet(
            {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0", "memoryManagerPolicy": "Static"}
        ),
        allocatable=Allocatable(
            cpu_ids=(1, 2, 3, 4, 5, 6, 7),
            memory=(MemoryBlock("memory", 4 * GI, (0,)), MemoryBlock("memory", 4 * GI, (1,))),
        ),
        pods=[PodUse("ns", "p", (app,))],
        checkpoints=Checkpoints(
            cpu=parse_cpu_state(
                '{"policyName":"static","defaultCpuSet":"0,4-7","entries":{"p":{"init":"1-3","app":"1"}}}'
            ),
            memory=parse_memory_state(json.dumps(memory)),
        ),
    )

    def available(nrt_inputs: Inputs) -> dict[str, tuple[str, str]]:
        nrt = build_nrt(nrt_inputs)
        out = {}
        for zone in nrt.zones:
            values = {r.name: str(r.available) for r in zone.resources or []}
            out[zone.name] = (values["cpu"], values["memory"])
        return out

    assert available(inputs) == {"node-0": ("0", str(3 * GI)), "node-1": ("4", str(4 * GI))}
    without = Inputs(**{**inputs.__dict__, "checkpoints": None})
    assert available(without) == {"node-0": ("2", str(3 * GI + GI // 2)), "node-1": ("4", str(4 * GI))}


def test_a_rejected_pods_leftovers_are_not_counted() -> None:
    """The kubelet rejected pod ``gone`` after its sidecar got CPU 1: the checkpoint holds it until
    the kubelet's next admission or reconcile, PodResources does not list it: it is stale."""
    state = parse_cpu_state(
        json.dumps(
            {
                "policyName": "static",
                "defaultCpuSet": "0,4-7",
                "entries": {"live": {"app": "2-3"}, "gone": {"sidecar": "1"}},
            }
        )
    )
    listed = [[("app", frozenset({2, 3}), frozenset())]]
    assert stale_pods(Checkpoints(cpu=state), listed) == {"gone"}
    assert stale_pods(Checkpoints(cpu=state), []) == {"live", "gone"}


def test_a_pod_listed_between_its_cpu_and_memory_allocation_is_live() -> None:
    """make run, numa-4: PodResources was read after the CPU Manager gave cartservice CPUs 1-2 and
    before the Memory Manager gave it memory; the checkpoints, read a moment later, hold both. The
    pod is live: taken for stale, its CPUs and memory counted free while the fingerprint included
    it, and the next pod was sent to the same zone (a TopologyAffinityError)."""
    block = {"numaAffinity": [0], "type": "memory", "size": 256 * 2**20}
    cpu = parse_cpu_state(
        json.dumps({"policyName": "static", "defaultCpuSet": "0,3", "entries": {"cart": {"app": "1-2"}}})
    )
    memory = json.loads(memory_state({0: (4 * GI, 4 * GI - 256 * 2**20, [0], 1)}))
    memory["entries"] = {"cart": {"app": [block]}}
    checkpoints = Checkpoints(cpu=cpu, memory=parse_memory_state(json.dumps(memory)))
    assert stale_pods(checkpoints, [[("app", frozenset({1, 2}), frozenset())]]) == set()
    assert stale_pods(checkpoints, [[("app", frozenset({1, 2}), frozenset({("memory", 256 * 2**20, (0,))}))]]) == set()
    # Another container's CPUs, or another name, is another pod's: this one is stale.
    assert stale_pods(checkpoints, [[("app", frozenset({3}), frozenset())]]) == {"cart"}
    assert stale_pods(checkpoints, [[("sidecar", frozenset({1, 2}), frozenset())]]) == {"cart"}


def smt_machine(tmp_path: Path) -> Machine:
    """2 zones x 2 cores x 2 threads, written as the real nodes' fake sysfs is: zone 0 holds the
    cores {0,4} and {1,5}, zone 1 the cores {2,6} and {3,7}."""
    host = write_fake_host(Topology.uniform(zones=2, cores_per_zone=2, threads_per_core=2), tmp_path / "host")
    system = tmp_path / "sys" / "devices" / "system"
    system.mkdir(parents=True)
    (system / "cpu").symlink_to(host.cpu)
    (system / "node").symlink_to(host.node)
    return read_machine(tmp_path / "sys")


def test_whole_free_cores_and_memory_cells_per_zone(tmp_path: Path) -> None:
    """What the predictor needs beyond per-zone counts (oracle seed 3, cases 333 and 428): how many
    cores of each zone are wholly free (CPU 0 is reserved, CPU 4 held: zone 0 has one), and each
    zone's Memory Manager cells, which differ within the group 0-1 once zone 1 took single-zone
    memory."""
    machine = smt_machine(tmp_path)
    assert [n.cores for n in machine.nodes] == [((0, 4), (1, 5)), ((2, 6), (3, 7))]
    assert machine.threads_per_core == 2
    inputs = Inputs(
        node="n",
        machine=machine,
        kubelet=parse_kubelet(
            {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0", "memoryManagerPolicy": "Static"}
        ),
        allocatable=Allocatable(
            cpu_ids=(1, 2, 3, 4, 5, 6, 7),
            memory=(MemoryBlock("memory", 4 * GI, (0,)), MemoryBlock("memory", 4 * GI, (1,))),
        ),
        pods=[],
        checkpoints=Checkpoints(
            cpu=parse_cpu_state('{"policyName":"static","defaultCpuSet":"0-3,5-7"}'),
            memory=parse_memory_state(memory_state({0: (4 * GI, 3 * GI, [0, 1], 2), 1: (4 * GI, 4 * GI, [1], 1)})),
        ),
    )
    nrt = build_nrt(inputs)
    zone_attributes = [{a.name: a.value for a in z.attributes or []} for z in nrt.zones]
    assert zone_attributes == [
        {NRT_ZONE_ATTR_FREE_CORES: "1", NRT_ZONE_ATTR_MEMORY_CELLS: "0-1", NRT_ZONE_ATTR_SOCKET: "0"},
        {NRT_ZONE_ATTR_FREE_CORES: "2", NRT_ZONE_ATTR_MEMORY_CELLS: "1", NRT_ZONE_ATTR_SOCKET: "1"},
    ]
    assert nrt.attribute(NRT_ATTR_THREADS_PER_CORE) == "2"
    node = from_nrt(nrt)
    assert [(z.free_cores, z.memory_cells) for z in node.zones] == [(1, mask(0, 1)), (2, mask(1))]
    assert node.threads_per_core == 2
    # Without the checkpoints (PodResources alone) neither is published: the predictor counts CPUs
    # singly. (The socket is the machine's, there either way.)
    bare = build_nrt(Inputs(**{**inputs.__dict__, "checkpoints": None}))
    assert [{a.name for a in z.attributes or []} for z in bare.zones] == [{NRT_ZONE_ATTR_SOCKET}] * 2


def test_cores_unknown_when_sysfs_has_no_core_ids(tmp_path: Path) -> None:
    machine = read_machine(build(tmp_path, [FakeNode(0, [0, 1, 2, 3], 4 * 1024 * 1024)]))
    assert machine.nodes[0].cores == ()
    assert machine.threads_per_core is None


def test_a_stale_pods_memory_leaves_no_cells(tmp_path: Path) -> None:
    """Oracle seed 3, case 2139: the kubelet rejected a pod after its init container got memory on
    zone 1. The checkpoint still counts that assignment (and the group 0-1 of another stale pod)
    until the kubelet's next hint computation drops them, so neither is published: the next pod
    may take memory across zones 0 and 1."""
    state = json.loads(memory_state({0: (4 * GI, 3 * GI, [0, 1], 1), 1: (4 * GI, 3 * GI, [0, 1], 2)}))
    block = {"numaAffinity": [1], "type": "memory", "size": GI}
    state["entries"] = {
        "rejected": {"init": [block]},
        "gone": {"app": [{**block, "numaAffinity": [0, 1]}]},
    }
    inputs = Inputs(
        node="n",
        machine=smt_machine(tmp_path),
        kubelet=parse_kubelet({"cpuManagerPolicy": "static", "memoryManagerPolicy": "Static"}),
        allocatable=Allocatable(
            cpu_ids=tuple(range(8)),
            memory=(MemoryBlock("memory", 4 * GI, (0,)), MemoryBlock("memory", 4 * GI, (1,))),
        ),
        pods=[],
        checkpoints=Checkpoints(memory=parse_memory_state(json.dumps(state))),
    )
    nrt = build_nrt(inputs)
    assert [z.attribute(NRT_ZONE_ATTR_MEMORY_CELLS) for z in nrt.zones] == [None, None]
    assert nrt.attribute(NRT_ATTR_MEMORY_NUMA_GROUPS) is None


@pytest.mark.parametrize(
    ("default", "entries", "listed", "available"),
    [
        # The bench's restricted scenario, node rn07: at 14.619 the CPU Manager dropped p0008's entry
        # (CPUs 1-4) and only at 14.732 put 1-4 back in the pool; read between the two, zone 0 showed
        # 3 CPUs free (7), so after p0003 (3 CPUs) p0019 (4) was sent to zone 1; its kubelet gave it zone 0.
        pytest.param("0,5-7,13-15", {"gone": {"app": "8-12"}}, {}, (7, 8), id="removal-between-its-two-writes"),
        pytest.param("0-7,13-15", {"gone": {"app": "8-12"}}, {}, (7, 8), id="removal-done-entry-stale"),
        # Admission: its CPUs leave the pool before its entry is written; not listed yet, it is not
        # counted (nor in the fingerprint) either way.
        pytest.param("0,5-15", {}, {}, (7, 8), id="admission-between-its-two-writes"),
        # ... but PodResources reads the kubelet's memory, ahead of the file: listed, its CPUs are held.
        pytest.param("0,5-15", {}, {"app": "1-4"}, (3, 8), id="admission-between-its-two-writes-listed"),
        pytest.param("0,5-15", {"new": {"app": "1-4"}}, {}, (7, 8), id="admission-done-not-listed"),
        pytest.param("0,5-15", {"live": {"app": "1-4"}}, {"app": "1-4"}, (3, 8), id="live-pod"),
        pytest.param(
            "0,13-15", {"live": {"app": "1-4"}}, {"app": "1-4"}, (3, 8), id="live-pod-and-a-removal-between-writes"
        ),
    ],
)
def test_cpus_between_two_checkpoint_writes_are_free(
    tmp_path: Path, default: str, entries: dict[str, dict[str, str]], listed: dict[str, str], available: tuple[int, int]
) -> None:
    """The CPU Manager writes its checkpoint twice per change; a CPU read in neither its pool nor
    any entry is on its way between them, not held: the NRT counts it free."""
    sysfs = build(tmp_path, [FakeNode(0, list(range(8)), 1024 * 1024), FakeNode(1, list(range(8, 16)), 1024 * 1024)])
    containers = tuple(ContainerUse(cpu_ids=tuple(parse_cpulist(c)), name=n) for n, c in listed.items())
    inputs = Inputs(
        node="n",
        machine=read_machine(sysfs),
        kubelet=parse_kubelet({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}),
        allocatable=Allocatable(cpu_ids=tuple(range(1, 16))),
        pods=[PodUse("ns", "live", containers)] if containers else [],
        checkpoints=Checkpoints(
            cpu=parse_cpu_state(json.dumps({"policyName": "static", "defaultCpuSet": default, "entries": entries}))
        ),
    )
    zones = {z.name: {r.name: r.available for r in z.resources or []} for z in build_nrt(inputs).zones}
    assert (int(zones["node-0"]["cpu"]), int(zones["node-1"]["cpu"])) == available
