"""Resource-manager rules of the kubelet the predictor follows, each found by the oracle (testkit.oracle)
as a disagreement with a real kubelet 1.36 and fixed; the expected outcomes are what the kubelet did."""

from dataclasses import replace

import pytest

from testkit.placement import g, node, q
from toposched.apis.devicegroups import DeviceGroup
from toposched.schedhook.placement.kubelet.admission import predict
from toposched.schedhook.placement.kubelet.claims import Claims, pod_claims
from toposched.schedhook.placement.kubelet.state import NodeState
from toposched.schedhook.placement.kubelet.topologymanager import Hint, mask
from toposched.schedhook.placement.model import Container, NodeTopology, Pod, Verdict

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
    assert verdict.reason == "cannot align container app on one NUMA zone"


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
    assert NodeState(n).providers(Claims(memory=request)) == [{}, {"memory": both, "hugepages-2Mi": both}, {}]


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
    claims = pod_claims(pod)
    assert claims.cpus == cpus
    assert int(claims.memory.get("memory", 0)) == memory


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
    assert NodeState(n).cpu.take(cpus, affinity, init=False) == zones


@pytest.mark.parametrize(
    ("free", "cores", "cpus", "zones"),
    [
        pytest.param([1, 2, 4], [0, 0, 2], 3, (0, 2), id="a-whole-core-before-halves-of-used-cores"),
        pytest.param([1, 4, 4], [0, 2, 2], 3, (0, 1), id="then-single-threads-from-the-fullest"),
        pytest.param([2, 4], [1, 2], 1, (0,), id="one-thread-is-not-a-core's-worth"),
        pytest.param([2, 3], [5, 1], 4, (0, 1), id="no-more-whole-cores-than-free-cpus-make"),
    ],
)
def test_the_packed_allocator_takes_whole_cores_before_single_threads(
    free: list[int], cores: list[int], cpus: int, zones: tuple[int, ...]
) -> None:
    """Seed 3, case 333 (SMT x2): after whole zones, the CPU Manager takes whole free cores while a
    core's worth is still needed, zone by zone from the fullest, and only then single threads; a
    zone whose free CPUs are halves of used cores is skipped in the first pass. The NRT says how
    many whole cores each zone has free."""
    n = node(
        [{"cpu": f, "memory": "1Gi"} for f in free],
        "best-effort",
        "pod",
        "static",
        capacity=[{"cpu": 4, "memory": "1Gi"} for _ in free],
        free_cores=cores,
        threads_per_core=2,
    )
    assert NodeState(n).cpu.take(cpus, None, init=False) == zones


def test_single_threads_come_from_halves_of_used_cores_first() -> None:
    """A zone of 2 whole free cores and 2 half-used ones: one CPU leaves both whole cores free."""
    n = node(
        [{"cpu": 6, "memory": "1Gi"}],
        "best-effort",
        "pod",
        "static",
        capacity=[{"cpu": 8, "memory": "1Gi"}],
        free_cores=[2],
        threads_per_core=2,
    )
    state = NodeState(n)
    state.cpu.take(1, None, init=False)
    assert state.cpu.cpus.free_cores[0] == 2
    state.cpu.take(3, None, init=False)  # a whole core, then the last half
    assert state.cpu.cpus.free_cores[0] == 1


def three_zones(**grouping: object) -> NodeTopology:
    zones: list[dict[str, str | int]] = [
        {"cpu": 4, "memory": "1Gi"},
        {"cpu": 4, "memory": "1Gi"},
        {"cpu": 4, "memory": "512Mi"},
    ]
    return node(
        zones,
        "best-effort",
        "pod",
        "static",
        "Static",
        allocatable=[{"cpu": 4, "memory": "1Gi"} for _ in range(3)],
        **grouping,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("grouping", "admit"),
    [
        pytest.param({"memory_groups": (mask(0, 1),)}, True, id="a-whole-group-takes-memory-across-it"),
        pytest.param(
            {"memory_groups": (mask(0, 1),), "memory_cells": [mask(0, 1), mask(1), None]},
            False,
            id="a-member-regrouped-alone-breaks-the-group",
        ),
    ],
)
def test_a_single_numa_allocation_regroups_a_zone_alone(grouping: dict[str, object], admit: bool) -> None:
    """Seed 3, case 428: the Memory Manager put single-zone memory on zone 1 although zone 1 was in
    the group 0-1 (Allocate allows a single-NUMA hint there) and so set zone 1's cells to [1]
    while zone 0's stayed [0, 1]. No mask passes its hint rules any more: the memory gets no hint,
    the CPUs decide, and extending their hint fails (UnexpectedAdmissionError). The exporter
    publishes each zone's cells so the predictor sees the asymmetry."""
    pod = Pod((g("app", cpu=1, memory="1536Mi"),))
    assert predict(three_zones(**grouping), pod).admit is admit


