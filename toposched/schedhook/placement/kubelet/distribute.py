"""How many CPUs each NUMA zone gives under the CPU Manager's ``distribute-cpus-across-numa``. Pure.

The static policy with that option does not pack a request: it spreads it evenly over the
fewest NUMA zones that can hold it, choosing among the zone combinations the one that leaves
the free CPUs of all zones most balanced (the smallest standard deviation, rounded to
thousandths; the first such combination in its order wins ties). What cannot be spread evenly
goes out one CPU group (a core under ``full-pcpus-only``, else a CPU) at a time to a subset of
the chosen zones, again the most balanced one. A request that is not a whole number of groups
is packed instead (the caller's packed allocator). Only the counts are decided here; which CPUs
of a zone are taken is the packed allocator's business.
"""

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence


def _balance(free: Mapping[int, int]) -> float:
    values = list(free.values())
    mean = sum(values) / len(values)
    return round(math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) * 1000) / 1000


def _combinations(zones: Sequence[int], k: int) -> Iterator[tuple[int, ...]]:
    return itertools.combinations(zones, k) if k >= 1 else iter(())


def spread(
    available: Mapping[int, int], request: int, group: int, machine_cpus: int, machine_zones: int
) -> dict[int, int] | None:
    """Zone -> CPUs taken there for ``request`` CPUs out of ``available`` (the zones' CPUs the
    allocator may take); None when the request is not a whole number of ``group`` CPUs (the
    allocator then packs) or no combination holds it. ``machine_cpus`` and ``machine_zones``
    are the machine's (every CPU, every zone with CPUs): they bound how few zones may do."""
    if request < 1:
        return {}
    if request % group:
        return None
    zones = sorted((n for n, k in available.items() if k > 0), key=lambda n: (available[n], n))
    if sum(available[n] for n in zones) < request:
        return None
    groups_per_zone = ((machine_cpus - 1) // group + 1 - 1) // max(machine_zones, 1) + 1
    groups_needed = (request - 1) // group + 1
    fewest = (groups_needed - 1) // groups_per_zone + 1
    most = min(groups_needed, len(zones))
    for k in range(fewest, most + 1):
        best: tuple[float, tuple[int, ...], tuple[int, ...] | None] | None = None
        for combo in _combinations(zones, k):
            if best is not None and best[0] == 0:
                break
            found = _try(available, zones, combo, request, group)
            if found is not None and (best is None or found[0] < best[0]):
                best = (found[0], combo, found[1])
        if best is None:
            continue
        _, combo, remainder = best
        share = (request // len(combo) // group) * group
        taken = {n: share for n in combo}
        left = request - share * len(combo)
        while left > 0 and remainder:
            for n in remainder:
                if left == 0:
                    break
                if available[n] - taken[n] < group:
                    continue
                taken[n] += group
                left -= group
        return {n: k for n, k in taken.items() if k}
    return None


def _try(
    available: Mapping[int, int], zones: Sequence[int], combo: Sequence[int], request: int, group: int
) -> tuple[float, tuple[int, ...] | None] | None:
    """The balance ``combo`` leaves and the zones that take its remainder; None if it cannot hold
    the request."""
    if sum(available[n] for n in combo) < request:
        return None
    if sum(available[n] // group for n in combo) * group < request:
        return None
    share = (request // len(combo) // group) * group
    if any(available[n] < share for n in combo):
        return None
    after = {n: available[n] for n in zones}
    for n in combo:
        after[n] -= share
    remainder = request - share * len(combo)
    if remainder == 0:
        return _balance(after), None
    candidates = [n for n in combo if after[n] >= group]
    best: tuple[float, tuple[int, ...] | None] | None = None
    for k in range(len(candidates), 0, -1):
        for subset in _combinations(candidates, k):
            if sum(after[n] for n in subset) < remainder:
                continue
            trial = dict(after)
            left = remainder
            while left > 0:
                moved = False
                for n in subset:
                    if left == 0:
                        break
                    if trial[n] < group:
                        continue
                    trial[n] -= group
                    left -= group
                    moved = True
                if not moved:
                    break  # (the kubelet would spin here; the group sizes never let it)
            balance = _balance(trial)
            if best is None or balance < best[0]:
                best = (balance, subset)
    return best
