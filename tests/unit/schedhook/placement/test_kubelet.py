import pytest

from testkit.placement import g, node, q
from toposched.schedhook.placement.kubelet.admission import predict, upstream_filter
from toposched.schedhook.placement.kubelet.claims import Claims
from toposched.schedhook.placement.kubelet.state import NodeState
from toposched.schedhook.placement.kubelet.topologymanager import Hint, mask
from toposched.schedhook.placement.model import Container, NodeTopology, Pod

T, F = True, False


GI = "Gi"
N1 = node([{"cpu": 4, "memory": "8Gi", "example.com/nic": 10}, {"cpu": 8, "memory": "8Gi", "example.com/nic": 10}])
N2 = node(
    [
        {"cpu": 2, "memory": "4Gi", "hugepages-2Mi": "128Mi", "example.com/nic": 5},
        {"cpu": 4, "memory": "4Gi", "hugepages-2Mi": "128Mi", "example.com/nic": 2},
    ],
    extra={"vendor.com/old-nic-model": 4},
)
N3 = node(
    [{"cpu": 2, "memory": "4Gi", "example.com/nic": 5}, {"cpu": 4, "memory": "4Gi", "example.com/nic": 2}], scope="pod"
)
NX = node(
    [{"cpu": 4, "memory": "8Gi", "example.com/nic": 10}, {"cpu": 8, "memory": "8Gi", "example.com/nic": 10}],
    extra={"namespace/extended": 1},
)
HOST0 = [
    {"cpu": 30, "memory": "60Gi", "hugepages-2Mi": "384Mi", "example.com/nic": 16},
    {"cpu": 32, "memory": "64Gi", "hugepages-2Mi": "512Mi", "example.com/nic": 32},
]


def be(**resources: str | int) -> Container:
    values = q({k.replace("nic", "example.com/nic"): v for k, v in resources.items()})
    return Container("c", values, values)