def test_regrouping_within_one_pod() -> None:
    """The same rule between two containers of one pod: single-zone memory on zone 1 ends the
    group 0-1 for the next container."""
    state = NodeState(three_zones(memory_groups=(mask(0, 1),)))
    assert Hint(mask(0, 1), True) in state.memory.hints(q({"memory": "1536Mi"}))
    state.memory.take(q({"memory": "64Mi"}), Hint(mask(1), False), init=False)
    assert state.memory.hints(q({"memory": "1536Mi"})) == []


@pytest.mark.parametrize("threads", [None, 1], ids=["cores-unknown", "cores-known"])
def test_init_containers_cpus_are_in_the_pool_like_free_ones(threads: int | None) -> None:
    """Seed 3, case 2467: the init container holds zone 2 (4 CPUs); the app container's 2 CPUs,
    aligned to zone 0 where nothing is free, come from the fullest zone of the whole pool, zone 1
    (3 free), not from the init container's CPUs first."""
    n = node(
        [{"cpu": 0, "memory": "1Gi"}, {"cpu": 3, "memory": "1Gi"}, {"cpu": 0, "memory": "1Gi"}],
        "best-effort",
        "pod",
        "static",
        capacity=[{"cpu": 4, "memory": "1Gi"} for _ in range(3)],
        free_cores=[0, 3, 0] if threads else None,
        threads_per_core=threads,
    )
    state = NodeState(n)
    state.cpu.cpus.reusable[2] = 4
    assert state.cpu.take(2, mask(0), init=False) == (1,)
    assert state.cpu.cpus.reusable[2] == 4


def _with_devices(
    zones: list[dict[str, str | int]], groups: dict[str, tuple[DeviceGroup, ...]], policy: str = "single-numa-node"
) -> NodeTopology:
    return replace(node(zones, policy, "container", "static", "Static"), device_groups=groups)


NIC = "example.com/nic"
SHARED_NIC = {NIC: (DeviceGroup((0, 1), 1, 1),)}


@pytest.mark.parametrize(
    ("zones", "groups", "policy", "nics", "expected"),
    [
        pytest.param(
            [{"cpu": 4, NIC: 1}, {"cpu": 4, NIC: 1}],
            SHARED_NIC,
            "best-effort",
            2,
            Verdict(False, f"cannot allocate for container c: not enough {NIC}: 2 requested, 1 free"),
            id="one-nic-on-two-zones-is-one-device-not-two",
        ),
        pytest.param(
            [{"cpu": 4, NIC: 2}, {"cpu": 4, NIC: 1}],
            SHARED_NIC,
            "single-numa-node",
            2,
            Verdict(True, numa={"c": (0,)}),
            id="a-shared-nic-counts-for-each-of-its-zones",
        ),
        pytest.param(
            [{"cpu": 4}, {"cpu": 4}],
            {NIC: (DeviceGroup((), 1, 1),)},
            "single-numa-node",
            1,
            Verdict(True, numa={"c": (0, 1)}),
            id="devices-without-topology-get-no-hint",
        ),
        pytest.param(
            [{"cpu": 4}, {"cpu": 4, NIC: 1}],
            {NIC: (DeviceGroup((), 1, 1),)},
            "restricted",
            2,
            Verdict(
                False, "cannot align container c: no NUMA affinity all its resource managers prefer (restricted policy)"
            ),
            id="a-device-without-topology-counts-in-no-mask",
        ),
    ],
)
def test_devices_are_counted_by_the_zones_they_are_attached_to(
    zones: list[dict[str, str | int]],
    groups: dict[str, tuple[DeviceGroup, ...]],
    policy: str,
    nics: int,
    expected: Verdict,
) -> None:
    """The device manager counts a device for every mask touching one of its zones, a device
    without topology for none (but in the number free), and makes masks of the zones with devices."""
    n = _with_devices(zones, groups, policy)
    pod = Pod((Container("c", q({NIC: nics}), q({NIC: nics})),))
    assert predict(n, pod) == expected


