"""What an oracle run says of its cases: a case not judged (the kubelet did not decide in time) is
counted apart from a case that could not run, shown and marked in the JSON, and fails nothing."""

import json

import pytest

from testkit.oracle.cases import case
from testkit.oracle.compare import Disagreement
from testkit.oracle.observe import CaseRun, Observation, Prediction, Step, UndecidedError
from testkit.oracle.report import case_lines, exit_status, last_line, tally_line, to_json

SLOW = str(UndecidedError("c3-1", 47.2, 12))


def run(number: int, *, error: str = "", not_judged: str = "", admitted: int = 1) -> CaseRun:
    drawn = case(1, number)
    steps = [Step(i, drawn.kinds[i], drawn.pods[i], Prediction(True), Observation(i < admitted)) for i in range(2)]
    return CaseRun(drawn, "oracle-0", steps, error=error, not_judged=not_judged, seconds=12.34)


REJECTED = "toposched: admit; kubelet: rejected (TopologyAffinityError)"


def disagreement(number: int, documented: str = "") -> Disagreement:
    return Disagreement(number, 0, "admission", REJECTED, documented)


def test_the_kubelets_slowness_is_said_in_seconds() -> None:
    assert SLOW == "the kubelet took 47 s and had not decided on pod c3-1 (12 NUMA zones)"


@pytest.mark.parametrize(
    ("runs", "disagreements", "status"),
    [
        ([run(0), run(1)], [], 0),
        ([run(0), run(1, not_judged=SLOW)], [], 0),
        ([run(0, not_judged=SLOW), run(1, not_judged=SLOW)], [disagreement(0, "device-choice")], 0),
        ([run(0), run(1)], [disagreement(1)], 1),
        ([run(0), run(1, not_judged=SLOW)], [disagreement(0)], 1),
        ([run(0), run(1, error="RealNodeError: the kubelet of oracle-0 died")], [], 2),
        ([run(0, error="PodResourcesError: stream cut"), run(1, not_judged=SLOW)], [disagreement(0)], 2),
    ],
    ids=[
        "all judged",
        "one not judged",
        "not judged and documented",
        "undocumented",
        "not judged beside undocumented",
        "an error",
        "an error beats the rest",
    ],
)
def test_exit_status(runs: list[CaseRun], disagreements: list[Disagreement], status: int) -> None:
    assert exit_status(runs, disagreements) == status


def test_the_closing_lines_count_errors_and_cases_not_judged_apart() -> None:
    runs = [run(0), run(1, not_judged=SLOW), run(2, not_judged=SLOW), run(3, error="OSError: gone")]
    found = [disagreement(0, "unhealthy-devices"), disagreement(1)]
    assert tally_line(runs, found, 61.6) == (
        "8 pods judged by kubelets in 62s; disagreements by kind: "
        "{'admission/undocumented': 1, 'admission/unhealthy-devices': 1}; cases that could not run: 1; "
        "cases not judged (the kubelet did not decide in time): 2"
    )
    assert last_line(runs, found) == "oracle: 4 cases, 1 undocumented disagreements"
    assert last_line([], []) == "oracle: 0 cases, 0 undocumented disagreements"


def test_a_case_not_judged_is_shown_with_what_was_judged_before() -> None:
    slow = run(5, not_judged=SLOW, admitted=2)
    lines = case_lines(slow, [], verbose=False)
    assert lines[0] == (
        "case 5 (seed 1) on oracle-0: not judged: the kubelet took 47 s and had not decided on pod c3-1 "
        "(12 NUMA zones); 2 pods (2 admitted) judged before it, 0 disagreements, 12.3s"
    )
    assert lines[1] == f"    {slow.case.describe()}"
    assert len(lines) == 2


@pytest.mark.parametrize(
    ("verbose", "found", "count"),
    [(False, 0, 0), (True, 0, 2), (False, 1, 4)],
    ids=["quiet", "verbose", "a disagreement"],
)
def test_a_judged_case_is_shown_when_asked_or_when_it_disagrees(verbose: bool, found: int, count: int) -> None:
    judged = run(4)
    lines = case_lines(judged, [disagreement(4)] * found, verbose)
    assert len(lines) == count
    if lines:
        assert lines[0] == f"case 4 (seed 1) on oracle-0: 2 pods (1 admitted), {found} disagreements, 12.3s"
    if found:
        assert lines[2].startswith("    pod 0 [admission, UNDOCUMENTED] toposched: admit")
        assert json.loads(lines[3]) == judged.steps[0].spec


def test_an_error_is_shown_alone() -> None:
    failed = run(6, error="RealNodeError: the kubelet of oracle-0 died")
    assert case_lines(failed, [disagreement(6)], verbose=True) == [
        "case 6 (seed 1) on oracle-0: ERROR RealNodeError: the kubelet of oracle-0 died",
        f"    {failed.case.describe()}",
    ]


@pytest.mark.parametrize(
    ("made", "outcome"),
    [
        (run(0), "judged"),
        (run(0, not_judged=SLOW), "not judged"),
        (run(0, error="OSError: gone"), "error"),
    ],
    ids=["judged", "not judged", "error"],
)
def test_the_json_marks_each_cases_outcome(made: CaseRun, outcome: str) -> None:
    written = json.loads(json.dumps(to_json([made], []), default=str))
    (only,) = written["cases"]
    assert only["outcome"] == outcome
    assert only["not_judged"] == made.not_judged
    assert only["error"] == made.error
    assert len(only["steps"]) == 2