@pytest.mark.parametrize(
    ("n", "pod", "admit", "reason"),
    [
        (N1, Pod((Container("c", {}),)), T, ""),
        (N3, Pod((be(nic=5),)), T, ""),
        (
            N3,
            Pod((be(nic=20),)),
            F,
            "cannot align pod on one NUMA zone: example.com/nic 20 requested, best zone has 5 available",
        ),
        (
            N1,
            Pod((be(nic=20),)),
            F,
            "cannot align container c on one NUMA zone: example.com/nic 20 requested, best zone has 10 available",
        ),
        (
            N3,
            Pod(
                (
                    Container(
                        "c", q({"cpu": 19, "memory": "5Gi", "example.com/nic": 5}), q({"cpu": 20, "memory": "6Gi"})
                    ),
                )
            ),
            T,
            "",
        ),
        (
            N2,
            Pod(
                (Container("c", q({"cpu": 3, "memory": "3Gi", "example.com/nic": 11}), q({"cpu": 4, "memory": "4Gi"})),)
            ),
            F,
            "cannot align container c on one NUMA zone: example.com/nic 11 requested, best zone has 5 available",
        ),
        (
            N1,
            Pod((g(cpu=9, memory="1Gi", nic=3),)),
            F,
            "cannot align container c on one NUMA zone: cpu 9 requested, best zone has 8 available",
        ),
        (N1, Pod((g(cpu=2, memory="2Gi", hugepages_2Mi=0, nic=3),)), T, ""),
        (
            N2,
            Pod((g(cpu=2, memory="2Gi", hugepages_2Mi="256Mi", nic=3),)),
            F,
            "cannot align container c on one NUMA zone: "
            "hugepages-2Mi 268435456 requested, best zone has 134217728 available",
        ),
        (N2, Pod((g(cpu=2, memory="2Gi", hugepages_2Mi="64Mi", nic=3),)), T, ""),
        (
            N2,
            Pod(
                (
                    Container(
                        "c",
                        q({"cpu": 2, "memory": "2Gi", "hugepages-2Mi": "64Mi", "vendor.com/old-nic-model": 3}),
                        q({"cpu": 2, "memory": "2Gi"}),
                    ),
                )
            ),
            T,
            "",
        ),
        (
            N2,
            Pod(
                (
                    Container(
                        "c",
                        q({"cpu": 2, "memory": "2Gi", "ephemeral-storage": "100Mi"}),
                        q({"cpu": 2, "memory": "2Gi"}),
                    ),
                )
            ),
            T,
            "",
        ),
        (
            NX,
            Pod(
                (
                    Container(
                        "c",
                        q({"cpu": 2, "memory": "2Gi", "namespace/extended": 1, "example.com/nic": 3}),
                        q({"cpu": 2, "memory": "2Gi"}),
                    ),
                )
            ),
            T,
            "",
        ),
        (N3, Pod(tuple(g(f"c{i}", cpu=3, memory="1Gi") for i in range(3))), F, "cannot align pod on one NUMA zone"),
        (N3, Pod(tuple(g(f"c{i}", cpu=1, memory="1Gi") for i in range(3))), T, ""),
        (
            node(HOST0, scope="pod"),
            Pod(
                (
                    g("a", cpu=2, memory="2Gi"),
                    g("b", cpu=4, memory="8Gi"),
                    g("c", cpu=26, memory="32Gi", hugepages_2Mi="512Mi", nic=26),
                )
            ),
            T,
            "",
        ),
        (
            node(HOST0, scope="pod"),
            Pod(
                (
                    g("a", cpu=2, memory="2Gi"),
                    g("b", cpu=8, memory="8Gi"),
                    g("c", cpu=26, memory="26Gi", hugepages_2Mi="52Mi", nic=26),
                )
            ),
            F,
            "cannot align pod on one NUMA zone",
        ),
        (
            node(HOST0),
            Pod((g("a", cpu=1, memory="4G"), g("b", cpu=1, memory="4G")), (g("init", cpu=40, memory="40G"),)),
            F,
            "cannot align init container init on one NUMA zone: cpu 40 requested, best zone has 32 available",
        ),
        (
            node(HOST0),
            Pod(
                (g("a", cpu=20, memory="40G"), g("b", cpu=20, memory="40G"), g("c", cpu=2, memory="6G")),
                tuple(g(f"i{i}", cpu=30, memory="10G") for i in range(3)),
            ),
            T,
            "",
        ),
        (
            node(HOST0),
            Pod(
                (g("a", cpu=20, memory="40G"), g("b", cpu=20, memory="40G"), g("c", cpu=20, memory="6G")),
                tuple(g(f"i{i}", cpu=30, memory="10G") for i in range(2)),
            ),
            F,
            "cannot align container c on one NUMA zone",
        ),
        (
            node(HOST0),
            Pod(
                (
                    g("a", cpu=2, memory="6G", hugepages_2Mi="500Mi", nic=16),
                    g("b", cpu=2, memory="6G", hugepages_2Mi="50Mi", nic=8),
                )
            ),
            T,
            "",
        ),
    ],
    ids=[f"F{i}" for i in range(1, 10)]
    + ["F9-64Mi", "F10", "F11", "F12", "F13", "F13-one-cpu-each", "F15", "F16", "F17", "F18", "F19", "F20"],
)
def test_upstream_filter_vectors(n: NodeTopology, pod: Pod, admit: bool, reason: str) -> None:
    verdict = upstream_filter(n, pod)
    assert (verdict.admit, verdict.reason) == (admit, reason)
    assert predict(n, pod).admit == admit  # the NRTs above say nothing about the managers: same answer


def test_f14_zones_with_bad_ids_are_dropped() -> None:
    from toposched.apis.noderesourcetopology import NodeResourceTopology
    from toposched.schedhook.placement.parse import from_nrt

    def zone(name: str, cpu: int) -> dict[str, object]:
        res = [{"name": "cpu", "capacity": cpu, "allocatable": cpu, "available": cpu}]
        res.append({"name": "memory", "capacity": "4Gi", "allocatable": "4Gi", "available": "4Gi"})
        return {"name": name, "type": "Node", "resources": res}

    nrt = NodeResourceTopology.model_validate(
        {
            "metadata": {"name": "nb"},
            "topologyPolicies": ["SingleNUMANodePodLevel"],
            "zones": [zone("node-0", 2), zone("node-75", 4)],
        }
    )
    nb = from_nrt(nrt)
    assert nb.numa_ids == [0]
    assert (nb.policy, nb.scope) == ("single-numa-node", "pod")
    assert not predict(nb, Pod(tuple(g(f"c{i}", cpu=1, memory="1Gi") for i in range(3)))).admit


