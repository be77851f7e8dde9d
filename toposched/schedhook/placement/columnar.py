"""A columnar view of many nodes' NUMA zones, for evaluating one pod against thousands of nodes at once. Pure.

The commonest case -- one container, a node under single-numa-node that says which resource
managers run, LeastAllocated or MostAllocated scoring -- is answered for every such node with a
handful of array operations instead of a Python loop per node. It writes no kubelet rule of its
own: it calls the predictor's functions (``kubelet.claims``, ``kubelet.hints`` on the single zones,
``topologymanager.single_numa_choice``) and the scorer's (``score.allocation_score``) on its
columns, where the predictor calls them on one node's. (Under single-numa-node, a one-container
pod's allocations cannot fail once its merged hint is admitted: every manager takes what the
chosen zone has free.) Quantities are integers in thousandths (requests rounded up, capacities
down), as the predictor's hints count them.

The table is kept between calls: ``sync`` rebuilds only the rows whose NodeTopology object changed.
"""

import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from toposched.apis.kubelet import FULL_PCPUS_ONLY, POD_SCOPE, SINGLE_NUMA_NODE, STATIC_CPU, STATIC_MEMORY
from toposched.schedhook.placement.kubelet import hints
from toposched.schedhook.placement.kubelet.claims import CPU, container_claims, device, qos
from toposched.schedhook.placement.kubelet.devicemanager import not_enough
from toposched.schedhook.placement.kubelet.facts import facts_of, may_pin_alone
from toposched.schedhook.placement.kubelet.hints import Bools, Ints, milli, milli_request
from toposched.schedhook.placement.kubelet.reasons import cannot_align, cannot_allocate, first_shortfall, subject
from toposched.schedhook.placement.kubelet.topologymanager import single_numa_choice
from toposched.schedhook.placement.model import HOST_LEVEL, POD, NodeTopology, Pod
from toposched.schedhook.placement.score import (
    EXACT,
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    allocation_score,
    flat_score,
)

STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED)
MEMO_SHAPES = 32
"""Pod shapes whose answers a table keeps (least recently used dropped first)."""
VERDICT_SHAPES = 8
"""Pod shapes whose per-node predictions (nodes answered one by one) a table keeps."""
MEMO_DETAILS = 4096
"""Reason texts a memo may collect over its patches (at least twice its first count)."""


@dataclass
class Answer:
    """The vectorised verdicts for some rows of the table."""

    admitted: Bools
    numa_zone: Ints
    """The NUMA id the kubelet would use, or -1 when no request gets a hint (every zone)."""
    score: Ints
    reason: Ints
    """Per row, why it is rejected as a position in ``details`` (-1: admitted)."""
    details: list[str]


