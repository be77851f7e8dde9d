"""The kubelet's CPU and Memory Manager checkpoints, and the NRT figures taken from them."""

import json
from decimal import Decimal
from pathlib import Path

import pytest

from testkit.sysfs import FakeNode, build
from toposched.exporter.checkpoints import (
    CheckpointError,
    Checkpoints,
    parse_cpu_state,
    parse_memory_state,
    read,
    stale_pods,
)
from toposched.exporter.kubeletconfig import parse as parse_kubelet
from toposched.exporter.sysfs import read_machine
from toposched.exporter.topology import Allocatable, ContainerUse, Inputs, MemoryBlock, PodUse
from toposched.exporter.topology import build as build_nrt

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
    assert state.zones[2].cells == (2,)
    assert state.groups == [(0, 1)]


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
            cpu=parse_cpu_state('{"policyName":"static","defaultCpuSet":"0,4-7"}'),
            memory=parse_memory_state(memory_state({0: (4 * GI, 3 * GI, [0], 2), 1: (4 * GI, 4 * GI, [1], 0)})),
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
