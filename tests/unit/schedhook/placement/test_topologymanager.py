import itertools
import math
import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from toposched.apis.kubelet import BEST_EFFORT, NONE, RESTRICTED, SINGLE_NUMA_NODE
from toposched.schedhook.placement.kubelet.topologymanager import (
    Decision,
    Hint,
    _pick,
    closer,
    count,
    mask,
    masks,
    merge,
    narrower,
)

T, F = True, False
ALL2 = mask(0, 1)


def h(affinity: int | None, preferred: bool) -> Hint:
    return Hint(affinity, preferred)


@pytest.mark.parametrize(
    ("providers", "numa", "expected"),
    [
        # Upstream policy_test.go vectors (best-effort expectations).
        ([{"r": [h(mask(0), T)]}, {"r": [h(mask(0), T)]}], [0, 1], (mask(0), T)),
        ([{"r": [h(mask(0), T), h(mask(1), T)]}, {"r": [h(mask(1), T)]}], [0, 1], (mask(1), T)),
        ([{"r": [h(mask(0), T)]}, {"r": [h(mask(1), T)]}], [0, 1], (ALL2, F)),
        ([{"r": [h(mask(0), T)]}, {"r": [h(mask(0), F)]}], [0, 1], (mask(0), F)),
        ([{"r": [h(mask(0), T)]}, {"r": [h(ALL2, T)]}], [0, 1], (mask(0), F)),
        (
            [{"r": [h(mask(1), T), h(ALL2, F)]}, {"r": [h(mask(0), T), h(mask(1), T), h(ALL2, F)]}],
            [0, 1],
            (mask(1), T),
        ),
        ([{"r": [h(mask(0, 1, 2, 3), F), h(mask(0, 1), F)]}, {"r": [h(mask(0, 3), F)]}], [0, 1, 2, 3], (mask(0, 3), F)),
        ([{"r": []}], [0, 1], (ALL2, F)),
        ([{"r": None}], [0, 1], (ALL2, T)),
        ([{}], [0, 1], (ALL2, T)),
    ],
    ids=[
        "K1",
        "K2",
        "K3",
        "K4",
        "K5-unequal-masks",
        "K6",
        "K7-four-numa-target",
        "K8-impossible",
        "K8-nil",
        "K8-empty",
    ],
)
def test_best_effort_merge(
    providers: list[dict[str, list[Hint] | None]], numa: list[int], expected: tuple[int, bool]
) -> None:
    decision = merge(providers, numa, BEST_EFFORT)
    assert (decision.affinity, decision.preferred) == expected
    assert decision.admit


@pytest.mark.parametrize(
    ("policy", "admit", "affinity"),
    [(BEST_EFFORT, True, ALL2), (RESTRICTED, False, ALL2), (SINGLE_NUMA_NODE, False, None), (NONE, True, None)],
    ids=["best-effort-admits", "restricted-rejects", "single-numa-node-rejects", "none-ignores"],
)
def test_conflicting_hints_by_policy(policy: str, admit: bool, affinity: int | None) -> None:
    decision = merge([{"cpu": [h(mask(0), T)]}, {"nic": [h(mask(1), T)]}], [0, 1], policy)
    assert (decision.admit, decision.affinity) == (admit, affinity)


def test_single_numa_node_drops_multi_numa_hints() -> None:
    decision = merge([{"cpu": [h(ALL2, T)]}], [0, 1], SINGLE_NUMA_NODE)
    assert decision == Decision(None, False, False)
    assert merge([{"cpu": [h(mask(1), T), h(ALL2, F)]}], [0, 1], SINGLE_NUMA_NODE) == Decision(mask(1), True, True)


def test_masks_order_and_narrower() -> None:
    assert masks([0, 1, 2]) == [1, 2, 4, 3, 5, 6, 7]
    assert narrower(mask(1), mask(0, 1))
    assert narrower(mask(0), mask(1))
    assert not narrower(mask(2), mask(1))


