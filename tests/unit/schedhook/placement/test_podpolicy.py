import pytest

from toposched.schedhook.placement.podpolicy import (
    IDLE,
    SHARED,
    SINGLE,
    PodPolicy,
    PolicyError,
    effective_policy,
    exclusive_ok,
    numa_status,
    parse_annotation,
)


@pytest.mark.parametrize(
    ("hint", "statuses", "ok"),
    [
        ([0], {0: IDLE, 1: SINGLE}, True),
        ([0], {0: SHARED, 1: SINGLE}, False),
        ([0], {0: SINGLE, 1: SHARED}, True),
        ([0, 1], {0: SHARED, 1: SINGLE}, False),
        ([0, 1], {0: SHARED, 1: IDLE}, True),
        ([0, 1], {0: SHARED, 1: SHARED}, True),
    ],
    ids=["X1-idle", "X1-shared", "X1-single-elsewhere", "X2-single-member", "X2-idle-member", "X2-all-shared"],
)
def test_required_exclusivity(hint: list[int], statuses: dict[int, str], ok: bool) -> None:
    assert exclusive_ok(hint, statuses) is ok


@pytest.mark.parametrize(
    ("pod", "node", "expected"),
    [
        ("SingleNUMANode", "single-numa-node", "single-numa-node"),
        ("SingleNUMANode", "none", "single-numa-node"),
        ("", "restricted", "restricted"),
        ("Restricted", "restricted", "restricted"),
        ("BestEffort", "none", "best-effort"),
        ("", "none", "none"),
    ],
)
def test_pod_versus_node_policy(pod: str, node: str, expected: str) -> None:
    policy = parse_annotation(f'{{"numaTopologyPolicy": "{pod}"}}')
    assert effective_policy(policy, node) == expected


@pytest.mark.parametrize(
    ("pod", "node"),
    [("SingleNUMANode", "restricted"), ("Restricted", "best-effort"), ("BestEffort", "restricted")],
    ids=["X3-single-on-restricted", "restricted-on-best-effort", "X3-best-effort-on-restricted"],
)
def test_policy_mismatch(pod: str, node: str) -> None:
    with pytest.raises(PolicyError, match="asks for"):
        effective_policy(parse_annotation(f'{{"numaTopologyPolicy": "{pod}"}}'), node)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{oops", "not JSON"),
        ("[1]", "expected a JSON object"),
        ('{"numaTopologyPolicy": "single"}', "is not one of"),
        ('{"singleNUMANodeExclusive": "Always"}', "'Preferred', 'Required'"),
        ('{"numaPolicy": "Restricted"}', "unknown fields: numaPolicy"),
    ],
    ids=["not-json", "not-object", "bad-policy", "bad-exclusive", "typo"],
)
def test_bad_annotations_are_explained(raw: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        parse_annotation(raw)


def test_absent_annotation_and_status() -> None:
    assert parse_annotation(None) == PodPolicy()
    assert parse_annotation('{"singleNUMANodeExclusive": "Required"}').exclusive == "Required"
    placements = [[0], [1, 2]]
    assert [numa_status(placements, n) for n in range(4)] == [SINGLE, SHARED, SHARED, IDLE]
