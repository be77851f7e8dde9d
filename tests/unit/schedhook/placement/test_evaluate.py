import json
from typing import Any

import pytest
import yaml

from testkit.builders import member_labels, node_body, nrt_body, pod_body
from testkit.paths import EXAMPLES
from toposched.apis.constants import NUMA_ZONES_ANNOTATION
from toposched.cli import main
from toposched.schedhook.placement.evaluate import PlacementConfig, evaluate_pod
from toposched.schedhook.placement.snapshot import Snapshot, snapshot


def nrt(name: str, cpus: tuple[int, int], policy: str = "single-numa-node") -> dict[str, Any]:
    """Two zones of 16 CPUs, ``cpus[i]`` of them free in zone i, and 60 GiB of memory free in each."""
    return nrt_body(name, [{"cpu": (16, 16, c), "memory": ("64Gi", "60Gi", "60Gi")} for c in cpus], policy=policy)


def pod(cpu: int, annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return pod_body("p", namespace="default", cpu=cpu, memory="1Gi", labels=labels or {}, annotations=annotations or {})


def test_reasons_zones_and_scores() -> None:
    snap = snapshot(nrts=[nrt("small", (4, 3)), nrt("big", (2, 12))])
    results = {r.node: r for r in evaluate_pod(pod(6), ["small", "big", "unknown"], snap)}
    assert not results["small"].fit
    assert results["small"].reason == (
        "cannot align container app on one NUMA zone: cpu 6 requested, best zone has 4 available"
    )
    assert (results["big"].fit, results["big"].numa_zones) == (True, ["node-1"])
    assert results["big"].scores["numa"] > 0
    assert results["unknown"].fit  # no NRT: passes, with the lowest score
    assert results["unknown"].score == 0


def test_pod_policy_annotation() -> None:
    snap = snapshot(nrts=[nrt("relaxed", (4, 4), policy="none"), nrt("strict", (4, 4), policy="restricted")])
    spec = json.dumps({"numaTopologyPolicy": "SingleNUMANode"})
    results = {
        r.node: r
        for r in evaluate_pod(
            pod(6, {"scheduling.koordinator.sh/numa-topology-spec": spec}), ["relaxed", "strict"], snap
        )
    }
    # The pod's policy applies on a node without one: 6 CPUs fit no single zone of 4.
    assert not results["relaxed"].fit
    assert results["strict"].reason == "the pod asks for single-numa-node but the node runs restricted"
    bad = evaluate_pod(pod(1, {"scheduling.koordinator.sh/numa-topology-spec": "{"}), ["relaxed"], snap)
    assert bad[0].reason.startswith("invalid scheduling.koordinator.sh/numa-topology-spec: not JSON")


def test_exclusive_required_avoids_shared_zones() -> None:
    shared = pod_body(
        "wide", namespace="default", annotations={NUMA_ZONES_ANNOTATION: '["node-0", "node-1"]'}, node_name="n"
    )
    snap = snapshot(nrts=[nrt("n", (8, 8))], pods=[shared])
    spec = json.dumps({"singleNUMANodeExclusive": "Required"})
    (result,) = evaluate_pod(pod(2, {"scheduling.koordinator.sh/numa-topology-spec": spec}), ["n"], snap)
    assert not result.fit
    assert "exclusive" in result.reason


def boutique(workload: str, on: str) -> Snapshot:
    """Nodes a, b (us-west-1, zones z1 and z2) and c (us-east-1), Online Boutique with one pod of
    ``workload`` bound to node ``on``."""
    appgroup = yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text())
    appgroup["metadata"]["namespace"] = "default"
    nt = yaml.safe_load((EXAMPLES / "networktopology.yaml").read_text())
    allocatable = {"cpu": "32", "memory": "128Gi"}
    nodes = [
        node_body(name, region=region, zone=zone, allocatable=allocatable)
        for name, region, zone in [("a", "us-west-1", "z1"), ("b", "us-west-1", "z2"), ("c", "us-east-1", "z3")]
    ]
    placed = pod_body(
        f"{workload}-0", namespace="default", labels=member_labels("online-boutique", workload), node_name=on
    )
    return snapshot(
        nodes=nodes,
        nrts=[nrt(n, (8, 8)) for n in "abc"],
        appgroups=[appgroup],
        networktopologies=[nt],
        pods=[placed],
        weights_name="UserDefined",
    )


def test_network_neighbours_pull_the_pod_close() -> None:
    snap = boutique("cartservice", on="b")
    labels = member_labels("online-boutique", "frontend")
    results = {r.node: r for r in evaluate_pod(pod(2, labels=labels), ["a", "b", "c"], snap, PlacementConfig())}
    # frontend depends on cartservice (on b, zone z2; maxNetworkCost 80): b is best, the other region worst.
    assert results["b"].scores["network"] == 100
    assert results["c"].scores["network"] == 0
    assert results["a"].scores["network"] > results["c"].scores["network"]


@pytest.mark.parametrize(
    ("cohesion", "best"), [(True, {"b"}), (False, {"a", "b", "c"})], ids=["cohesion", "upstream-no-pull"]
)
def test_a_pod_without_placed_dependencies_joins_its_appgroup(cohesion: bool, best: set[str]) -> None:
    # paymentservice depends on nothing and nothing of it is placed; checkoutservice, which depends
    # on it, is not placed yet either. With cohesion it goes where its AppGroup already runs (b).
    snap = boutique("redis-cart", on="b")
    config = PlacementConfig()
    config.network.cohesion = cohesion
    labels = member_labels("online-boutique", "paymentservice")
    results = {r.node: r.scores["network"] for r in evaluate_pod(pod(2, labels=labels), ["a", "b", "c"], snap, config)}
    assert {n for n, s in results.items() if s == max(results.values())} == best
    if cohesion:
        assert results["a"] > results["c"]  # the same region beats the other one


def test_explain_command_json(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod(6)))
    (tmp_path / "nrts.yaml").write_text(yaml.safe_dump_all([nrt("small", (4, 3)), nrt("big", (2, 12))]))
    assert (
        main(["explain", "--pod", str(tmp_path / "pod.yaml"), "--nrt", str(tmp_path / "nrts.yaml"), "-o", "json"]) == 0
    )
    document = json.loads(capsys.readouterr().out)
    assert [set(d) for d in document] == [{"node", "fit", "reason", "numaZones", "scores", "score"}] * 2
    assert {d["node"]: d["fit"] for d in document} == {"big": True, "small": False}


@pytest.mark.parametrize(
    "args", [["--strategy", "Nope"], ["--pod", "/nonexistent"]], ids=["bad-strategy", "missing-file"]
)
def test_explain_bad_input(tmp_path, capsys, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod(1)))
    (tmp_path / "nrts.yaml").write_text(yaml.safe_dump(nrt("n", (4, 4))))
    base = ["explain", "--pod", str(tmp_path / "pod.yaml"), "--nrt", str(tmp_path / "nrts.yaml")]
    assert main(base + args) == 1
    assert "toposched explain:" in capsys.readouterr().err