@st.composite
def provider_lists(draw: st.DrawFn) -> tuple[list[dict[str, list[Hint] | None]], list[int]]:
    """Hint lists as the resource managers give them: None (no preference), [] or mask hints."""
    ids = sorted(draw(st.sets(st.integers(0, 5), min_size=1, max_size=4)))
    every = masks(ids)
    providers = []
    for _ in range(draw(st.integers(0, 3))):
        resources: dict[str, list[Hint] | None] = {}
        for r in range(draw(st.integers(1, 2))):
            if draw(st.booleans()):
                resources[f"r{r}"] = None
            else:
                chosen = draw(st.lists(st.sampled_from(every), unique=True, max_size=len(every)))
                resources[f"r{r}"] = [h(m, draw(st.booleans())) for m in sorted(chosen, key=every.index)]
        providers.append(resources)
    return providers, ids


def kubelet_single_numa_node(providers: list[dict[str, list[Hint] | None]], ids: list[int]) -> Decision:
    """The kubelet's own way, as reference: keep only preferred single-zone hints, merge them as
    restricted does, and admit only a preferred result (every zone then means any)."""
    kept: list[dict[str, list[Hint] | None]] = [
        {
            r: None
            if hs is None
            else [x for x in hs if x.preferred and x.affinity is not None and count(x.affinity) == 1]
            for r, hs in p.items()
        }
        for p in providers
    ]
    merged = merge(kept, ids, RESTRICTED)
    affinity = None if merged.affinity == mask(*ids) and len(ids) > 1 else merged.affinity
    return Decision(affinity, merged.preferred, merged.admit)


@settings(max_examples=500, deadline=None)
@given(provider_lists())
def test_single_numa_node_merge_is_the_kubelets_filter_then_merge(
    case: tuple[list[dict[str, list[Hint] | None]], list[int]],
) -> None:
    providers, ids = case
    expected = kubelet_single_numa_node(providers, ids)
    got = merge(providers, ids, SINGLE_NUMA_NODE)
    assert got.admit == expected.admit
    if got.admit:
        assert got.affinity == expected.affinity


def kubelet_product_merge(
    providers: list[dict[str, list[Hint] | None]], ids: list[int], distances: dict[int, dict[int, int]] | None
) -> Hint:
    """The kubelet's own merge, as reference: every combination of one hint per list, each merged
    (AND of the masks; preferred when all are and the masks are one), the best kept by its order."""
    better = closer(distances) if distances else narrower
    default = mask(*ids)
    lists = [
        [Hint(None, True)] if hs is None else hs if hs else [Hint(None, False)]
        for p in providers
        for hs in (p.values() if p else [None])
    ]
    target = max((min(count(x.affinity) for x in hs if x.affinity is not None) for hs in lists if any(
        x.affinity is not None for x in hs)), default=0)  # fmt: skip
    best: Hint | None = None
    for combo in itertools.product(*lists):
        non_nil = [x.affinity for x in combo if x.affinity is not None]
        merged = default
        for a in non_nil:
            merged &= a
        if merged:
            preferred = all(x.preferred for x in combo) and len(set(non_nil)) <= 1
            best = _pick(best, Hint(merged, preferred), target, better)
    return best or Hint(default, False)


@settings(max_examples=500, deadline=None)
@given(provider_lists(), st.booleans(), st.randoms(use_true_random=False))
def test_the_merge_is_the_kubelets_product_of_hints(
    case: tuple[list[dict[str, list[Hint] | None]], list[int]], closest: bool, rng: random.Random
) -> None:
    """Without enumerating the product (which explodes on machines of many zones)."""
    providers, ids = case
    combinations = math.prod(len(hs or [None]) for p in providers for hs in p.values())
    assume(combinations <= 20_000)  # the reference enumerates them
    distances = {i: {j: 10 if i == j else rng.choice([11, 12, 20, 21]) for j in ids} for i in ids} if closest else None
    expected = kubelet_product_merge(providers, ids, distances)
    got = merge(providers, ids, RESTRICTED, distances)
    assert (got.affinity, got.preferred) == (expected.affinity, expected.preferred)


def test_twelve_zones_with_every_mask_in_four_lists_merge_at_once() -> None:
    """4,095 hints per list: the product would be 2.8e14 combinations."""
    ids = list(range(12))
    every = [h(m, count(m) >= 6) for m in masks(ids)]
    providers: list[dict[str, list[Hint] | None]] = [{"cpu": every, "memory": every}, {"a": every}, {"b": every}]
    assert merge(providers, ids, RESTRICTED) == Decision(mask(0, 1, 2, 3, 4, 5), True, True)
