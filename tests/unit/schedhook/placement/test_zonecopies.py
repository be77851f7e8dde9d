"""The capacity count's closed form (copies counted zone by zone) held to the full walk (copies
admitted one after another through the kubelet prediction): same copies, zones and reasons."""

from dataclasses import replace
from decimal import Decimal
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.placement import g, node, q
from toposched.apis.devicegroups import DeviceGroup
from toposched.schedhook.placement.capacity import MAX_COPIES, Counting, NodeFit, copies
from toposched.schedhook.placement.model import Container, NodeTopology, NumaZone, Pod
from toposched.schedhook.placement.zonecopies import ZoneCounter

GPU = "example.com/gpu"
T = TypeVar("T")
OPTIONS = ["full-pcpus-only", "align-by-socket", "distribute-cpus-across-numa", "prefer-align-cpus-by-uncorecache"]


def both(nrt: NodeTopology, pod: Pod, limit: int) -> tuple[NodeFit, NodeFit]:
    """The node's fit by the closed form (where it holds) and by the full walk, with room for
    ``limit`` copies (the pod's CPUs run out first)."""
    room = {"cpu": limit * Decimal(pod.containers[0].request["cpu"]), "pods": Decimal(MAX_COPIES)}
    return copies(nrt, pod, room, strict=False), copies(nrt, pod, room, strict=False, closed_form=False)


def shape(**resources: str | int) -> Pod:
    """One Guaranteed container (``gpu``: example.com/gpu)."""
    values = q({GPU if r == "gpu" else r.replace("_", "-"): v for r, v in resources.items()})
    return Pod((Container("s", values, values),))


TWO = [{"cpu": 8, "memory": "16Gi", GPU: 2}, {"cpu": 8, "memory": "16Gi", GPU: 2}]
STATIC = node(TWO, cpu="static", memory="Static")
CASES = {
    "lowest-zone-filled-first": (STATIC, shape(cpu=2, memory="1Gi"), 5, {0: 4, 1: 1}),
    "devices-bound-each-zone": (STATIC, shape(cpu=1, memory="1Gi", gpu=1), MAX_COPIES, {0: 2, 1: 2}),
    "fractional-free-cpus": (node([{"cpu": "7.5", "memory": "8Gi"}], cpu="static", memory="Static",
                                  capacity=[{"cpu": 8, "memory": "8Gi"}]), shape(cpu=2, memory="1Gi"), 9, {0: 3}),
    "memory-bound": (STATIC, shape(cpu=1, memory="5Gi"), MAX_COPIES, {0: 3, 1: 3}),
    "zone-in-a-memory-group-takes-none": (node(TWO, cpu="static", memory="Static", memory_cells=[3, 3]),
                                          shape(cpu=1, memory="1Gi"), MAX_COPIES, {}),
    "pod-scope": (node(TWO, scope="pod", cpu="static", memory="Static"), shape(cpu=3, memory="1Gi"), 9, {0: 2, 1: 2}),
    "cpus-alone-without-a-memory-manager": (node(TWO, cpu="static", memory="None"), shape(cpu=4, memory="1Gi"),
                                            MAX_COPIES, {0: 2, 1: 2}),
    "no-zone-could-ever": (node(TWO, cpu="static", memory="Static"), shape(cpu=9, memory="1Gi"), 3, {}),
    "no-zone-could-though-free-says-so": (node([{"cpu": 8, "memory": "8Gi"}] * 2, cpu="static", memory="Static",
                                                capacity=[{"cpu": 4, "memory": "8Gi"}] * 2),
                                           shape(cpu=6, memory="1Gi"), 3, {}),
    "hugepages": (node([{"cpu": 4, "memory": "4Gi", "hugepages-1Gi": 3}] * 2, cpu="static", memory="Static"),
                  shape(cpu=1, memory="1Gi", hugepages_1Gi=2), MAX_COPIES, {0: 1, 1: 1}),
}  # fmt: skip


@pytest.mark.parametrize(("nrt", "pod", "limit", "zones"), CASES.values(), ids=CASES)
def test_closed_form_matches_the_walk(nrt: NodeTopology, pod: Pod, limit: int, zones: dict[int, int]) -> None:
    assert ZoneCounter(pod).count(nrt) is not None
    closed, walked = both(nrt, pod, limit)
    assert closed == walked
    assert closed.zones == zones


NOT_COVERED = {
    "restricted-policy": (replace(STATIC, policy="restricted"), shape(cpu=2, memory="1Gi")),
    "full-pcpus-only": (replace(STATIC, cpu_options=frozenset({"full-pcpus-only"})), shape(cpu=2, memory="1Gi")),
    "two-containers": (STATIC, Pod((g("a", cpu=1, memory="1Gi"), g("b", cpu=1, memory="1Gi")))),
    "init-container": (STATIC, Pod((g("a", cpu=1, memory="1Gi"),), (g("i", cpu=1, memory="1Gi"),))),
    "device-on-two-zones": (replace(STATIC, device_groups={GPU: (DeviceGroup((0, 1), 1, 1),)}),
                            shape(cpu=1, memory="1Gi", gpu=1)),
    "sockets-of-two-zones": (replace(STATIC, zones=tuple(replace(z, socket=0) for z in STATIC.zones)),
                             shape(cpu=2, memory="1Gi")),
    "managers-unknown": (node(TWO), shape(cpu=2, memory="1Gi")),
    "nothing-aligned": (node(TWO, cpu="none", memory="None"), shape(cpu=2, memory="1Gi")),
}  # fmt: skip


