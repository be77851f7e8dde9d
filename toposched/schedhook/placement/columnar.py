"""A columnar view of many nodes' NUMA zones, for evaluating one pod against thousands of nodes at once. Pure.

The commonest case -- one container, a node under single-numa-node that says which resource
managers run, LeastAllocated or MostAllocated scoring -- is answered for every such node with a
handful of array operations instead of a Python loop per node (``fast.py`` is the same rule for
one node; a property test checks the two agree with ``numa.predict``). Quantities are integers in
thousandths (requests rounded up, capacities down), so comparisons and score divisions are exact.

The table is kept between calls: ``sync`` rebuilds only the rows whose NodeTopology object changed.
"""

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import numpy as np
import numpy.typing as npt

from toposched.schedhook.placement.model import HOST_LEVEL, NodeTopology, Pod, container_request, numa_affine
from toposched.schedhook.placement.score import LEAST_ALLOCATED, MAX_SCORE, MOST_ALLOCATED
from toposched.schedhook.placement.topologymanager import SINGLE_NUMA_NODE

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED)
MEMO_SHAPES = 32
"""Pod shapes whose answers a table keeps (least recently used dropped first)."""
MEMO_DETAILS = 4096
"""Shortfall texts a memo may collect over its patches (at least twice its first count)."""


EXACT = np.iinfo(np.int64).max // MAX_SCORE
"""Free amounts (in thousandths) above this make ``share * MAX_SCORE`` overflow 64 bits: zones
with tens of TiB of memory, which the bounds (``apis.limits``) allow; scored with Python ints."""


def milli(value: Decimal, rounding: str = ROUND_FLOOR) -> int:
    return int((value * 1000).to_integral_value(rounding))


@dataclass
class Answer:
    """The vectorised verdicts for some rows of the table."""

    admitted: Bools
    numa_zone: Ints
    """The NUMA id the kubelet would use, or -1 when no request gets a hint (every zone)."""
    score: Ints
    shortfall: Ints
    """Per row, a position in ``details`` (-1: none): for rejected rows, which request no zone can
    hold, when some zone reports it."""
    details: list[str]


