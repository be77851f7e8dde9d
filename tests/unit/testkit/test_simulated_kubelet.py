"""The benchmarks' kubelet emulator: the Topology Manager's decision in binding order."""

import pytest

from testkit.builders import pod_body
from testkit.simulated_kubelet import GPU, replay, two_numa
from toposched.schedhook.placement.model import Pod
from toposched.schedhook.placement.parse import pod_from_spec


def guaranteed(cpu: int, gpu: int = 0, memory_gi: int | None = None) -> Pod:
    devices = {GPU: gpu} if gpu else {}
    return pod_from_spec(pod_body(cpu=cpu, memory=f"{memory_gi or cpu}Gi", devices=devices)["spec"])


@pytest.mark.parametrize(
    ("policy", "pods", "expected"),
    # (cpu, memory GiB) per pod, on two zones of 16 CPUs and 64 GiB
    [
        pytest.param("single-numa-node", [(10, 10), (10, 10)], (2, 0), id="one-pod-per-zone"),
        pytest.param("single-numa-node", [(10, 10)] * 3, (2, 1), id="third-does-not-fit-a-zone"),
        pytest.param("single-numa-node", [(10, 10), (10, 10), (4, 4), (4, 4)], (4, 0), id="small-ones-fill-gaps"),
        pytest.param("single-numa-node", [(12, 12), (12, 12), (6, 6)], (2, 1), id="node-total-fits-no-zone-does"),
        pytest.param("restricted", [(12, 12), (12, 12), (6, 6)], (2, 1), id="restricted-rejects-it-too"),
        pytest.param("restricted", [(20, 80)], (1, 0), id="restricted-admits-cpu-and-memory-wider-than-a-zone"),
        pytest.param("restricted", [(20, 20)], (0, 1), id="restricted-rejects-cpu-wide-memory-narrow"),
        pytest.param("single-numa-node", [(20, 80)], (0, 1), id="single-numa-node-rejects-any-spanning-pod"),
    ],
)
def test_replay_counts_topology_affinity_errors(
    policy: str, pods: list[tuple[int, int]], expected: tuple[int, int]
) -> None:
    nodes = {"n": two_numa("n", policy)}
    assert replay(nodes, [("n", guaranteed(cpu, memory_gi=memory)) for cpu, memory in pods]) == expected


def test_admission_takes_the_request_from_the_chosen_zone_and_the_nrt_shows_it() -> None:
    node = two_numa("n", "single-numa-node")
    assert node.admit(guaranteed(10, gpu=1)) == (True, (0,))
    assert node.admit(guaranteed(8, gpu=2)) == (True, (1,))
    zones = {z["name"]: {r["name"]: r["available"] for r in z["resources"]} for z in node.nrt()["zones"]}
    assert (zones["node-0"]["cpu"], zones["node-0"][GPU]) == ("6", "1")
    assert (zones["node-1"]["cpu"], zones["node-1"][GPU]) == ("8", "0")
    assert node.totals()["cpu"] == "32"