@pytest.mark.parametrize(("nrt", "pod"), NOT_COVERED.values(), ids=NOT_COVERED)
def test_what_the_closed_form_leaves_to_the_walk(nrt: NodeTopology, pod: Pod) -> None:
    assert ZoneCounter(pod).count(nrt) is None


def rarely(strategy: st.SearchStrategy[T], usual: T) -> st.SearchStrategy[T]:
    """``strategy`` one time in four, else ``usual``: most examples stay where the closed form holds."""
    return st.one_of(st.just(usual), st.just(usual), st.just(usual), strategy)


@st.composite
def nodes(draw: st.DrawFn) -> NodeTopology:
    """Up to four zones with CPUs (whole, fractional free, SMT cores, sockets), memory, hugepages
    and GPUs, some of them in memory groups or shared between zones, under any CPU options."""
    zones = []
    count = draw(st.integers(1, 4))
    threads = draw(st.sampled_from([None, 1, 2]))
    sockets = draw(st.sampled_from(["none", "each", "none", "each", "pairs"]))
    extra = [(r, most) for r, most in (("hugepages-1Gi", 4), (GPU, 4)) if draw(st.booleans())]
    for i in range(count):

        def amounts(most: int, unit: int = 1) -> tuple[Decimal, Decimal]:
            held = draw(st.integers(0, most))
            return Decimal(held * unit), Decimal(
                draw(st.sampled_from([held, held // 2, draw(st.integers(0, held))])) * unit
            )

        cpus, free = amounts(16)
        free -= Decimal("0.5") if draw(rarely(st.just(True), False)) and free else 0
        values = {"cpu": (cpus, free), "memory": amounts(16, 2**30), **{r: amounts(most) for r, most in extra}}
        capacity = {r: c for r, (c, _) in values.items()}
        cores = None if threads is None else draw(st.integers(0, int(max(free, 0)) // threads))
        socket = {"none": None, "each": i, "pairs": i // 2}[sockets]
        cells = draw(rarely(st.sampled_from([1 << i, (1 << count) - 1]), None))
        zones.append(NumaZone(i, capacity, capacity, {r: a for r, (_, a) in values.items()}, cores, cells, socket))
    shared = (
        {GPU: (DeviceGroup(tuple(range(count)), 2, draw(st.integers(0, 2))),)}
        if draw(rarely(st.just(True), False))
        else {}
    )
    return NodeTopology(
        "n",
        tuple(zones),
        draw(rarely(st.just("restricted"), "single-numa-node")),
        draw(st.sampled_from(["container", "pod"])),
        draw(rarely(st.just("none"), "static")),
        draw(rarely(st.just("None"), "Static")),
        threads_per_core=threads,
        cpu_options=draw(rarely(st.frozensets(st.sampled_from(OPTIONS), min_size=1, max_size=2), frozenset())),
        device_groups=shared,
    )


@st.composite
def pods(draw: st.DrawFn) -> Pod:
    requests = {"cpu": Decimal(draw(st.sampled_from(["1", "2", "3", "4", "0.5"]))), "memory": Decimal(2**29)}
    requests["memory"] *= draw(st.integers(1, 6))
    if draw(rarely(st.just(True), False)):
        requests["hugepages-1Gi"] = Decimal(draw(st.integers(1, 2)) * 2**30)
    if draw(rarely(st.just(True), False)):
        requests[GPU] = Decimal(draw(st.integers(1, 2)))
    limits = requests if draw(rarely(st.just(False), True)) else {}  # Guaranteed, or Burstable
    return Pod((Container("s", requests, limits),))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(), pods(), st.sampled_from([1, 2, 5, MAX_COPIES]))
def test_closed_form_equals_the_walk_on_random_nodes(nrt: NodeTopology, pod: Pod, limit: int) -> None:
    closed, walked = both(nrt, pod, limit)
    assert closed == walked


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(nodes(), min_size=2, max_size=6), pods())
def test_reasons_said_at_once_are_each_nodes_own(nrts: list[NodeTopology], pod: Pod) -> None:
    """Nodes of different zone counts, their reasons said together: each as the walk says it alone."""
    count = Counting(pod)
    fits = count.explained([count.fit(f"n{i}", nrt, {}, strict=False) for i, nrt in enumerate(nrts)])
    walked = [copies(nrt, pod, {}, strict=False, closed_form=False) for nrt in nrts]
    assert list(fits) == [replace(f, node=f"n{i}") for i, f in enumerate(walked)]
