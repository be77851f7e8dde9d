"""The kubelet Topology Manager's hint merge, as a pure function over NUMA bitmasks.

A mask is an int whose bit i stands for NUMA node i. A hint is (mask or None, preferred);
None means "no preference". Providers (CPU, memory, device managers) give, per resource, a
list of hints, ``None`` (don't care) or ``[]`` (impossible). The merge picks the affinity the
kubelet would pick and says whether the pod would be admitted under the policy.
"""

import functools
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

NONE = "none"
BEST_EFFORT = "best-effort"
RESTRICTED = "restricted"
SINGLE_NUMA_NODE = "single-numa-node"
POLICIES = (NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE)


@dataclass(frozen=True)
class Hint:
    affinity: int | None
    preferred: bool


ProviderHints = Mapping[str, Sequence[Hint] | None]


def mask(*numa: int) -> int:
    out = 0
    for n in numa:
        out |= 1 << n
    return out


@functools.cache
def bits(m: int) -> tuple[int, ...]:
    return tuple(i for i in range(m.bit_length()) if m >> i & 1)


def count(m: int) -> int:
    return m.bit_count()


def narrower(a: int, b: int) -> bool:
    """True when ``a`` is narrower than ``b``: fewer NUMA nodes, ties to lower ids (smaller value)."""
    return (count(a), a) < (count(b), b)


def masks(numa_ids: Sequence[int]) -> list[int]:
    """Every non-empty mask over the ids, by size, then lexicographically (the kubelet's order)."""
    return list(_masks(tuple(sorted(numa_ids))))


@functools.cache
def _masks(numa_ids: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(
        mask(*combo) for size in range(1, len(numa_ids) + 1) for combo in itertools.combinations(numa_ids, size)
    )


Better = Callable[[int, int], bool]
"""``better(a, b)``: is mask ``a`` the one to keep over ``b`` when both are equally preferred."""


def closer(distances: Mapping[int, Mapping[int, int]]) -> Better:
    """The prefer-closest-numa-nodes order: fewer NUMA nodes first; among as many, the lower mean
    distance between every ordered pair of them (self included); then the lower ids."""

    def mean(m: int) -> float:
        ids = bits(m)
        return sum(distances.get(i, {}).get(j, 10 if i == j else 0) for i in ids for j in ids) / len(ids) ** 2

    def better(a: int, b: int) -> bool:
        if count(a) != count(b):
            return count(a) < count(b)
        da, db = mean(a), mean(b)
        return da < db if da != db else a < b

    return better


def _pick(best: Hint | None, cand: Hint, target: int, better: Better) -> Hint:
    if best is None:
        return cand
    assert best.affinity is not None
    assert cand.affinity is not None

    def keep_better() -> Hint:
        assert best is not None
        assert best.affinity is not None
        assert cand.affinity is not None
        return cand if cand.affinity != best.affinity and better(cand.affinity, best.affinity) else best

    if cand.preferred != best.preferred:
        return cand if cand.preferred else best
    if best.preferred:
        return keep_better()
    # Both not preferred: move toward a mask of the target size.
    cur, new = count(best.affinity), count(cand.affinity)
    if cur > target:
        return keep_better()
    if cur == target:
        return keep_better() if new == target else best
    if new > target:
        return best
    if new == target:
        return cand
    if new != cur:
        return cand if new > cur else best
    return keep_better()


@dataclass(frozen=True)
class Decision:
    affinity: int | None
    """The NUMA mask the kubelet would align to; None with single-numa-node means any."""
    preferred: bool
    admit: bool


def merge(
    providers: Iterable[ProviderHints],
    numa_ids: Sequence[int],
    policy: str,
    distances: Mapping[int, Mapping[int, int]] | None = None,
) -> Decision:
    """Merge the providers' hints as the kubelet does and say whether the pod is admitted.

    ``distances`` (NUMA id -> NUMA id -> distance) turns on the prefer-closest-numa-nodes option:
    among equally good masks of one size, the closest NUMA nodes win; single-numa-node ignores it.
    """
    better: Better = closer(distances) if distances and policy != SINGLE_NUMA_NODE else narrower
    if policy == NONE:
        return Decision(None, True, True)
    default = mask(*numa_ids)
    lists: list[list[Hint]] = []
    for provider in providers:
        if not provider:
            lists.append([Hint(None, True)])
            continue
        for hints in provider.values():
            if hints is None:
                lists.append([Hint(None, True)])
            elif not hints:
                lists.append([Hint(None, False)])
            else:
                lists.append(list(hints))
    if policy == SINGLE_NUMA_NODE:
        lists = [[h for h in hs if h.preferred and (h.affinity is None or count(h.affinity) == 1)] for hs in lists]
    target = 0
    for hs in lists:
        narrowest = [h.affinity for h in hs if h.affinity is not None]
        if narrowest:
            target = max(target, min(count(a) for a in narrowest))
    best: Hint | None = None
    for combo in itertools.product(*lists):
        merged = default
        non_nil = [h.affinity for h in combo if h.affinity is not None]
        for a in non_nil:
            merged &= a
        preferred = all(h.preferred for h in combo) and len(set(non_nil)) <= 1
        if count(merged) == 0:
            continue
        best = _pick(best, Hint(merged, preferred), target, better)
    chosen = best or Hint(default, False)
    affinity: int | None = chosen.affinity
    if policy == SINGLE_NUMA_NODE and affinity == default and len(numa_ids) > 1:
        affinity = None
    admit = policy == BEST_EFFORT or chosen.preferred
    return Decision(affinity, chosen.preferred, admit)
