"""The DRA oracle's pure parts: seeded cases that replay alone and render objects the API takes
(pools with the right slice count, the case's own names), and the comparison of a prediction with
what kube-scheduler did, documented disagreements apart."""

from collections import Counter

import pytest

from testkit.oracle.runs import exit_status, summary
from testkit.oracle_dra.__main__ import ORACLE
from testkit.oracle_dra.cases import Case, case, generate
from testkit.oracle_dra.compare import Disagreement, compare
from testkit.oracle_dra.objects import GATE, render
from testkit.oracle_dra.observe import CaseRun, Observation
from testkit.oracle_dra.predict import Prediction
from toposched.schedhook.extender.allocatorproc import NodePick
from toposched.schedhook.placement.dra import Pick

NODES = ["w-0", "w-1", "w-2"]


def test_a_case_depends_on_its_seed_and_number_alone() -> None:
    assert case(7, 41) == case(7, 41) == generate(7, 3, first=40)[1]
    assert case(7, 41) != case(7, 42)
    assert case(7, 41) != case(8, 41)


@pytest.mark.parametrize("number", range(40))
def test_rendered_pools_say_how_many_slices_they_have(number: int) -> None:
    objects = render(case(3, number), "ns-x", "w", NODES)
    slices = Counter((s["spec"]["driver"], s["spec"]["pool"]["name"]) for s in objects.slices)
    for body in objects.slices:
        spec = body["spec"]
        assert spec["pool"]["resourceSliceCount"] == slices[(spec["driver"], spec["pool"]["name"])]
        assert spec["nodeName"] in NODES
        assert spec["pool"]["name"].endswith("-ns-x")
    devices = [
        (s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
        for s in objects.slices
        for d in s["spec"]["devices"]
    ]
    assert len(devices) == len(set(devices))
    assert len({s["metadata"]["name"] for s in objects.slices}) == len(objects.slices)


def test_the_case_pod_alone_is_gated_and_its_classes_are_the_cases() -> None:
    drawn = next(c for c in generate(3, 50) if c.earlier and any(cl.template for cl in c.pod.claims))
    objects = render(drawn, "ns-y", "w", NODES)
    assert objects.case_pod.pod["spec"]["schedulingGates"] == [{"name": GATE}]
    assert all("schedulingGates" not in p.pod["spec"] for p in objects.earlier)
    classes = {c["metadata"]["name"] for c in objects.classes}
    for body in objects.case_pod.claims:
        spec = body["spec"]["spec"] if body["kind"] == "ResourceClaimTemplate" else body["spec"]
        for request in spec["devices"]["requests"]:
            for exactly in [request.get("exactly"), *request.get("firstAvailable", [])]:
                if exactly is not None:
                    assert exactly["deviceClassName"] in classes


def test_a_case_needing_more_nodes_than_the_worker_has_is_refused() -> None:
    drawn = next(c for c in generate(3, 50) if c.nodes == 3)
    with pytest.raises(ValueError, match="needs 3 nodes"):
        render(drawn, "ns", "w", NODES[:2])


GPU = "gpu.dra-oracle.example"


def pick(claim: str, device: str, request: str = "r0") -> Pick:
    return Pick(f"ns/{claim}", request, GPU, "pool", device)


def result(device: str, request: str = "r0") -> tuple[str, str, str, str]:
    return (request, GPU, "pool", device)


DRAWN: Case = case(1, 0)
CEL_ERROR = "claim ns/c: selector #0: CEL runtime error: no such key: numaNode"


def run(
    picks: dict[str, list[Pick]],
    node: str = "",
    reason: str = "",
    allocations: dict[str, list[tuple[str, str, str, str]] | None] | None = None,
    left_out: dict[str, NodePick] | None = None,
    seen: tuple[str, ...] = (),
) -> CaseRun:
    prediction = Prediction(picks, left_out or {})
    observation = Observation(node, reason, allocations or {})
    return CaseRun(DRAWN, "w", "ns", NODES, prediction, observation, claims=["ns/c"], allocated_seen=list(seen))


@pytest.mark.parametrize(
    ("case_run", "kinds", "documented"),
    [
        (run({"w-0": [pick("c", "g1")]}, "w-0", allocations={"ns/c": [result("g1")]}), [], []),
        (run({"w-0": [pick("c", "g1")]}, "w-0", allocations={"ns/c": [result("g2")]}), ["pick"], [""]),
        (
            run({"w-0": [pick("c", "g1", "r0/s1")]}, "w-0", allocations={"ns/c": [result("g1", "r0/s0")]}),
            ["pick"],
            [""],
        ),
        (run({"w-0": [pick("c", "g1")]}, "w-1", allocations={"ns/c": [result("g1")]}), ["node"], [""]),
        (run({}, reason="Unschedulable: 0/3 nodes are available"), [], []),
        (run({"w-1": [pick("c", "g1")]}, reason="Unschedulable: 0/3 nodes are available"), ["scheduled"], [""]),
        (run({}, reason=f"SchedulerError: {CEL_ERROR}", left_out={"w-0": NodePick(error=CEL_ERROR)}), [], []),
        (
            run({"w-1": [pick("c", "g1")]}, "w-1", left_out={"w-0": NodePick(error=CEL_ERROR)}),
            ["scheduled"],
            [""],
        ),
        (
            run({}, reason="SchedulerError: node w-2: timed out trying to allocate devices"),
            ["scheduled"],
            ["filter-timeout"],
        ),
        (
            run(
                {"w-0": [pick("c", "g1")]},
                "w-0",
                allocations={"ns/c": [result("g2")], "ns/earlier-0": [result("g1")]},
            ),
            ["pick"],
            ["in-flight"],
        ),
        (
            run(
                {"w-0": [pick("c", "g1")]},
                "w-0",
                allocations={"ns/c": [result("g2")], "ns/earlier-0": [result("g1")]},
                seen=("ns/earlier-0",),
            ),
            ["pick"],
            [""],
        ),
    ],
    ids=[
        "the same devices",
        "another device",
        "another subrequest",
        "bound where no fit was predicted",
        "unschedulable as predicted",
        "predicted to fit, unschedulable",
        "aborted on the predicted CEL error",
        "bound though a node's CEL error aborts",
        "the scheduler's filter timed out",
        "an earlier pod's allocation in flight",
        "an earlier pod's allocation seen, yet picked",
    ],
)
def test_compare(case_run: CaseRun, kinds: list[str], documented: list[str]) -> None:
    found = compare(case_run)
    assert [d.kind for d in found] == kinds
    assert [d.documented for d in found] == documented


def test_the_last_line_counts_undocumented_disagreements_only() -> None:
    runs = [run({}), run({})]
    found = [Disagreement(0, "pick", "x", "in-flight"), Disagreement(1, "pick", "y")]
    assert summary(ORACLE, len(runs), found) == "oracle-dra: 2 cases, 1 undocumented disagreements"
    assert exit_status([r.outcome for r in runs], found[:1]) == 0
    assert exit_status([r.outcome for r in runs], found) == 1
    runs[1].outcome = "error"
    assert exit_status([r.outcome for r in runs], []) == 2