def test_an_app_container_reuses_its_init_containers_devices_wherever_they_are() -> None:
    """Seed 22, case 525: the device manager hands the app container the devices its init container
    held first, outside the aligned zones too; those zones are among the predicted ones."""
    state = NodeState(node([{"cpu": 4, NIC: 1}, {"cpu": 4, NIC: 1}], "best-effort", "container", "static", "Static"))
    assert state.devices.take(q({NIC: 1}), mask(0), init=True) == set()
    assert state.devices.take(q({NIC: 1}), mask(1), init=False) == {0}


def test_distribute_cpus_across_numa_spreads_the_spill_over_any_other_zone() -> None:
    """Seed 22, case 788: with the option, CPUs that do not fit the aligned mask are spread over
    other zones by a balance the NRT cannot replay: every zone with free CPUs may get some."""
    zones: list[dict[str, str | int]] = [{"cpu": 2}, {"cpu": 2}, {"cpu": 1}, {"cpu": 3}]
    plain = NodeState(node(zones, "best-effort", "container", "static", "Static"))
    spread = NodeState(replace(plain.node, cpu_options=frozenset({"distribute-cpus-across-numa"})))
    assert plain.cpu.take(5, mask(0, 1), init=False) == (0, 1, 2)
    assert spread.cpu.take(5, mask(0, 1), init=False) == (0, 1, 2, 3)


