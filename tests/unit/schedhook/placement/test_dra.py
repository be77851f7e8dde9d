"""DRA devices beside pinned CPUs: a pod's claims, where each picked device lies, and the verdict
the filter, the bind and explain share."""

from decimal import Decimal
from typing import Any

import pytest

from toposched.schedhook.placement.dra import (
    ALIGNED,
    AUTO,
    MISALIGNED,
    PREFER,
    STRICT,
    UNKNOWN,
    UNPINNED,
    ClaimRef,
    DeviceZones,
    Pick,
    allocation_picks,
    check_mode,
    cpu_zones,
    judge,
    mode_of,
    pins_cpus,
    pod_claims,
    slice_devices,
)
from toposched.schedhook.placement.model import NodeTopology, NumaZone
from toposched.schedhook.placement.parse import pod_from_spec

GPU = "gpu.example.com"
STANDARD = "resource.kubernetes.io/numaNode"


def a_slice(name: str, devices: list[dict[str, Any]], pool: str = "pool-a", driver: str = GPU) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def gpu(name: str, numa: Any = None, key: str = STANDARD) -> dict[str, Any]:
    return {"name": name, "attributes": {} if numa is None else {key: numa}}


ZONES = DeviceZones()
ZONES.put(
    "/s0",
    a_slice(
        "s0",
        [
            gpu("gpu-0", {"int": 0}),
            gpu("gpu-1", {"int": 1}),
            gpu("gpu-both", {"ints": [0, 1]}),
            gpu("gpu-none", {"int": -1}),
            gpu("gpu-missing"),
            gpu("gpu-huge", {"int": 10**9}),
        ],
    ),
)


def pick(device: str, claim: str = "train/gpu") -> Pick:
    return Pick(claim, "gpu", GPU, "pool-a", device)


@pytest.mark.parametrize(
    ("picks", "cpus", "verdict", "reason"),
    [
        pytest.param(["gpu-0"], [0], ALIGNED, "", id="on-the-cpu-zone"),
        pytest.param(
            ["gpu-1"],
            [0],
            MISALIGNED,
            "gpu-1 of claim train/gpu on NUMA 1, CPUs would be on NUMA 0",
            id="off-the-cpu-zone-named",
        ),
        pytest.param(["gpu-both"], [1], ALIGNED, "", id="list-near-every-zone"),
        pytest.param(["gpu-0", "gpu-1"], [0, 1], ALIGNED, "", id="cpus-on-two-zones"),
        pytest.param(["gpu-none"], [0], UNKNOWN, "gpu-none of claim train/gpu: NUMA node not known", id="minus-one"),
        pytest.param(["gpu-missing"], [0], UNKNOWN, "NUMA node not known (no NUMA attribute", id="missing"),
        pytest.param(["gpu-huge"], [0], UNKNOWN, "is no NUMA node", id="huge-value"),
        pytest.param(["gpu-gone"], [0], UNKNOWN, "published by no ResourceSlice seen", id="unpublished"),
        pytest.param(["gpu-missing", "gpu-1"], [0], MISALIGNED, "gpu-1", id="misaligned-beats-unknown"),
        pytest.param(["gpu-1"], [], UNPINNED, "", id="no-pinned-cpus-nothing-to-align"),
        pytest.param(["gpu-1"], None, UNKNOWN, "CPU zones not predicted", id="cpu-zones-unknown"),
        pytest.param([], [0], ALIGNED, "", id="no-devices"),
    ],
)
def test_judge(picks: list[str], cpus: list[int] | None, verdict: str, reason: str) -> None:
    found = judge([pick(d) for d in picks], ZONES, cpus)
    assert found.verdict == verdict
    assert reason in found.reason


@pytest.mark.parametrize(
    ("attributes", "why"),
    [
        pytest.param({STANDARD: {"int": "zero"}}, "attributes not readable", id="string-in-int"),
        pytest.param({STANDARD: {"int": 1.5}}, "attributes not readable", id="non-integer"),
        pytest.param({STANDARD: {"int": -3}}, "is no NUMA node", id="negative"),
        pytest.param({STANDARD: {"ints": []}}, "is no NUMA node", id="empty-list"),
        pytest.param({STANDARD: {"string": "0"}}, "is not a number", id="a-string-attribute"),
        pytest.param({"unknown.example.com/numa": {"int": 0}}, "no NUMA attribute", id="unknown-domain"),
        pytest.param("not a map", "attributes not readable", id="attributes-not-a-map"),
    ],
)
def test_bad_numa_attributes_are_unknown_with_why(attributes: Any, why: str) -> None:
    found = slice_devices(a_slice("s", [{"name": "d", "attributes": attributes}]))
    where = found[(GPU, "pool-a", "d")]
    assert where.zones is None
    assert why in where.why


