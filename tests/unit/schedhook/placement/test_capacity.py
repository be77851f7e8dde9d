"""The capacity count: copies admitted one after another by the kubelet prediction, bounded by
kube-scheduler's fit; unknown where NUMA knowledge is missing; shapes and their bad input."""

from dataclasses import replace
from decimal import Decimal

import pytest

from testkit.builders import node_body, nrt_body, pod_body
from testkit.placement import node, q
from toposched.apis.constants import TOPOLOGY_MANAGER_POLICY_LABEL
from toposched.apis.fingerprint import fingerprint
from toposched.schedhook.placement.capacity import KUBELET, SCHEDULER, UNKNOWN, capacity, copies, never_fits
from toposched.schedhook.placement.kubelet.admission import predict
from toposched.schedhook.placement.occupancy import Occupancy, bound_pods, occupancy
from toposched.schedhook.placement.shapes import ShapeError, inline_shape, unknown_resources
from toposched.schedhook.placement.snapshot import snapshot

GPU = "example.com/gpu"
TWO = [{"cpu": 8, "memory": "16Gi", GPU: 2}, {"cpu": 8, "memory": "16Gi", GPU: 2}]
STATIC = node(TWO, cpu="static", memory="Static")
ROOM = {**q({"cpu": 16, "memory": "32Gi", GPU: 4}), "pods": Decimal(110)}


@pytest.mark.parametrize(
    ("shape", "room", "fits", "zones", "limit", "reason"),
    [
        pytest.param("cpu:4,memory:4Gi,example.com/gpu:1", ROOM, 4, {0: 2, 1: 2}, SCHEDULER, "Insufficient cpu",
                     id="gpu-shape-fills-both-zones"),
        pytest.param("cpu:3,memory:1Gi", ROOM, 4, {0: 2, 1: 2}, KUBELET,
                     "cannot align container s on one NUMA zone", id="leftover-cpus-one-zone-cannot-hold"),
        pytest.param("cpu:5,memory:1Gi,example.com/gpu:1", ROOM, 2, {0: 1, 1: 1}, KUBELET,
                     "cannot align container s on one NUMA zone", id="one-per-zone"),
        pytest.param("cpu:2,memory:1Gi", {**ROOM, "pods": Decimal(3)}, 3, {0: 3}, SCHEDULER, "Insufficient pods",
                     id="pod-count-bounds"),
        pytest.param("cpu:500m", ROOM, 32, {0: 32, 1: 32}, SCHEDULER, "Insufficient cpu",
                     id="burstable-takes-no-zone-room"),
        pytest.param("cpu:1,memory:1Gi,example.com/gpu:1", {**ROOM, GPU: Decimal(1)}, 1, {0: 1}, SCHEDULER,
                     "Insufficient example.com/gpu", id="node-level-device-room"),
    ],
)  # fmt: skip
def test_copies(
    shape: str, room: dict[str, Decimal], fits: int, zones: dict[int, int], limit: str, reason: str
) -> None:
    fit = copies(STATIC, inline_shape(f"s={shape}").pod, room)
    assert (fit.fits, dict(fit.zones), fit.limit) == (fits, zones, limit)
    assert fit.reason.startswith(reason)


def test_copies_agree_with_predicting_each_on_the_node_the_last_left() -> None:
    """N copies fit: a fresh prediction on the node minus those N copies' requests rejects one more."""
    pod = inline_shape("s=cpu:3,memory:2Gi,example.com/gpu:1").pod
    fit = copies(STATIC, pod, ROOM)
    assert fit.fits == 4
    left = node(
        [{"cpu": 2, "memory": "12Gi", GPU: 0}, {"cpu": 2, "memory": "12Gi", GPU: 0}], cpu="static", memory="Static"
    )
    assert not predict(left, pod).admit


def test_full_pcpus_only_counts_whole_cores() -> None:
    smt = node(
        [{"cpu": 8, "memory": "16Gi"}, {"cpu": 8, "memory": "16Gi"}],
        cpu="static",
        memory="Static",
        free_cores=[4, 4],
        threads_per_core=2,
    )
    smt = replace(smt, cpu_options=frozenset({"full-pcpus-only"}))
    assert copies(smt, inline_shape("s=cpu:4,memory:1Gi").pod, ROOM).fits == 4
    odd = copies(smt, inline_shape("s=cpu:3,memory:1Gi").pod, ROOM)
    assert (odd.fits, odd.limit) == (0, KUBELET)
    assert "SMTAlignmentError" in odd.reason