def two_sockets(align_by_socket: bool) -> NodeTopology:
    """4 zones of 4 CPUs, zones 0-1 on socket 0 and 2-3 on socket 1, restricted, no Memory Manager."""
    zones: list[dict[str, str | int]] = [{"cpu": 3}, {"cpu": 3}, {"cpu": 2}, {"cpu": 2}]
    capacity: list[dict[str, str | int]] = [{"cpu": 4}] * 4
    base = node(zones, "restricted", "container", "static", "None", capacity=capacity)
    options = frozenset({"align-by-socket"}) if align_by_socket else frozenset()
    return replace(base, zones=tuple(replace(z, socket=z.numa // 2) for z in base.zones), cpu_options=options)


@pytest.mark.parametrize(
    ("align_by_socket", "verdict"),
    [
        pytest.param(
            False,
            Verdict(
                False,
                "cannot align container app: no NUMA affinity all its resource managers prefer (restricted policy)",
            ),
            id="two-zones-not-preferred",
        ),
        pytest.param(True, Verdict(True, numa={"app": (0, 1)}), id="one-socket-is-preferred"),
    ],
)
def test_align_by_socket_prefers_masks_within_the_fewest_sockets(align_by_socket: bool, verdict: Verdict) -> None:
    """4 CPUs fit one zone by capacity but no zone has them free: only two zones can, which
    restricted refuses unless the CPU Manager's align-by-socket calls a mask within one socket
    preferred (socket 0's zones first, the lowest mask)."""
    assert predict(two_sockets(align_by_socket), Pod((g("app", cpu=4, memory="256Mi"),))) == verdict


def test_align_by_socket_takes_cpus_from_the_affinitys_whole_socket_first() -> None:
    state = NodeState(two_sockets(align_by_socket=True))
    # Socket 1 has 4 free (zones 2 and 3, zone 3 outside the affinity): the fifth spills to zone 0.
    assert state.cpu.take(5, mask(2), init=False) == (0, 2, 3)


def test_with_fewer_sockets_than_zones_the_allocator_goes_by_socket_first() -> None:
    """Sub-NUMA clustering (zones 0-1 on socket 0, 2-3 on socket 1): the socket with the fewest
    free CPUs first (socket 1: 5), its fullest zone first; by zone alone it would be zones 2 then 0."""
    zones: list[dict[str, str | int]] = [{"cpu": 2}, {"cpu": 4}, {"cpu": 1}, {"cpu": 4}]
    base = node(zones, "best-effort", "container", "static", "None", capacity=[{"cpu": 4}] * 4)
    by_zone = NodeState(base)
    by_socket = NodeState(replace(base, zones=tuple(replace(z, socket=z.numa // 2) for z in base.zones)))
    assert by_zone.cpu.take(3, None, init=False) == (0, 2)
    assert by_socket.cpu.take(3, None, init=False) == (2, 3)


@pytest.mark.parametrize(
    ("free", "capacity", "sockets", "cpus", "affinity", "zones"),
    [
        pytest.param(
            [1, 3, 3, 1, 2, 0, 3, 1], [2, 3, 3, 1, 2, 0, 3, 1], [0, 0, 1, 1, 2, 2, 3, 3], 4, mask(0, 2), (2, 3),
            id="seed-23-case-115-a-socket-at-the-average-is-taken-whole",
        ),
        pytest.param(
            [2, 1, 1], [3, 3, 2], [0, 1, 2], 3, None, (0,),
            id="one-socket-per-zone-the-second-level-takes-a-used-cpu-too",
        ),
        pytest.param(
            [4, 3, 4, 4], [4, 4, 4, 4], [0, 0, 1, 1], 8, None, (2, 3),
            id="even-sockets-only-a-wholly-free-one",
        ),
        pytest.param(
            [2, 1, 1], [3, 3, 2], [0, 1, 2], 2, None, (1, 2),
            id="a-socket-larger-than-what-is-needed-is-not-taken",
        ),
    ],
)  # fmt: skip
def test_a_free_socket_is_one_with_the_machines_average_of_cpus_free(
    free: list[int], capacity: list[int], sockets: list[int], cpus: int, affinity: int | None, zones: tuple[int, ...]
) -> None:
    """The kubelet's takeFullSockets calls a socket free when as many of its CPUs are available (in
    the aligned set) as the machine's CPUs over its sockets, and then takes every CPU of the
    socket. On uneven sockets that takes a socket whose own size is above the average with some of
    its CPUs used or outside the affinity (seed 23, case 115: 15 CPUs on 4 sockets, so 3 per
    socket; socket 1 = zones 2-3 with zone 2's 3 CPUs in the affinity took all 4, CPU 8 of zone 3
    too). It is the first level with fewer sockets than NUMA nodes, else the second."""
    base = node(
        [{"cpu": f} for f in free], "best-effort", "pod", "static", "None", capacity=[{"cpu": c} for c in capacity]
    )
    state = NodeState(replace(base, zones=tuple(replace(z, socket=sockets[z.numa]) for z in base.zones)))
    assert state.cpu.take(cpus, affinity, init=False) == zones


@pytest.mark.parametrize(
    ("options", "zones"),
    [
        pytest.param(frozenset(), (1, 2), id="packed-the-fullest-zones"),
        pytest.param(frozenset({"prefer-align-cpus-by-uncorecache"}), (2, 3), id="uncorecache-one-cache-that-holds-it"),
    ],
)
def test_prefer_align_by_uncore_cache_takes_the_request_from_one_cache(
    options: frozenset[str], zones: tuple[int, ...]
) -> None:
    """Seed 24, case 1876: six zones of 3 CPUs, two per socket (an uncore cache each: the
    kubelet's fallback without cache data), one CPU free in zones 1-5. For 2 CPUs the option takes
    them from the first cache in the allocator's order that has both: socket 1 (zones 2 and 3),
    not the fullest zones of two sockets."""
    base = node([{"cpu": f} for f in [0, 1, 1, 1, 1, 1]], "best-effort", "container", "static", "None",
                capacity=[{"cpu": 3}] * 6)  # fmt: skip
    with_sockets = replace(base, zones=tuple(replace(z, socket=z.numa // 2) for z in base.zones), cpu_options=options)
    assert NodeState(with_sockets).cpu.take(2, None, init=False) == zones
