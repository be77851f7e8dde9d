"""One bad object is skipped, saying why; every other node and pod is answered as before."""

import copy
import random
from decimal import Decimal
from typing import Any

import pytest

from testkit.nrt import POD, nrt
from toposched.schedhook.placement.evaluate import PlacementConfig, evaluate, evaluate_pod
from toposched.schedhook.placement.model import NodeTopology, NumaZone
from toposched.schedhook.placement.score import LEAST_ALLOCATED, MOST_ALLOCATED
from toposched.schedhook.placement.snapshot import Snapshot, snapshot

NAMES = [f"n{i}" for i in range(5)]


def bodies() -> list[dict[str, Any]]:
    rng = random.Random(11)
    return [nrt(name, rng) for name in NAMES]


def answers(pod: dict[str, Any], snap: Snapshot) -> dict[str, dict[str, Any]]:
    return {r.node: r.to_dict() for r in evaluate_pod(pod, NAMES, snap)}


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        (lambda b: b["zones"][0]["resources"][0].update(available="1e999999"), "available: '1e999999' is more"),
        (lambda b: b["zones"][1]["resources"][1].update(capacity="-1"), "capacity: memory -1 is negative"),
        (lambda b: b["zones"].append(copy.deepcopy(b["zones"][0])), "zone name 'node-0' is listed twice"),
        (lambda b: b["zones"][0].update(resources=5), "zones[0].resources: Input should be a valid list"),
    ],
    ids=["quantity-1e999999", "negative-capacity", "duplicate-zone", "resources-a-number"],
)
def test_a_bad_nrt_fails_its_node_with_the_reason_and_changes_no_other(spoil: Any, reason: str) -> None:
    good = bodies()
    bad = copy.deepcopy(good)
    spoil(bad[2])
    before, after = answers(POD, snapshot(nrts=good)), answers(POD, snapshot(nrts=bad))
    assert {n: a for n, a in after.items() if n != "n2"} == {n: a for n, a in before.items() if n != "n2"}
    assert not after["n2"]["fit"]
    assert after["n2"]["reason"].startswith("invalid NodeResourceTopology n2: ")
    assert reason in after["n2"]["reason"]


def test_a_bad_node_fails_with_the_reason() -> None:
    nodes = [{"metadata": {"name": n}, "status": {"allocatable": {"cpu": "64"}}} for n in NAMES]
    nodes[1]["status"]["allocatable"]["memory"] = "1e999999999"
    results = answers(POD, snapshot(nodes=nodes, nrts=bodies()))
    assert results["n1"]["reason"].startswith("invalid Node n1: status.allocatable.memory: '1e999999999' is more")
    assert all(results[n]["reason"] != results["n1"]["reason"] for n in NAMES if n != "n1")


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        ({"cpu": "1e999999", "memory": "1Gi"}, "spec.containers[0].resources.limits.cpu: '1e999999' is more than"),
        ({"cpu": "abc"}, "spec.containers[0].resources.limits.cpu: 'abc' is not a Kubernetes quantity"),
        ({"cpu": 8193, "memory": "1Gi"}, "limits.cpu: cpu 8193 is more than any machine has (at most 8192)"),
    ],
    ids=["cpu-1e999999", "cpu-abc", "more-cpus-than-a-machine"],
)
def test_a_bad_pod_fails_every_node_with_one_reason(limits: dict[str, Any], reason: str) -> None:
    pod = copy.deepcopy(POD)
    pod["spec"]["containers"][0]["resources"] = {"limits": limits}
    results = evaluate(pod, NAMES, snapshot(nrts=bodies()))
    assert results.pod_error is not None
    assert reason in results.pod_error
    assert [(r.fit, r.reason) for r in results.all()] == [(False, results.pod_error)] * len(NAMES)


def test_explain_style_snapshot_skips_bad_objects_and_says_why() -> None:
    appgroup = {"metadata": {"name": "ag"}, "spec": {"numMembers": 1, "workloads": [{"workload": {}}]}}
    topology = {"metadata": {"name": "nt"}, "spec": {"configmapName": "c", "weights": [{"name": "a"}] * 2}}
    snap = snapshot(nodes=[{"metadata": {}}], nrts=[{"zones": 5}], appgroups=[appgroup], networktopologies=[topology])
    kinds = [kind for kind, _ in snap.skipped]
    assert kinds == ["Node", "NodeResourceTopology", "AppGroup", "NetworkTopology"]
    assert all("\n" not in message and "http" not in message for _, message in snap.skipped)


@pytest.mark.parametrize("strategy", [LEAST_ALLOCATED, MOST_ALLOCATED])
def test_petabytes_of_memory_score_exactly_in_the_columns(strategy: str) -> None:
    """Zones of up to 4 PiB (the bound) make the score's products overflow 64 bits unless handled."""

    def zone(numa: int, free: int) -> NumaZone:
        amounts = {"cpu": Decimal(64), "memory": Decimal(free)}
        return NumaZone(numa, amounts, amounts, amounts)

    big = NodeTopology(
        "big", (zone(0, 2**51), zone(1, 2**51 - 12345)), "single-numa-node", "container", "static", "Static"
    )
    small = NodeTopology("small", (zone(0, 2**36),), "single-numa-node", "container", "static", "Static")
    pod = copy.deepcopy(POD)
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "8", "memory": "3Ti"}}
    nodes = {"big": big, "small": small}
    columnar = evaluate_pod(pod, list(nodes), Snapshot(nrts=nodes), PlacementConfig(numa_strategy=strategy))
    single = evaluate_pod(
        pod, list(nodes), Snapshot(nrts=nodes), PlacementConfig(numa_strategy=strategy, vectorize=False)
    )
    assert [r.to_dict() for r in columnar] == [r.to_dict() for r in single]
    assert 0 <= columnar[0].score <= 100