# CPU manager hints (cpumanager topology_hints_test): 12 CPUs, 6 per NUMA node; free: 4 on NUMA 0, 6 on NUMA 1.
CPU_NODE = node([{"cpu": 4}, {"cpu": 6}], cpu="static", memory="None", capacity=[{"cpu": 6}, {"cpu": 6}])


@pytest.mark.parametrize(
    ("cpus", "hints"),
    [
        (2, [Hint(mask(0), T), Hint(mask(1), T), Hint(mask(0, 1), F)]),
        (5, [Hint(mask(1), T), Hint(mask(0, 1), F)]),
        (7, [Hint(mask(0, 1), T)]),
        (11, []),
    ],
    ids=["C1", "C2", "C3", "C4"],
)
def test_cpu_hints(cpus: int, hints: list[Hint]) -> None:
    cpu, memory, devices = NodeState(CPU_NODE).providers(Claims(cpus=cpus))
    assert cpu == {"cpu": hints}
    assert memory == devices == {}


def test_kubelet_rules_beat_the_upstream_filter_when_managers_are_known() -> None:
    # 5 CPUs free on NUMA 0, 32 on NUMA 1; a Burstable pod asking for 20 CPUs and a NIC on NUMA 0.
    zones = [{"cpu": 5, "memory": "8Gi", "example.com/nic": 1}, {"cpu": 32, "memory": "64Gi"}]
    burstable = Pod((Container("c", q({"cpu": 20, "example.com/nic": 1}), q({"cpu": 24})),))
    known = node(zones, cpu="static", memory="None")
    # The kubelet gives no CPU hint to a Burstable pod: only the NIC pins it, to NUMA 0.
    verdict = predict(known, burstable)
    assert verdict.admit
    assert verdict.numa == {"c": (0,)}
    # A Guaranteed fractional-CPU pod gets no CPU hint either; memory under the None policy neither.
    fractional = Pod((g(cpu="1500m", memory="100Gi"),))
    assert predict(known, fractional).admit
    assert not upstream_filter(node(zones), fractional).admit  # upstream is stricter here


def test_container_scope_allocates_in_order() -> None:
    n = node([{"cpu": 4}, {"cpu": 4}], cpu="static", memory="None")
    verdict = predict(n, Pod((g("a", cpu=3, memory="1Gi"), g("b", cpu=3, memory="1Gi"), g("c", cpu=2, memory="1Gi"))))
    assert not verdict.admit
    assert verdict.reason == "cannot align container c on one NUMA zone"
    assert verdict.numa == {"a": (0,), "b": (1,)}


def test_restricted_allows_multi_numa_preferred_and_best_effort_always_admits() -> None:
    zones = [{"cpu": 4}, {"cpu": 4}]
    wide = Pod((g(cpu=6, memory="1Gi"),))
    assert predict(
        node(zones, policy="restricted", cpu="static", memory="None", capacity=[{"cpu": 4}, {"cpu": 4}]), wide
    ).admit
    too_big = Pod((g(cpu=9, memory="1Gi"),))
    assert not predict(node(zones, policy="restricted", cpu="static", memory="None"), too_big).admit
    # best-effort admits what it cannot align (the NIC on zone 0, the CPUs only on zone 1)...
    split = [{"cpu": 0, "example.com/nic": 1}, {"cpu": 4}]
    misaligned = Pod((g(cpu=2, memory="1Gi", nic=1),))
    assert not predict(node(split, policy="restricted", cpu="static", memory="None"), misaligned).admit
    assert predict(node(split, policy="best-effort", cpu="static", memory="None"), misaligned).admit
    # ...but not what the CPU Manager cannot allocate at all: the real kubelet fails that pod with
    # UnexpectedAdmissionError (the oracle found it: seed 2, case 93).
    verdict = predict(node(zones, policy="best-effort", cpu="static", memory="None"), too_big)
    assert not verdict.admit
    assert verdict.reason == "cannot allocate for container c: not enough CPUs: 9 requested, 8 free"
