from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.builders import appgroup_spec
from toposched.apis.appgroup import AppGroupSpec, SortingAlgorithm
from toposched.operators.appgroup.toposort import InvalidSpecError, sort_spec

A = SortingAlgorithm


def spec(
    deps: dict[str, Sequence[str]], algorithm: SortingAlgorithm = A.KAHN, names: dict[str, str] | None = None
) -> AppGroupSpec:
    """A spec whose workloads are the keys of ``deps`` in order; name = selector unless ``names`` says."""
    return AppGroupSpec.model_validate(appgroup_spec(deps, algorithm=algorithm.value, names=names))


# Online Boutique: P1 frontend ... P11 redis-cart, dependencies in declared order.
BOUTIQUE = {
    "P1": ["P2", "P3", "P4", "P6", "P8", "P9", "P10"],
    "P2": ["P11"],
    "P3": [],
    "P4": [],
    "P5": [],
    "P6": [],
    "P7": [],
    "P8": ["P2", "P3", "P4", "P5", "P6", "P7"],
    "P9": ["P3"],
    "P10": [],
    "P11": [],
}


def p(*ids: int) -> list[str]:
    return [f"P{i}" for i in ids]


@pytest.mark.parametrize(
    ("deps", "algorithm", "expected"),
    [
        # Upstream's own vectors (appgroup-controller tests and the KEP).
        (BOUTIQUE, A.KAHN, p(1, 10, 9, 8, 7, 6, 5, 4, 3, 2, 11)),
        (BOUTIQUE, A.ALTERNATE_KAHN, p(1, 11, 10, 2, 9, 3, 8, 4, 7, 5, 6)),
        (BOUTIQUE, A.REVERSE_KAHN, p(11, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1)),
        # Tarjan with the outer loop in spec order (the KEP's row came from a random map order).
        (BOUTIQUE, A.TARJAN, p(1, 10, 9, 8, 7, 5, 6, 4, 3, 2, 11)),
        (BOUTIQUE, A.REVERSE_TARJAN, p(11, 2, 3, 4, 6, 5, 7, 8, 9, 10, 1)),
        (BOUTIQUE, A.ALTERNATE_TARJAN, p(1, 11, 10, 2, 9, 3, 8, 4, 7, 6, 5)),
        ({"P1": ["P2"], "P2": ["P3"], "P3": []}, A.KAHN, p(1, 2, 3)),
        ({"P1": ["P2"], "P2": ["P3"], "P3": []}, A.TARJAN, p(1, 2, 3)),
        ({"P1": ["P2"], "P2": ["P3"], "P3": []}, A.REVERSE_KAHN, p(3, 2, 1)),
        # Isolated workloads are kept (upstream drops them); roots pop in spec order.
        ({"a": [], "b": [], "c": []}, A.KAHN, ["a", "b", "c"]),
        ({"a": [], "b": [], "c": []}, A.TARJAN, ["c", "b", "a"]),
        ({"a": ["b"], "lonely": [], "b": []}, A.KAHN, ["a", "b", "lonely"]),
        # Diamond: a -> b, c -> d.
        ({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}, A.KAHN, ["a", "c", "b", "d"]),
        ({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}, A.TARJAN, ["a", "c", "b", "d"]),
        ({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}, A.ALTERNATE_KAHN, ["a", "d", "c", "b"]),
        ({}, A.KAHN, []),
        ({"only": []}, A.ALTERNATE_TARJAN, ["only"]),
    ],
    ids=[
        "boutique-kahn",
        "boutique-alternate-kahn",
        "boutique-reverse-kahn",
        "boutique-tarjan",
        "boutique-reverse-tarjan",
        "boutique-alternate-tarjan",
        "chain-kahn",
        "chain-tarjan",
        "chain-reverse-kahn",
        "isolated-kahn",
        "isolated-tarjan",
        "isolated-among-edges",
        "diamond-kahn",
        "diamond-tarjan",
        "diamond-alternate-kahn",
        "empty",
        "single-workload",
    ],
)
def test_order(deps: dict[str, list[str]], algorithm: SortingAlgorithm, expected: list[str]) -> None:
    result = sort_spec(spec(deps, algorithm))
    assert result.order == expected
    assert result.cycles == []


def test_name_differs_from_selector() -> None:
    names = {"fe": "frontend-deployment", "db": "redis"}
    result = sort_spec(spec({"db": [], "fe": ["db"]}, names=names))
    assert result.order == ["fe", "db"]


