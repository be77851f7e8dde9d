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

import numpy as np
import numpy.typing as npt

from toposched.apis.kubelet import BEST_EFFORT, NONE, SINGLE_NUMA_NODE

Bools = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]


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


def single_numa_choice(providers: Sequence[tuple[bool | Bools, Bools]], zones: Bools) -> tuple[Bools, Ints]:
    """single-numa-node's merge, for one node or many at once: (admitted, zone position or -1).

    The policy keeps only preferred single-zone hints, so the merged hint is the lowest zone
    (positions follow NUMA ids) every hinting provider prefers; when no provider hints, any zone
    (-1). ``providers``: per provider, where it hints at all ([...]) and its preferred single
    zones ([zone, ...]); ``zones``: which positions hold a zone ([zone, ...])."""
    ok = zones.copy()
    hinted: bool | Bools = False
    for hints, prefers in providers:
        ok &= ~np.asarray(hints) | prefers
        hinted = hinted | hints
    admitted = ok.any(axis=0) | ~np.asarray(hinted)
    return admitted, np.where(hinted, ok.argmax(axis=0), -1)


def merge(
    providers: Iterable[ProviderHints],
    numa_ids: Sequence[int],
    policy: str,
    distances: Mapping[int, Mapping[int, int]] | None = None,
) -> Decision:
    """Merge the providers' hints as the kubelet does and say whether the pod is admitted.

    ``distances`` (NUMA id -> NUMA id -> distance) turns on the prefer-closest-numa-nodes option:
    among equally good masks of one size, the closest NUMA nodes win; single-numa-node ignores it.
    A provider gives, per resource, None (no preference), [] (impossible) or mask hints.
    """
    if policy == NONE:
        return Decision(None, True, True)
    if policy == SINGLE_NUMA_NODE:
        return _merge_single_numa(providers, numa_ids)
    better: Better = closer(distances) if distances else narrower
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
    target = 0
    for hs in lists:
        narrowest = [h.affinity for h in hs if h.affinity is not None]
        if narrowest:
            target = max(target, min(count(a) for a in narrowest))
    chosen = _best_preferred(lists, default, target, better) or _best_merged(lists, default, target, better)
    chosen = chosen or Hint(default, False)
    admit = policy == BEST_EFFORT or chosen.preferred
    return Decision(chosen.affinity, chosen.preferred, admit)


# The kubelet merges every combination of one hint per list (a product that explodes past a few
# zones: 4,095 masks each on 12 zones). ``_pick`` is a total order on merged hints (preferred
# first; then a mask of the target size, then narrower ones from the largest, then wider ones from
# the smallest; ties by ``better``), so the best combination's hint is the best of the distinct
# merged hints, which the two functions below enumerate without the product.


def _best_preferred(lists: Sequence[Sequence[Hint]], default: int, target: int, better: Better) -> Hint | None:
    """A merged hint is preferred when every hint of its combination is and their masks are one
    mask A (or none): so A must be a preferred mask, or "no preference", of every list."""
    common: set[int] | None = None
    seen: set[int] = set()
    every_nil = True
    for hs in lists:
        mine = {h.affinity for h in hs if h.preferred and h.affinity is not None}
        seen |= mine
        if any(h.preferred and h.affinity is None for h in hs):
            continue  # this list can say "no preference" to any A
        every_nil = False
        common = mine if common is None else common & mine
    found = {default & a for a in (seen if common is None else common)}
    if every_nil:
        found.add(default)
    best: Hint | None = None
    for m in sorted(found):
        if m:
            best = _pick(best, Hint(m, True), target, better)
    return best


def _best_merged(lists: Sequence[Sequence[Hint]], default: int, target: int, better: Better) -> Hint | None:
    """Without a preferred combination, the best of every mask some combination ANDs to: the
    AND-closure over the lists, as a table of at most 2^n masks."""
    size = 1 << default.bit_length()
    reach = np.zeros(size, dtype=np.bool_)
    reach[default] = True
    for hs in lists:
        at = np.flatnonzero(reach)
        nxt = np.zeros(size, dtype=np.bool_)
        for a in {h.affinity for h in hs}:
            if a is None:
                nxt[at] = True
            else:
                nxt[at & a] = True
        reach = nxt
    best: Hint | None = None
    for m in np.flatnonzero(reach).tolist():
        if m:
            best = _pick(best, Hint(m, False), target, better)
    return best


def _merge_single_numa(providers: Iterable[ProviderHints], numa_ids: Sequence[int]) -> Decision:
    """``single_numa_choice`` for one node's hint lists."""
    ids = sorted(numa_ids)
    position = {n: i for i, n in enumerate(ids)}
    hinting: list[tuple[bool | Bools, Bools]] = []
    for provider in providers:
        for hints in provider.values():
            if hints is None or any(h.affinity is None and h.preferred for h in hints):
                continue  # no preference
            prefers = np.zeros(len(ids), dtype=np.bool_)
            for h in hints:
                if h.preferred and h.affinity is not None and count(h.affinity) == 1:
                    prefers[position[bits(h.affinity)[0]]] = True
            hinting.append((True, prefers))
    admitted, zone = single_numa_choice(hinting, np.ones(len(ids), dtype=np.bool_))
    if not admitted:
        return Decision(None if len(ids) > 1 else mask(*ids), False, False)
    if zone < 0:  # nobody asked for alignment: any zone (the kubelet's default of every zone)
        return Decision(None if len(ids) > 1 else mask(*ids), True, True)
    return Decision(mask(ids[int(zone)]), True, True)