class NodeTable:
    def __init__(self) -> None:
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.nodes: list[NodeTopology | None] = []
        self._free: list[int] = []
        self.columns: dict[str, int] = {}
        self._rows_of: tuple[tuple[str, ...], Ints] | None = None
        self._verdicts: OrderedDict[Hashable, dict[str, tuple[weakref.ref[NodeTopology], Any]]] = OrderedDict()
        self._allocate(0, 1, 1)

    _ARRAYS = (
        "numa",
        "capacity",
        "allocatable",
        "available",
        "aligned",
        "bearing",
        "reach_held",
        "reach_free",
        "loose",
        "in_available",
        "single_numa",
        "pinnable",
        "cpu_zones",
        "zone_count",
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
        self.aligned = np.zeros((resources, rows), dtype=np.bool_)
        """The device manager aligns the resource (``DeviceFacts.aligned``; else it gives no hint)."""
        self.bearing = np.zeros((resources, rows), dtype=np.int64)
        """How many zones have devices of the resource (``DeviceFacts.bearing``)."""
        self.reach_held = np.zeros(shape, dtype=np.int64)
        self.reach_free = np.zeros(shape, dtype=np.int64)
        """The devices (free ones) a zone alone reaches (``DeviceFacts.reach``), in thousandths."""
        self.loose = np.full((resources, rows), -1, dtype=np.int64)
        """Free devices of a resource listed without any topology (``DeviceFacts.loose``; -1: none such)."""
        self.in_available = np.zeros((resources, rows), dtype=np.bool_)
        self.single_numa = np.zeros(rows, dtype=np.bool_)
        self.pinnable = np.zeros((zones, rows), dtype=np.bool_)
        """May memory be pinned to the zone alone (``facts.may_pin_alone``)."""
        self.cpu_zones = np.zeros(rows, dtype=np.int64)
        """How many zones have CPUs (the NUMA nodes the CPU manager knows)."""
        self.zone_count = np.zeros(rows, dtype=np.int64)
        self.cpu_static = np.zeros(rows, dtype=np.bool_)
        self.memory_static = np.zeros(rows, dtype=np.bool_)
        self.pod_scope = np.zeros(rows, dtype=np.bool_)
        self.version = np.zeros(rows, dtype=np.int64)
        """Bumped whenever a row is refilled or vacated: memoised answers of other rows stay valid."""
        self.large = False
        """Some row holds an amount above ``score.EXACT`` (kept until the table is rebuilt)."""
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
            if len(node.zones) > self.numa.shape[0] or any(r not in self.columns for r in _resources(node)):
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
        resources = {r for n in nodes.values() for r in _resources(n)}
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
        facts = facts_of(node)
        for array in (self.capacity, self.allocatable, self.available, self.reach_held, self.reach_free):
            array[:, :, i] = 0
        self.numa[:, i] = -1
        self.in_available[:, i] = False
        self.pinnable[:, i] = False
        for z, zone in enumerate(node.zones):
            self.numa[z, i] = zone.numa
            self.pinnable[z, i] = may_pin_alone(zone.numa, facts.groups)
            for array, values in (
                (self.capacity, zone.capacity),
                (self.allocatable, zone.allocatable),
                (self.available, zone.available),
            ):
                for resource, value in values.items():
                    amount = array[self.columns[resource], z, i] = milli(value)
                    self.large = self.large or amount > EXACT
            for resource in zone.available:
                self.in_available[self.columns[resource], i] = True
        self.aligned[:, i] = False
        self.bearing[:, i] = 0
        self.loose[:, i] = -1
        for resource in {*facts.reported, *node.device_groups}:  # the others have no devices on this node
            if not device(resource):
                continue
            known, column = facts.devices(resource), self.columns[resource]
            self.aligned[column, i] = known.aligned
            self.bearing[column, i] = len(known.bearing)
            self.loose[column, i] = known.loose
            for z, zone in enumerate(node.zones):
                held, free = known.reach[facts.position[zone.numa]]
                self.reach_held[column, z, i], self.reach_free[column, z, i] = 1000 * held, 1000 * free
        self.zone_count[i] = len(node.zones)
        self.cpu_zones[i] = len(facts.cpu_ids)
        # full-pcpus-only can reject what the zones hold (whole cores): such nodes ask the predictor.
        self.single_numa[i] = (
            node.policy == SINGLE_NUMA_NODE and node.knows_managers and FULL_PCPUS_ONLY not in node.cpu_options
        )
        self.cpu_static[i] = node.cpu_manager == STATIC_CPU
        self.memory_static[i] = node.memory_manager == STATIC_MEMORY
        self.pod_scope[i] = node.scope == POD_SCOPE
        self.version[i] += 1

    def verdicts(self, shape: Hashable) -> dict[str, tuple[weakref.ref[NodeTopology], Any]]:
        """Per node name, the NRT view a pod shape was last predicted on and what came out, for
        nodes answered one by one: the next pod of the same shape predicts again only on nodes
        whose view changed (a new NodeTopology object; the old one is not kept alive)."""
        found = self._verdicts.get(shape)
        if found is None:
            found = self._verdicts[shape] = {}
            while len(self._verdicts) > VERDICT_SHAPES:
                self._verdicts.popitem(last=False)
        self._verdicts.move_to_end(shape)
        return found

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
        container = pod.containers[0]
        # In request order: a shortfall reason names the first short request (and the container).
        key = (container.name, tuple(container.request.items()), qos(pod), strategy, tuple(sorted(weights.items())))
        memo = self._memo.get(key)
        if memo is None or len(memo.answer.details) > memo.limit:
            query = _Query(pod, strategy, weights)
            memo = _Memo(query, self.version.copy(), self._compute(query, None))
            self._memo[key] = memo
            self._memo.move_to_end(key)
            while len(self._memo) > MEMO_SHAPES:
                self._memo.popitem(last=False)
        else:
            self._memo.move_to_end(key)
            dirty = np.flatnonzero(memo.version != self.version)
            if len(dirty):
                memo.patch(dirty, self._compute(memo.query, dirty))
                memo.version[dirty] = self.version[dirty]
        whole = memo.answer
        return Answer(
            admitted=whole.admitted[rows],
            numa_zone=whole.numa_zone[rows],
            score=whole.score[rows],
            reason=whole.reason[rows],
            details=whole.details,
        )

    def _compute(self, query: "_Query", rows: Ints | None) -> Answer:
        """The answers for ``rows`` (None: every row, read in place without gathering)."""
        view = _Rows(self, slice(None) if rows is None else rows)
        valid = view.numa >= 0
        admitted, first = single_numa_choice(view.preferred(query), valid)
        hinted = first >= 0
        first = np.maximum(first, 0)
        picked = np.arange(len(first))
        zone = np.where(hinted, view.numa[first, picked], -1)
        if query.flat is None:
            score = view.score(query, hinted, picked, first, valid)
        else:
            score = np.full(len(first), query.flat, dtype=np.int64)
        reason, details = view.reasons(query, admitted)
        return Answer(admitted=reason < 0, numa_zone=zone, score=score, reason=reason, details=details)


class _Query:
    """What a pod shape asks of every row, worked out once for all its evaluations."""

    def __init__(self, pod: Pod, strategy: str, weights: Mapping[str, int]) -> None:
        container = pod.containers[0]
        request = container.request
        self.requests = list(request.items())
        self.subject = subject(pod, container)
        self.flat = flat_score(pod)
        self.strategy = strategy
        claims = container_claims(pod, container)
        self.cpus = milli_request(Decimal(claims.cpus))
        self.memory = list(claims.memory)
        self.memory_amounts = np.array([milli_request(q) for q in claims.memory.values()], dtype=np.int64)
        self.devices = [(r, q, milli_request(q)) for r, q in claims.devices.items()]
        scored = {r: q for r, q in request.items() if q > 0 and r not in HOST_LEVEL}
        self.scored = list(scored)
        self.wanted = np.array([milli_request(q) for q in scored.values()], dtype=np.int64)
        self.weights = np.array([weights.get(r, 1) for r in scored], dtype=np.int64)


class _Rows:
    """Some rows of a table, each array gathered once (views of the table when ``at`` is every row)."""

    def __init__(self, table: NodeTable, at: Ints | slice) -> None:
        self.table, self.at = table, at
        self.columns = table.columns
        self.large = table.large
        self.numa = table.numa[:, at]
        self.capacity = table.capacity[:, :, at]
        self.allocatable = table.allocatable[:, :, at]
        self.available = table.available[:, :, at]
        self.aligned = table.aligned[:, at]
        self.bearing = table.bearing[:, at]
        self.loose = table.loose[:, at]
        self.in_available = table.in_available[:, at]
        self.pod_scope = table.pod_scope[at]
        self.cpu_static = table.cpu_static[at]
        self.memory_static = table.memory_static[at]
        self.cpu_zones = table.cpu_zones[at]
        self.zone_count = table.zone_count[at]
        self.pinnable = table.pinnable[:, at]

    def preferred(self, query: _Query) -> list[tuple[Bools, Bools]]:
        """Per manager that may hint: on which rows it does, and its preferred single zones there."""
        singles = hints.single_zones(self.numa.shape[0])
        out = []
        if query.cpus:
            capacity, available = self.column(self.capacity, CPU), self.column(self.available, CPU)
            _, prefers = hints.cpu_hints(singles, capacity, available, query.cpus, known=self.cpu_zones)
            out.append((self.cpu_static, prefers))
        if query.memory:
            _, prefers = hints.memory_hints(
                singles,
                self.stacked(self.allocatable, query.memory),
                self.stacked(self.available, query.memory),
                query.memory_amounts,
                known=self.zone_count,
                allowed=self.pinnable,
            )
            out.append((self.memory_static, prefers))
        for resource, _, amount in query.devices:
            column = self.columns.get(resource)
            if column is None:
                continue  # no node lists it: no hint anywhere
            held, free = self.table.reach_held[column][:, self.at], self.table.reach_free[column][:, self.at]
            _, prefers = hints.device_hints(singles, held, free, amount, self.bearing[column])
            out.append((self.aligned[column], prefers))
        return out

    def reasons(self, query: _Query, merged: Bools) -> tuple[Ints, list[str]]:
        """Why each row rejects the pod (-1: it admits it), as positions in the returned texts: the
        Topology Manager's merge, else the device manager's allocation of devices without topology
        (the only allocation that can fail once single-numa-node admitted one container)."""
        reason = np.full(len(merged), -1, dtype=np.int64)
        texts: list[str] = []
        misaligned = np.flatnonzero(~merged)
        if len(misaligned):
            detail, details = first_shortfall(query.requests, self.available_of, len(merged), misaligned)
            codes = (detail[misaligned] + 1) * 2 + self.pod_scope[misaligned]  # few distinct among many rows
            distinct, of = np.unique(codes, return_inverse=True)
            for code in distinct.tolist():
                shortfall, scoped = divmod(code, 2)
                who = POD if scoped else query.subject
                texts.append(cannot_align(who, SINGLE_NUMA_NODE, details[shortfall - 1] if shortfall else ""))
            reason[misaligned] = of.reshape(-1)
        for resource, amount, wanted in query.devices:
            column = self.columns.get(resource)
            if column is None:
                continue
            loose = self.loose[column]
            short = np.flatnonzero((reason < 0) & (loose >= 0) & (1000 * loose < wanted))
            if not len(short):
                continue
            codes = loose[short] * 2 + self.pod_scope[short]
            distinct, of = np.unique(codes, return_inverse=True)
            first = len(texts)
            for code in distinct.tolist():
                free, scoped = divmod(code, 2)
                texts.append(cannot_allocate(POD if scoped else query.subject, not_enough(resource, amount, free)))
            reason[short] = first + of.reshape(-1)
        return reason, texts

    def column(self, array: Ints, resource: str) -> Ints:
        """[zone, row] of one resource; zeros where no row has it."""
        column = self.columns.get(resource)
        if column is None:
            return np.zeros(self.numa.shape, dtype=np.int64)
        values: Ints = array[column]
        return values

    def available_of(self, resource: str) -> tuple[Ints, Bools] | None:
        column = self.columns.get(resource)
        if column is None:
            return None
        return self.available[column], self.in_available[column]

    def stacked(self, array: Ints, resources: Sequence[str]) -> Ints:
        """[resource, zone, row] of several resources; zeros where no row has one."""
        found = [self.columns.get(r, -1) for r in resources]
        if -1 in found:
            return np.stack([self.column(array, r) for r in resources])
        values: Ints = array[found]
        return values

    def score(self, query: _Query, hinted: Bools, picked: Ints, first: Ints, valid: Bools) -> Ints:
        """Least/MostAllocated on the predicted zone (every zone merged when no request got a hint)."""
        if not query.scored:
            return np.zeros(len(picked), dtype=np.int64)
        free = np.empty((len(query.scored), len(picked)), dtype=np.int64)
        for i, resource in enumerate(query.scored):  # one contiguous column at a time
            per_zone = np.where(valid, self.column(self.available, resource), 0)
            free[i] = np.where(hinted, per_zone[first, picked], per_zone.sum(axis=0))
        return allocation_score(query.strategy, query.wanted, free, query.weights, self.large)


class _Memo:
    """Answers for every row of the table for one pod shape, with the row versions they saw."""

    def __init__(self, query: _Query, version: Ints, answer: Answer) -> None:
        self.query = query
        self.version = version
        self.answer = answer
        self._detail_ids = {text: i for i, text in enumerate(answer.details)}
        self.limit = max(MEMO_DETAILS, 2 * len(answer.details))
        """Patches add reason texts; past this many the memo starts afresh."""

    def patch(self, rows: Ints, fresh: Answer) -> None:
        whole = self.answer
        whole.admitted[rows] = fresh.admitted
        whole.numa_zone[rows] = fresh.numa_zone
        whole.score[rows] = fresh.score
        ids = np.array([self._detail_id(text) for text in fresh.details] + [-1], dtype=np.int64)
        whole.reason[rows] = ids[fresh.reason]  # -1 picks the trailing -1

    def _detail_id(self, text: str) -> int:
        found = self._detail_ids.get(text)
        if found is None:
            found = self._detail_ids[text] = len(self.answer.details)
            self.answer.details.append(text)
        return found


def eligible_pod(pod: Pod, strategy: str, exclusive: bool) -> bool:
    return (
        strategy in STRATEGIES
        and not exclusive
        and len(pod.containers) == 1
        and not pod.init_containers
        and pod.resources is None
    )


def _resources(node: NodeTopology) -> set[str]:
    """The resources a node's row has columns for: its zones', and devices it lists only as groups."""
    return {*(r for z in node.zones for r in (*z.allocatable, *z.available)), *node.device_groups}
