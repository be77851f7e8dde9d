"""How long the oracle waits for the kubelet to decide on a pod, by the machine's NUMA zone count. Pure.

The kubelet's Topology Manager merges its providers' hints by trying every combination: one hint
from each list (the CPU Manager's, the Memory Manager's per memory type, the device manager's per
resource), and each list can hold a hint for every non-empty set of zones. Up to 8 zones a pod
with CPUs and pinned memory costs at most 255 ** 2 combinations, a few hundredths of a second;
past 8 (only with ``max-allowable-numa-nodes``) the product grows fourfold per zone: 4,095 ** 2,
some 16.8 million, on 12 zones.

So the deadline is a base, what any decision gets on a loaded machine, plus the time that product
of two full lists takes at the pace a kubelet keeps when it shares the machine, capped. A pod with
more lists (hugepages, devices) can cost thousands of times more (three lists on 12 zones: hours),
which no deadline that keeps a run finite would wait out; such a case is not judged, and that is
not an error.
"""

from __future__ import annotations

import math

BASE_SECONDS = 30.0
"""What every decision gets: the kubelet's pod worker, its status write and a loaded machine."""

CAP_SECONDS = 300.0
"""No decision is waited for longer: the node's other cases wait behind it."""

MERGE_PACE = 2_000_000
"""Combinations a second the kubelet's merge (``HintMerger.Merge`` of 1.36) tries on one core of a
two-core machine, measured on two full lists of 8 to 12 zones."""

SLOWDOWN = 4 * 3
"""A kubelet beside seven others on two cores gets a quarter of one, and it merges once per
container of the pod (up to three in the cases)."""


def hint_combinations(zones: int, lists: int = 2) -> int:
    """The combinations the kubelet's merge tries for ``lists`` hint lists that each hold every
    non-empty set of ``zones`` zones."""
    masks = (1 << zones) - 1  # 2**zones - 1
    return math.prod([masks] * lists)


def decision_deadline(zones: int) -> float:
    """Seconds the oracle waits for the kubelet's decision on a pod of a machine of ``zones`` zones:
    30 up to 8 zones (0.4 more on 8), 36 on 10, 55 on 11, 131 on 12, 300 from 13 on."""
    work = hint_combinations(zones) * SLOWDOWN
    if work >= (CAP_SECONDS - BASE_SECONDS) * MERGE_PACE:
        return CAP_SECONDS  # compared before dividing: the product of many zones overflows a float
    return BASE_SECONDS + work / MERGE_PACE
