"""Resource-manager rules of the kubelet the predictor follows, each found by the oracle (testkit.oracle)
as a disagreement with a real kubelet 1.36 and fixed; the expected outcomes are what the kubelet did."""

import pytest

from testkit.placement import g, node, q
from toposched.schedhook.placement.kubelet import NodeState, pod_guaranteed_cpus, pod_memory_request, predict
from toposched.schedhook.placement.model import Container, NodeTopology, Pod, Verdict
from toposched.schedhook.placement.topologymanager import Hint, mask

# Seed 1, case 30: 8 zones x 4 CPUs (CPU 0 reserved), best-effort at pod scope, and this SLIT table.
SLIT = [
    [10, 12, 12, 20, 21, 11, 21, 11],
    [12, 10, 32, 20, 32, 21, 20, 32],
    [12, 32, 10, 21, 20, 32, 21, 20],
    [20, 20, 21, 10, 11, 12, 32, 32],
    [21, 32, 20, 11, 10, 21, 32, 21],
    [11, 21, 32, 12, 21, 10, 32, 11],
    [21, 20, 21, 32, 32, 32, 10, 21],
    [11, 32, 20, 32, 21, 11, 21, 10],
]


def eight_zones(prefer_closest: bool) -> NodeTopology:
    zones: list[dict[str, str | int]] = [{"cpu": 3 if i == 0 else 4, "memory": "1Gi"} for i in range(8)]
    capacity: list[dict[str, str | int]] = [{"cpu": 4, "memory": "1Gi"} for _ in range(8)]
    return node(
        zones,
        "best-effort",
        "pod",
        "static",
        "Static",
        capacity=capacity,
        distances=SLIT,
        prefer_closest=prefer_closest,
    )


@pytest.mark.parametrize(
    ("prefer_closest", "zones"),
    [(True, (3, 4)), (False, (0, 1))],
    ids=["closest-pair-wins", "lowest-ids-without-the-option"],
)
def test_prefer_closest_numa_nodes(prefer_closest: bool, zones: tuple[int, ...]) -> None:
    """5 CPUs need two zones; among the pairs that hold them, the option picks the lowest mean
    distance (3-4, 0-5, 0-7 and 5-7 are all at 11; 3-4 has the lowest ids as a mask)."""
    verdict = predict(eight_zones(prefer_closest), Pod((g("app", cpu=5, memory="256Mi"),)))
    assert verdict == Verdict(True, numa={"pod": zones})


def test_init_container_cpus_must_stay_in_the_app_containers_mask() -> None:
    """Seed 1, case 35: the init container's CPU (zone 0, the only free one there) is reused by the
    app container, so every CPU hint of the app container must include zone 0; zone 0 cannot hold
    3 CPUs, and single-numa-node takes no two-zone hint: TopologyAffinityError."""
    n = node(
        [{"cpu": 1, "memory": "1Gi"}, {"cpu": 6, "memory": "1Gi"}],
        "single-numa-node",
        "container",
        "static",
        "Static",
        capacity=[{"cpu": 2, "memory": "1Gi"}, {"cpu": 6, "memory": "1Gi"}],
    )
    pod = Pod((g("app", cpu=3, memory="512Mi"),), (g("init", cpu=1, memory="64Mi"),))
    verdict = predict(n, pod)
    assert not verdict.admit
    assert verdict.reason == "cannot align container app"


def test_memory_hints_hold_every_pinned_type_at_once() -> None:
    """The Memory Manager sizes its hints over all the container's pinned types together: no zone
    holds both 600Mi of memory and 32Mi of 2Mi pages, so its only (and preferred) hint is both zones,
    for each type (hints per type would have preferred zone 0 for memory, zone 1 for the pages)."""
    zones: list[dict[str, str | int]] = [
        {"cpu": 4, "memory": "1Gi", "hugepages-2Mi": 0},
        {"cpu": 4, "memory": "512Mi", "hugepages-2Mi": "64Mi"},
    ]
    n = node(zones, "restricted", "container", "static", "Static")
    request = {"memory": q({"m": "600Mi"})["m"], "hugepages-2Mi": q({"h": "32Mi"})["h"]}
    both = [Hint(mask(0, 1), True)]
    assert NodeState(n).providers(0, request, {}) == [{}, {"memory": both, "hugepages-2Mi": both}, {}]


