import pytest

from testkit.placement import g, q
from toposched.schedhook.placement.kubelet.admission import predict
from toposched.schedhook.placement.model import NodeTopology, NumaZone, Pod
from toposched.schedhook.placement.score import (
    BALANCED_ALLOCATION,
    LEAST_ALLOCATED,
    LEAST_NUMA_NODES,
    MOST_ALLOCATED,
    node_score,
)


def numa_node(
    name: str,
    zones: list[dict[str, str | int]],
    policy: str = "single-numa-node",
    scope: str = "container",
    distances: dict[int, dict[int, int]] | None = None,
) -> NodeTopology:
    built = tuple(NumaZone(i, q(z), q(z), q(z)) for i, z in enumerate(zones))
    return NodeTopology(name, built, policy, scope, distances=distances or {})


# scheduler-plugins score_test.go defaultNUMANodes.
NODE1 = numa_node("n1", [{"cpu": 4, "memory": "500Mi"}] * 2)
NODE2 = numa_node("n2", [{"cpu": 2, "memory": "50Mi"}] * 2)
NODE3 = numa_node("n3", [{"cpu": 6, "memory": "60Mi"}] * 2)
POD = Pod((g(cpu=2, memory="20Mi"),))


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (LEAST_ALLOCATED, {"n1": 73, "n2": 30, "n3": 66}),
        (MOST_ALLOCATED, {"n1": 27, "n2": 70, "n3": 33}),
        (BALANCED_ALLOCATION, {"n1": 89, "n2": 82, "n3": 100}),
    ],
    ids=["S1-least-allocated", "S2-most-allocated", "S3-balanced"],
)
def test_resource_scores(strategy: str, expected: dict[str, int]) -> None:
    scores = {n.name: node_score(strategy, n, POD) for n in (NODE1, NODE2, NODE3)}
    assert scores == expected
    winner = max(scores, key=lambda k: scores[k])
    assert winner == {LEAST_ALLOCATED: "n1", MOST_ALLOCATED: "n2", BALANCED_ALLOCATION: "n3"}[strategy]


def test_non_guaranteed_pods_score_the_maximum() -> None:
    burstable = Pod((g(cpu=2),))  # no memory: Burstable
    assert node_score(LEAST_ALLOCATED, NODE2, burstable) == 100


def test_predicted_zone_is_scored_not_the_worst() -> None:
    lopsided = numa_node("l", [{"cpu": 2, "memory": "1Gi"}, {"cpu": 16, "memory": "1Gi"}])
    pod = Pod((g(cpu=2, memory="100Mi"),))
    assert node_score(LEAST_ALLOCATED, lopsided, pod) == 45  # upstream: the worst zone (cpu 0, memory 90)
    assert node_score(LEAST_ALLOCATED, lopsided, pod, predicted={"c": [1]}) == 88  # cpu 87, memory 90


@pytest.mark.parametrize(
    ("scope", "pod", "expected"),
    [
        ("container", Pod((g(cpu=6, memory="50Mi"),)), {"n1": 82, "n2": 0, "n3": 94}),
        ("pod", Pod((g("a", cpu=2, memory="50Mi"), g("b", cpu=2, memory="50Mi"))), {"n1": 94, "n2": 82, "n3": 82}),
    ],
    ids=["S5-container-scope", "S6-pod-scope"],
)
def test_least_numa_nodes(scope: str, pod: Pod, expected: dict[str, int]) -> None:
    nodes = [
        numa_node(n.name, [dict(z.available) for z in n.zones], policy="best-effort", scope=scope)  # type: ignore[misc]
        for n in (NODE1, NODE2, NODE3)
    ]
    assert {n.name: node_score(LEAST_NUMA_NODES, n, pod) for n in nodes} == expected


FOUR = {i: {j: 10 if i == j else (12 if i // 2 == j // 2 else 20) for j in range(4)} for i in range(4)}


@pytest.mark.parametrize(
    ("gpus", "expected"), [(2, {"n1": 82, "n2": 76}), (1, {"n1": 94, "n2": 94})], ids=["S7", "S7-one-gpu"]
)
def test_least_numa_nodes_prefers_close_zones(gpus: int, expected: dict[str, int]) -> None:
    def four(name: str, gpu_zones: tuple[int, int]) -> NodeTopology:
        zones = [{"cpu": 2, "memory": "50Mi", **({"gpu": 1} if i in gpu_zones else {})} for i in range(4)]
        return numa_node(name, zones, policy="best-effort", distances=FOUR)  # type: ignore[arg-type]

    pod = Pod((g(cpu=2, memory="50Mi", gpu=gpus),))
    assert {n.name: node_score(LEAST_NUMA_NODES, n, pod) for n in (four("n1", (0, 1)), four("n2", (0, 2)))} == expected


def test_scores_follow_the_prediction_end_to_end() -> None:
    node = NodeTopology(
        "n",
        tuple(
            NumaZone(
                i, q({"cpu": 8, "memory": "8Gi"}), q({"cpu": 8, "memory": "8Gi"}), q({"cpu": cpu, "memory": "4Gi"})
            )
            for i, cpu in enumerate((1, 6))
        ),
        "single-numa-node",
        "container",
        "static",
        "None",
    )
    pod = Pod((g(cpu=2, memory="1Gi"),))
    verdict = predict(node, pod)
    assert verdict.numa == {"c": (1,)}
    # cpu (6 - 2) / 6 -> 66, memory (4 - 1) / 4 -> 75; memory is not listed, so it weighs 1.
    assert node_score(LEAST_ALLOCATED, node, pod, verdict.numa, weights={"cpu": 1}) == 70