def test_a_slice_with_unreadable_entries_keeps_the_others() -> None:
    found = slice_devices(a_slice("s", [{"noname": 1}, "junk", gpu("ok", {"int": 1})]))  # type: ignore[list-item]
    assert list(found) == [(GPU, "pool-a", "ok")]


def test_zones_follow_slice_changes() -> None:
    zones = DeviceZones()
    zones.put("/s", a_slice("s", [gpu("g", {"int": 0})]))
    assert zones.of(GPU, "pool-a", "g").zones == {0}  # type: ignore[union-attr]
    zones.put("/s", a_slice("s", [gpu("g", {"int": 1})]))
    assert zones.of(GPU, "pool-a", "g").zones == {1}  # type: ignore[union-attr]
    zones.delete("/s")
    assert zones.of(GPU, "pool-a", "g") is None


def test_ten_thousand_devices_on_one_node() -> None:
    zones = DeviceZones()
    zones.put("/big", a_slice("big", [gpu(f"d{i}", {"int": i % 8}) for i in range(10_000)]))
    assert judge([pick("d9999")], zones, [7]).verdict == ALIGNED


@pytest.mark.parametrize(
    ("pod", "refs"),
    [
        pytest.param({"spec": {}}, [], id="no-claims"),
        pytest.param(
            {"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared-gpu"}]}},
            [ClaimRef("gpu", "shared-gpu")],
            id="named-claim",
        ),
        pytest.param(
            {
                "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}, {"name": "nic"}]},
                "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k"}]},
            },
            [ClaimRef("gpu", "p-gpu-x7k"), ClaimRef("nic", None)],
            id="from-template-by-status-and-not-created-yet",
        ),
        pytest.param({"spec": {"resourceClaims": ["junk", {"name": 3}]}}, [], id="unreadable-entries-skipped"),
    ],
)
def test_pod_claims(pod: dict[str, Any], refs: list[ClaimRef]) -> None:
    assert pod_claims(pod) == refs


@pytest.mark.parametrize(
    ("annotation", "default", "policy", "mode"),
    [
        pytest.param(None, AUTO, "single-numa-node", STRICT, id="auto-strict-single-numa-node"),
        pytest.param(None, AUTO, "restricted", STRICT, id="auto-strict-restricted"),
        pytest.param(None, AUTO, "best-effort", PREFER, id="auto-prefer-best-effort"),
        pytest.param(None, AUTO, "", PREFER, id="auto-prefer-without-nrt"),
        pytest.param("off", AUTO, "single-numa-node", "off", id="pod-annotation-wins"),
        pytest.param(None, "prefer", "single-numa-node", PREFER, id="cluster-default"),
    ],
)
def test_mode_of(annotation: str | None, default: str, policy: str, mode: str) -> None:
    assert mode_of(annotation, default, policy) == mode


def test_check_mode() -> None:
    assert check_mode(None) is None
    assert check_mode("strict") is None
    assert check_mode("Strict") == "'Strict' is not one of strict, prefer, off"


def test_allocation_picks() -> None:
    claim = {
        "metadata": {"namespace": "train", "name": "gpu"},
        "status": {
            "allocation": {"devices": {"results": [{"request": "r", "driver": GPU, "pool": "p", "device": "g"}]}}
        },
    }
    assert allocation_picks(claim) == [Pick("train/gpu", "r", GPU, "p", "g")]
    assert allocation_picks({"metadata": {}, "status": {}}) is None


def guaranteed(cpu: str) -> Any:
    res = {"cpu": cpu, "memory": "1Gi"}
    return pod_from_spec({"containers": [{"name": "c", "resources": {"requests": res, "limits": res}}]})


NODE = NodeTopology(
    "n",
    (NumaZone(0, {"cpu": Decimal(8)}, {"cpu": Decimal(8)}, {"cpu": Decimal(8)}),),
    "single-numa-node",
    "container",
    "static",
    "None",
)


@pytest.mark.parametrize(
    ("pod", "nrt", "predicted", "zones"),
    [
        pytest.param(guaranteed("2"), NODE, [0], [0], id="pinned-on-the-predicted-zone"),
        pytest.param(guaranteed("1500m"), NODE, [0], [], id="fractional-cpus-not-pinned"),
        pytest.param(guaranteed("2"), None, [0], None, id="no-nrt-unknown"),
        pytest.param(guaranteed("2"), NodeTopology("n", (), cpu_manager="none"), [0], [], id="cpu-manager-none"),
        pytest.param(guaranteed("2"), NODE, [], None, id="no-zones-predicted"),
    ],
)
def test_cpu_zones(pod: Any, nrt: NodeTopology | None, predicted: list[int], zones: list[int] | None) -> None:
    assert cpu_zones(pins_cpus(pod), nrt, predicted) == zones