BAD_SHAPES = {
    "zero": ("g=cpu:0", "shape g: cpu must be positive, not 0"),
    "negative": ("g=cpu:-2", "shape g: requests.cpu: cpu -2 is negative"),
    "no-amount": ("g=cpu", "shape 'g=cpu': 'cpu' is not resource:amount (e.g. cpu:8)"),
    "empty": ("g=", "shape 'g=': no requests (e.g. g=cpu:8,memory:16Gi)"),
    "bad-name": ("G P U=cpu:1", "shape 'G P U=cpu:1': the name 'G P U' must be lower-case"),
    "bad-quantity": ("g=cpu:lots", "shape g: requests.cpu:"),
    "bad-resource": ("g=a/b/c:1", "shape g: 'a/b/c' is not a resource name"),
}


@pytest.mark.parametrize(("text", "message"), BAD_SHAPES.values(), ids=BAD_SHAPES)
def test_bad_shapes(text: str, message: str) -> None:
    with pytest.raises(ShapeError) as raised:
        inline_shape(text)
    assert str(raised.value).startswith(message)


def test_inline_shape_is_guaranteed_and_unknown_resources_are_named() -> None:
    shape = inline_shape("train=cpu:8,memory:16Gi,example.com/gpu:1,example.com/fpga:1")
    assert shape.pod.containers[0].limits == shape.pod.containers[0].requests
    assert unknown_resources(shape, {"cpu", "memory", GPU}) == ["example.com/fpga"]


def test_never_fits_says_why_even_empty() -> None:
    full = node([{"cpu": 0, "memory": "1Gi"}], cpu="static", memory="Static", capacity=[{"cpu": 8, "memory": "16Gi"}])
    assert never_fits(full, inline_shape("s=cpu:8,memory:1Gi").pod, None) == ""
    assert "cpu 9 requested" in never_fits(full, inline_shape("s=cpu:9,memory:1Gi").pod, None)
    assert never_fits(None, inline_shape("s=cpu:9").pod, q({"cpu": 8})) == "Insufficient cpu"


def _cluster() -> tuple[list[dict[str, object]], list[dict[str, object]], list[dict[str, object]]]:
    zones = [{"cpu": 8, "memory": "16Gi"}, {"cpu": 8, "memory": "16Gi"}]
    labelled = {TOPOLOGY_MANAGER_POLICY_LABEL: "single-numa-node"}
    allocatable = {"cpu": "16", "memory": "32Gi", "pods": "110"}
    nodes = [
        node_body("a", zone="z1", allocatable=allocatable),
        node_body("b", zone="z1", allocatable=allocatable, labels=labelled),  # no NRT: missing
        node_body("c", zone="z2", allocatable=allocatable),  # a pod the NRT leaves out: stale
        {**node_body("d", zone="z2", allocatable=allocatable), "spec": {"unschedulable": True}},
    ]
    stale = nrt_body("c", zones, memory_manager="Static", attributes={"nodeTopologyPodsFingerprint": fingerprint([])})
    nrts = [nrt_body(n, zones, memory_manager="Static") for n in ("a", "d")] + [stale]
    bound = pod_body("old", namespace="default", cpu=2, memory="1Gi", node_name="c")
    bound["status"] = {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "lastTransitionTime": "2020-01-01T00:00:00Z"}],
    }
    return nodes, nrts, [bound]


def test_capacity_over_a_cluster_marks_blind_nodes_unknown_and_cordoned_ones_full() -> None:
    nodes, nrts, pods = _cluster()
    found = occupancy(nodes, {"a": {}, "d": {}, "c": {"nodeTopologyPodsFingerprint": fingerprint([])}},
                      bound_pods(pods), now=2e9)  # fmt: skip
    [result] = capacity(snapshot(nodes=nodes, nrts=nrts), [inline_shape("s=cpu:4,memory:4Gi")], found, "abcd")
    by_node = {f.node: f for f in result.nodes}
    assert by_node["a"].fits == 4
    assert (by_node["b"].fits, by_node["b"].limit) == (None, UNKNOWN)
    assert "NRT of b missing" in by_node["b"].reason
    assert (by_node["c"].fits, by_node["c"].limit) == (None, UNKNOWN)
    assert "NRT of c is stale: 1 pod(s)" in by_node["c"].reason
    assert by_node["d"].fits == 0
    assert result.total == 4
    assert result.none_by_reason() == {"node is cordoned (spec.unschedulable)": 1}


def test_occupancy_takes_bound_pods_off_the_room_and_a_recent_bind_is_not_stale() -> None:
    nodes, _, pods = _cluster()
    pods[0]["status"]["conditions"][0]["lastTransitionTime"] = "2030-01-01T00:00:00Z"
    attributes = {"c": {"nodeTopologyPodsFingerprint": fingerprint([])}}
    now = 1893456000.0 + 5  # five seconds after the bind
    found = occupancy(nodes, attributes, bound_pods(pods), now=now)
    assert found.room["c"]["cpu"] == 14
    assert found.room["c"]["pods"] == 109
    assert "c" not in found.blind
    assert found.cordoned == {"d"}
    assert Occupancy().room == {}