class NodeTable:
    def __init__(self) -> None:
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.nodes: list[NodeTopology | None] = []
        self._free: list[int] = []
        self.columns: dict[str, int] = {}
        self.width = 0
        self._rows_of: tuple[tuple[str, ...], Ints] | None = None
        self._allocate(0, 1, 1)

    _ARRAYS = (
        "numa",
        "capacity",
        "allocatable",
        "available",
        "reported",
        "in_available",
        "single_numa",
        "cpu_static",
        "memory_static",
        "pod_scope",
        "version",
    )

    def _allocate(self, rows: int, zones: int, resources: int) -> None:
        # Rows (nodes) are the last axis: an operation on one resource of one zone then runs over
        # contiguous memory, and reductions over zones are ten times faster than along a short axis.
        shape = (resources, zones, rows)
        self.numa = np.full((zones, rows), -1, dtype=np.int64)
        self.capacity = np.zeros(shape, dtype=np.int64)
        self.allocatable = np.zeros(shape, dtype=np.int64)
        self.available = np.zeros(shape, dtype=np.int64)
        self.reported = np.zeros((resources, rows), dtype=np.bool_)
        """Some zone lists the resource in allocatable (a device no zone reports is host-level)."""
        self.in_available = np.zeros((resources, rows), dtype=np.bool_)
        self.single_numa = np.zeros(rows, dtype=np.bool_)
        self.cpu_static = np.zeros(rows, dtype=np.bool_)
        self.memory_static = np.zeros(rows, dtype=np.bool_)
        self.pod_scope = np.zeros(rows, dtype=np.bool_)
        self.version = np.zeros(rows, dtype=np.int64)
        """Bumped whenever a row is refilled or vacated: memoised answers of other rows stay valid."""
        self.large = False
        """Some row holds an amount above ``EXACT`` (kept until the table is rebuilt)."""
        self._memo: OrderedDict[tuple[object, ...], _Memo] = OrderedDict()

    def sync(self, nodes: Mapping[str, NodeTopology]) -> None:
        """Follow ``nodes``: changed objects refill their row, new names take a free row (or a new
        one), vanished names free theirs; only a zone count or resource never seen rebuilds."""
        gone = [n for n in self.index if n not in nodes] if nodes.keys() != self.index.keys() else []
        self.update(nodes, [*gone, *nodes])

    def update(self, nodes: Mapping[str, NodeTopology], names: Iterable[str]) -> None:
        """Like ``sync`` when only ``names`` can have changed (been added, replaced or removed)."""
        for name in names:
            node = nodes.get(name)
            i = self.index.get(name)
            if node is None:
                if i is not None:
                    self._vacate(self.index.pop(name))
                    self._rows_of = None
                continue
            if i is not None and self.nodes[i] is node:
                continue
            if len(node.zones) > self.numa.shape[0] or any(
                r not in self.columns for z in node.zones for r in (*z.allocatable, *z.available)
            ):
                self._rebuild(nodes)
                return
            if i is None:
                i = self._free_row()
                self.index[name] = i
                self.names[i] = name
                self._rows_of = None
            self.nodes[i] = node
            self._fill(i, node)

    def _vacate(self, i: int) -> None:
        self.names[i] = ""
        self.nodes[i] = None
        self.numa[:, i] = -1
        self.single_numa[i] = False
        self.version[i] += 1
        self._free.append(i)

    def _free_row(self) -> int:
        if self._free:
            return self._free.pop()
        rows = len(self.names)
        if rows == self.version.shape[0]:  # grow by half, keeping the rows filled so far
            grown = max(8, rows + rows // 2)
            for attribute in self._ARRAYS:
                old = getattr(self, attribute)
                new = np.zeros((*old.shape[:-1], grown), dtype=old.dtype)
                new[..., :rows] = old
                setattr(self, attribute, new)
            self.numa[:, rows:] = -1
            self._memo.clear()
        self.names.append("")
        self.nodes.append(None)
        return rows

    def _rebuild(self, nodes: Mapping[str, NodeTopology]) -> None:
        zones = max((len(n.zones) for n in nodes.values()), default=1) or 1
        resources = {r for n in nodes.values() for z in n.zones for r in (*z.allocatable, *z.available)}
        self.names = list(nodes)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.columns = {r: i for i, r in enumerate(sorted(resources))}
        self.nodes = list(nodes.values())
        self._free = []
        self._rows_of = None
        self._allocate(len(self.names), zones, max(1, len(self.columns)))
        for i, node in enumerate(self.nodes):
            if node is not None:
                self._fill(i, node)

    def _fill(self, i: int, node: NodeTopology) -> None:
        for array in (self.capacity, self.allocatable, self.available):
            array[:, :, i] = 0
        self.numa[:, i] = -1
        self.reported[:, i] = False
        self.in_available[:, i] = False
        for z, zone in enumerate(node.zones):
            self.numa[z, i] = zone.numa
            for array, values in (
                (self.capacity, zone.capacity),
                (self.allocatable, zone.allocatable),
                (self.available, zone.available),
            ):
                for resource, value in values.items():
                    amount = array[self.columns[resource], z, i] = milli(value)
                    self.large = self.large or amount > EXACT
            for resource in zone.allocatable:
                self.reported[self.columns[resource], i] = True
            for resource in zone.available:
                self.in_available[self.columns[resource], i] = True
        self.single_numa[i] = node.policy == SINGLE_NUMA_NODE and node.knows_managers
        self.cpu_static[i] = node.cpu_manager == "static"
        self.memory_static[i] = node.memory_manager == "Static"
        self.pod_scope[i] = node.scope == "pod"
        self.version[i] += 1

    def rows(self, names: Sequence[str]) -> Ints:
        """Row of each name (-1: not in the table); the last answer is kept, as candidates repeat."""
        key = tuple(names)
        if self._rows_of is not None and self._rows_of[0] == key:
            return self._rows_of[1]
        rows = np.fromiter((self.index.get(n, -1) for n in names), dtype=np.int64, count=len(names))
        self._rows_of = (key, rows)
        return rows

    def zones_of(self, row: int) -> list[int]:
        return [int(n) for n in self.numa[:, row] if n >= 0]

    def answer(self, pod: Pod, rows: Ints, strategy: str, weights: Mapping[str, int]) -> Answer:
        """Admission under single-numa-node, the zone and the score, for ``rows`` (all eligible).

        Pods of one workload ask the same thing over and over, and between two of them only a few
        rows change (a bind's reservation, an NRT update). So the answer for every row is kept
        per pod shape, and only rows whose version moved are computed again.
        """
        request = container_request(pod.containers[0])
        # In request order: a shortfall reason names the first short request.
        key = (tuple(request.items()), pod.qos, strategy, tuple(sorted(weights.items())))
        memo = self._memo.get(key)
        if memo is None or len(memo.answer.details) > memo.limit:
            memo = _Memo(self.version.copy(), self._compute(pod, None, strategy, weights))
            self._memo[key] = memo
            self._memo.move_to_end(key)
            while len(self._memo) > MEMO_SHAPES:
                self._memo.popitem(last=False)
        else:
            self._memo.move_to_end(key)
            dirty = np.flatnonzero(memo.version != self.version)
            if len(dirty):
                memo.patch(dirty, self._compute(pod, dirty, strategy, weights))
                memo.version[dirty] = self.version[dirty]
        whole = memo.answer
        return Answer(
            admitted=whole.admitted[rows],
            numa_zone=whole.numa_zone[rows],
            score=whole.score[rows],
            shortfall=whole.shortfall[rows],
            details=whole.details,
        )

    def _compute(self, pod: Pod, rows: Ints | None, strategy: str, weights: Mapping[str, int]) -> Answer:
        """The answers for ``rows`` (None: every row, read in place without gathering)."""
        at: Ints | slice = slice(None) if rows is None else rows
        numa = self.numa[:, at]
        count = numa.shape[1]
        valid = numa >= 0
        admitted = np.ones(count, dtype=np.bool_)
        zone_ok = valid.copy()
        hinted = np.zeros(count, dtype=np.bool_)
        guaranteed = pod.qos == "Guaranteed"
        request = container_request(pod.containers[0])
        for resource, amount in request.items():
            if amount <= 0 or resource in HOST_LEVEL:
                continue
            column = self.columns.get(resource)
            if resource == "cpu":
                if not (guaranteed and amount == amount.to_integral_value()):
                    continue
                applies = self.cpu_static[at]
                bound = self.capacity
            elif numa_affine(resource):
                if not guaranteed:
                    continue
                applies = self.memory_static[at]
                bound = self.allocatable
            else:
                if column is None:
                    continue  # no node reports it: no hint anywhere
                applies = self.reported[column, at]
                bound = self.allocatable
            if not applies.any():
                continue
            wanted = milli(amount, ROUND_CEILING)
            if column is None:  # hinted but absent from every zone: no zone can hold it
                admitted &= ~applies
                zone_ok &= ~applies
            else:
                admitted &= ~applies | ((bound[column][:, at] >= wanted) & valid).any(axis=0)
                zone_ok &= ~applies | (self.available[column][:, at] >= wanted)
            hinted |= applies
        admitted &= zone_ok.any(axis=0) | ~hinted
        first = zone_ok.argmax(axis=0)
        picked = np.arange(count)
        zone = np.where(hinted, numa[first, picked], -1)
        if guaranteed:
            score = self._score(request, at, hinted, picked, first, valid, strategy, weights)
        else:
            score = np.full(count, MAX_SCORE, dtype=np.int64)
        shortfall, details = self._shortfall(request, at, admitted)
        return Answer(admitted=admitted, numa_zone=zone, score=score, shortfall=shortfall, details=details)

    def _score(
        self,
        request: Mapping[str, Decimal],
        at: Ints | slice,
        hinted: Bools,
        picked: Ints,
        first: Ints,
        valid: Bools,
        strategy: str,
        weights: Mapping[str, int],
    ) -> Ints:
        """Least/MostAllocated on the predicted zone (every zone merged when no request got a hint)."""
        scored = {r: q for r, q in request.items() if q > 0 and r not in HOST_LEVEL}
        count = len(picked)
        if not scored:
            return np.zeros(count, dtype=np.int64)
        total = np.zeros(count, dtype=np.int64)
        weight_sum = 0
        for resource, amount in scored.items():
            column = self.columns.get(resource)
            if column is None:
                free = np.zeros(count, dtype=np.int64)
            else:
                per_zone = np.where(valid, self.available[column][:, at], 0)
                free = np.where(hinted, per_zone[first, picked], per_zone.sum(axis=0))
            wanted = milli(amount, ROUND_CEILING)
            usable = (free > 0) & (wanted <= free)
            safe = np.where(free > 0, free, 1)
            share = wanted if strategy == MOST_ALLOCATED else free - wanted
            if self.large:  # exact, as the products may not fit 64 bits
                value = np.array(
                    [
                        s * MAX_SCORE // f
                        for s, f in zip(np.broadcast_to(share, safe.shape).tolist(), safe.tolist(), strict=True)
                    ],
                    dtype=np.int64,
                )
            else:
                value = share * MAX_SCORE // safe
            weight = max(1, weights.get(resource, 1))
            total += np.where(usable, value, 0) * weight
            weight_sum += weight
        return total // weight_sum

    def _shortfall(self, request: Mapping[str, Decimal], at: Ints | slice, admitted: Bools) -> tuple[Ints, list[str]]:
        detail = np.full(len(admitted), -1, dtype=np.int64)
        details: list[str] = []
        open_ = np.flatnonzero(~admitted)
        for resource, amount in request.items():  # the first short request (in request order) is named
            column = self.columns.get(resource)
            if column is None or not len(open_):
                continue
            which = open_ if isinstance(at, slice) else at[open_]
            best = self.available[column][:, which].max(axis=0)
            short = self.in_available[column, which] & (milli(amount, ROUND_CEILING) > best)
            if not short.any():
                continue
            values, of = np.unique(best[short], return_inverse=True)  # a few distinct values among many rows
            detail[open_[short]] = len(details) + of.reshape(-1)
            head = f"{resource} {show_quantity(amount)} requested, best zone has "
            details.extend(f"{head}{show_quantity(Decimal(v) / 1000)} available" for v in values.tolist())
            open_ = open_[~short]
        return detail, details


class _Memo:
    """Answers for every row of the table for one pod shape, with the row versions they saw."""

    def __init__(self, version: Ints, answer: Answer) -> None:
        self.version = version
        self.answer = answer
        self._detail_ids = {text: i for i, text in enumerate(answer.details)}
        self.limit = max(MEMO_DETAILS, 2 * len(answer.details))
        """Patches add shortfall texts; past this many the memo starts afresh."""

    def patch(self, rows: Ints, fresh: Answer) -> None:
        whole = self.answer
        whole.admitted[rows] = fresh.admitted
        whole.numa_zone[rows] = fresh.numa_zone
        whole.score[rows] = fresh.score
        ids = np.array([self._detail_id(text) for text in fresh.details] + [-1], dtype=np.int64)
        whole.shortfall[rows] = ids[fresh.shortfall]  # -1 picks the trailing -1

    def _detail_id(self, text: str) -> int:
        found = self._detail_ids.get(text)
        if found is None:
            found = self._detail_ids[text] = len(self.answer.details)
            self.answer.details.append(text)
        return found


def show_quantity(value: Decimal) -> str:
    """``6``, ``0.5``: how reasons print a quantity."""
    return str(int(value)) if value == value.to_integral_value() else str(value.normalize())


def eligible_pod(pod: Pod, strategy: str, exclusive: bool) -> bool:
    return strategy in STRATEGIES and not exclusive and len(pod.containers) == 1 and not pod.init_containers