@pytest.mark.parametrize(
    ("deps", "algorithm", "order", "cycles"),
    [
        ({"a": ["b"], "b": ["a"]}, A.KAHN, ["a", "b"], [["a", "b"]]),
        (
            {"x": ["a"], "a": ["b"], "b": ["c"], "c": ["a"], "z": []},
            A.KAHN,
            ["x", "a", "b", "c", "z"],
            [["a", "b", "c"]],
        ),
        ({"a": ["b"], "b": ["a"], "c": ["d"], "d": ["c"]}, A.KAHN, ["a", "b", "c", "d"], [["a", "b"], ["c", "d"]]),
        ({"a": ["b"], "b": ["a", "c"], "c": []}, A.TARJAN, ["a", "b", "c"], [["a", "b"]]),
        ({"a": ["b"], "b": ["a", "c"], "c": []}, A.REVERSE_TARJAN, ["c", "b", "a"], [["a", "b"]]),
        ({"c": [], "b": ["a"], "a": ["b", "c"]}, A.KAHN, ["b", "a", "c"], [["b", "a"]]),
    ],
    ids=[
        "two-cycle",
        "three-cycle-with-tails",
        "two-cycles",
        "tarjan-cycle",
        "reverse-tarjan-cycle",
        "spec-order-members",
    ],
)
def test_cycles_are_condensed(
    deps: dict[str, list[str]], algorithm: SortingAlgorithm, order: list[str], cycles: list[list[str]]
) -> None:
    result = sort_spec(spec(deps, algorithm))
    assert result.order == order
    assert result.cycles == cycles


@pytest.mark.parametrize(
    ("deps", "names", "message"),
    [
        ({"a": ["ghost"]}, None, "workloads[0] (a).dependencies[0]: no workload has selector 'ghost'"),
        ({"a": ["a"]}, None, "workloads[0] (a).dependencies[0]: a workload cannot depend on itself"),
        ({"a": ["b", "b"], "b": []}, None, "workloads[0] (a).dependencies[1]: 'b' is listed twice"),
        ({"a": [], "b": []}, {"a": "same", "b": "same"}, "workloads[1]: name 'same' is already used by workload 'a'"),
    ],
    ids=["unknown-dependency", "self-dependency", "duplicate-dependency", "duplicate-name"],
)
def test_invalid_spec_is_reported_precisely(
    deps: dict[str, list[str]], names: dict[str, str] | None, message: str
) -> None:
    with pytest.raises(InvalidSpecError) as info:
        sort_spec(spec(deps, names=names))
    assert message in info.value.problems


def test_duplicate_selector_and_mismatched_name() -> None:
    bad = AppGroupSpec.model_validate(
        {
            "numMembers": 2,
            "workloads": [
                {"workload": {"kind": "Deployment", "name": "a", "selector": "s"}},
                {
                    "workload": {"kind": "Deployment", "name": "b", "selector": "s"},
                    "dependencies": [{"workload": {"kind": "Deployment", "name": "zz", "selector": "s"}}],
                },
            ],
        }
    )
    with pytest.raises(InvalidSpecError) as info:
        sort_spec(bad)
    assert info.value.problems == [
        "workloads[1]: selector 's' is already used by workloads[0]",
        "workloads[1] (s).dependencies[0]: names 'zz' but the workload with selector 's' is named 'a'",
    ]


# --- properties ---------------------------------------------------------------------------


@st.composite
def dags(draw: st.DrawFn) -> dict[str, list[str]]:
    """A random DAG: edges only go from a lower to a higher index of a random permutation."""
    n = draw(st.integers(min_value=0, max_value=25))
    names = [f"w{i}" for i in range(n)]
    rank = draw(st.permutations(range(n)))
    deps: dict[str, list[str]] = {}
    for i in range(n):
        later = [j for j in range(n) if rank[j] > rank[i]]
        chosen = draw(st.lists(st.sampled_from(later), unique=True, max_size=4)) if later else []
        deps[names[i]] = [names[j] for j in chosen]
    return deps


@settings(max_examples=150, deadline=None)
@given(dags(), st.sampled_from([A.KAHN, A.TARJAN]))
def test_every_edge_is_respected(deps: dict[str, list[str]], algorithm: SortingAlgorithm) -> None:
    order = sort_spec(spec(deps, algorithm)).order
    position = {w: i for i, w in enumerate(order)}
    assert sorted(order) == sorted(deps)
    for w, ds in deps.items():
        for d in ds:
            assert position[w] < position[d], f"{w} depends on {d}"


@settings(max_examples=100, deadline=None)
@given(dags())
def test_reverse_and_alternate_relations(deps: dict[str, list[str]]) -> None:
    for base, reverse, alternate in [
        (A.KAHN, A.REVERSE_KAHN, A.ALTERNATE_KAHN),
        (A.TARJAN, A.REVERSE_TARJAN, A.ALTERNATE_TARJAN),
    ]:
        order = sort_spec(spec(deps, base)).order
        assert sort_spec(spec(deps, reverse)).order == order[::-1]
        alt = sort_spec(spec(deps, alternate)).order
        assert alt[0::2] == order[: (len(order) + 1) // 2]
        assert alt[1::2] == order[::-1][: len(order) // 2]


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdefgh"), st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=3)))
def test_any_graph_gives_a_complete_order(raw: dict[str, list[str]]) -> None:
    # Arbitrary graphs, cycles included: every workload appears exactly once.
    deps = {w: [d for d in ds if d in raw and d != w] for w, ds in raw.items()}
    result = sort_spec(spec(deps))
    assert sorted(result.order) == sorted(deps)
    for cycle in result.cycles:
        span = [result.order.index(w) for w in cycle]
        assert max(span) - min(span) == len(cycle) - 1, "a cycle's members stay together"
