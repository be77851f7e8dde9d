"""Each pod's latest filter, kept for its prioritize and bind. Pure bookkeeping.

kube-scheduler prioritizes and binds a pod within milliseconds of its filter: the results are
looked up by pod uid instead of evaluated again, and a bind reserves what the filter predicted.
"""

from collections import OrderedDict
from dataclasses import dataclass
from decimal import Decimal
from typing import Self

from toposched.schedhook.extender.reservations import request_of
from toposched.schedhook.placement.evaluate import Results

KEEP_RESULTS = 64
"""Filter results kept for prioritize and bind (pods that never bind are forgotten oldest first).
kube-scheduler binds a pod within milliseconds of its filter; each result of 5,000 nodes is about
250 KB of columns."""


@dataclass
class Filtered:
    """A pod's latest filter: its results and what a bind of it reserves."""

    results: Results
    request: dict[str, Decimal]
    """The sum of its app containers' requests (what the NRT will show taken)."""
    member: tuple[str, str | None] | None
    """(AppGroup, workload) of an AppGroup member, from its labels."""

    @classmethod
    def of(cls, results: Results) -> Self:
        return cls(results, request_of(results.pod), results.meta.member if results.meta is not None else None)


class FilterMemory:
    """Per pod uid, the latest filter (at most ``KEEP_RESULTS``)."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, Filtered] = OrderedDict()

    def keep(self, uid: str, results: Results) -> None:
        self._kept[uid] = Filtered.of(results)
        self._kept.move_to_end(uid)
        while len(self._kept) > KEEP_RESULTS:
            self._kept.popitem(last=False)

    def get(self, uid: str) -> Filtered | None:
        return self._kept.get(uid)

    def pop(self, uid: str) -> Filtered | None:
        """The pod's filter, forgotten (a bind uses it once)."""
        return self._kept.pop(uid, None)

    def __len__(self) -> int:
        return len(self._kept)