def test_no_new_memory_into_part_of_a_group() -> None:
    """Zones 0 and 1 hold multi-NUMA pinned memory: neither takes single-zone memory any more."""
    zones: list[dict[str, str | int]] = [
        {"cpu": 4, "memory": "512Mi"},
        {"cpu": 4, "memory": "1Gi"},
        {"cpu": 4, "memory": "1Gi"},
    ]
    grouped = node(
        zones,
        "single-numa-node",
        "container",
        "static",
        "Static",
        allocatable=[{"cpu": 4, "memory": "1Gi"} for _ in range(3)],
        memory_groups=(mask(0, 1),),
    )
    assert predict(grouped, Pod((g("app", cpu=1, memory="256Mi"),))) == Verdict(True, numa={"app": (2,)})


@pytest.mark.parametrize(
    ("pod", "cpus", "memory"),
    [
        (Pod((g("a", cpu="1500m", memory="1Gi"), g("b", cpu=2, memory="1Gi"))), 2, 2 * 2**30),
        (
            Pod(
                (g("app", cpu=2, memory="1Gi"),),
                (
                    Container("side", g(cpu=1, memory="256Mi").requests, g(cpu=1, memory="256Mi").limits, sidecar=True),
                    g("init", cpu=4, memory="2Gi"),
                ),
            ),
            5,
            2 * 2**30 + 256 * 2**20,
        ),
        (Pod((Container("b", g(cpu=2).requests, {}),)), 0, 0),
    ],
    ids=["fractional-containers-hold-none", "sidecar-before-init-counts", "burstable-none"],
)
def test_pod_scope_requests_as_the_managers_count_them(pod: Pod, cpus: int, memory: int) -> None:
    assert pod_guaranteed_cpus(pod) == cpus
    assert int(pod_memory_request(pod).get("memory", 0)) == memory


@pytest.mark.parametrize(
    ("free", "capacity", "cpus", "affinity", "zones"),
    [
        pytest.param([1, 2, 4], [4, 4, 4], 5, None, (0, 2), id="a-whole-free-zone-before-the-fullest"),
        pytest.param([3, 4], [4, 4], 4, None, (1,), id="a-zone-with-a-reserved-cpu-is-never-whole"),
        pytest.param([4, 4, 2], [4, 4, 4], 3, None, (0, 2), id="less-than-a-zone-fills-the-fullest-first"),
        pytest.param([1, 4, 4], [4, 4, 4], 5, mask(0, 1), (0, 1), id="whole-zones-inside-the-affinity-first"),
        pytest.param([2, 4, 4], [4, 4, 4], 9, mask(0, 1), (0, 1, 2), id="then-whole-zones-elsewhere"),
    ],
)
def test_the_packed_allocator_takes_whole_zones_first(
    free: list[int], capacity: list[int], cpus: int, affinity: int | None, zones: tuple[int, ...]
) -> None:
    """Seed 3, cases 43 and 149: while at least a zone's worth of CPUs is still needed, the CPU
    Manager takes a whole free zone before filling partly used ones (a fullest-first fill had
    spread the CPUs over three or four zones; the kubelet used two)."""
    n = node(
        [{"cpu": f, "memory": "1Gi"} for f in free],
        "best-effort",
        "pod",
        "static",
        capacity=[{"cpu": c, "memory": "1Gi"} for c in capacity],
    )
    assert NodeState(n).take_cpus(cpus, affinity, init=False) == zones
