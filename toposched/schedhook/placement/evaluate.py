"""One pod against every candidate node: verdict, reason, predicted NUMA zones and scores. Pure.

Shared by the extender (filter and prioritize), ``toposched explain`` and the benchmarks.
"""

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from toposched.apis.appgroup import AppGroup
from toposched.apis.constants import NRT_ZONE_PREFIX, NUMA_TOPOLOGY_SPEC_ANNOTATION
from toposched.apis.kubelet import SINGLE_NUMA_NODE, STATIC_CPU, STATIC_MEMORY
from toposched.apis.quantity import parse_quantity
from toposched.schedhook.placement.columnar import NodeTable, eligible_pod
from toposched.schedhook.placement.dra import Alignment
from toposched.schedhook.placement.kubelet.admission import predict
from toposched.schedhook.placement.kubelet.claims import holds_exclusive
from toposched.schedhook.placement.kubelet.hints import Ints
from toposched.schedhook.placement.model import NodeTopology, Pod
from toposched.schedhook.placement.network import (
    Edge,
    Location,
    NetworkSettings,
    normalize,
    pair_cost,
    with_cohesion,
)
from toposched.schedhook.placement.network import evaluate as evaluate_network
from toposched.schedhook.placement.parse import PodMeta, parse_pod
from toposched.schedhook.placement.podpolicy import (
    PodPolicy,
    PolicyError,
    effective_policy,
    exclusive_ok,
    numa_status,
    parse_annotation,
)
from toposched.schedhook.placement.score import MOST_ALLOCATED, node_score
from toposched.schedhook.placement.snapshot import Snapshot


@dataclass
class PlacementConfig:
    numa_strategy: str = MOST_ALLOCATED
    resource_weights: dict[str, int] = field(default_factory=lambda: {"cpu": 1, "memory": 1})
    missing_nrt_fits: bool = True
    """Nodes without an NRT: pass with the lowest NUMA score (True) or fail."""
    network: NetworkSettings = field(default_factory=NetworkSettings)
    numa_weight: int = 1
    network_weight: int = 1
    vectorize: bool = True
    """Answer eligible nodes with the columnar path (False: one by one, for comparisons)."""


@dataclass
class NodeResult:
    node: str
    fit: bool
    reason: str = ""
    numa_zones: list[str] = field(default_factory=list)
    scores: dict[str, int] = field(default_factory=dict)
    score: int = 0
    devices: Alignment | None = None
    """How the DRA devices predicted here lie against the pod's pinned CPUs (None: no claims judged)."""

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "node": self.node,
            "fit": self.fit,
            "reason": self.reason,
            "numaZones": self.numa_zones,
            "scores": self.scores,
            "score": self.score,
        }
        if self.devices is not None:
            found["devices"] = {"verdict": self.devices.verdict, "reason": self.devices.reason}
        return found


def _edges(appgroup: AppGroup) -> list[Edge]:
    return [
        Edge(
            source=item.workload.selector,
            target=dep.workload.selector,
            max_cost=dep.max_network_cost,
            min_bandwidth=parse_quantity(dep.min_bandwidth) if dep.min_bandwidth is not None else None,
        )
        for item in appgroup.spec.workloads
        for dep in item.dependencies or ()
    ]


class Results:
    """One pod against many nodes, column by column (the extender answers thousands of nodes per call)."""

    def __init__(
        self, names: Sequence[str], table: NodeTable, rows: Ints, pod: Pod, meta: PodMeta | None = None
    ) -> None:
        count = len(names)
        self.pod = pod
        """The pod as evaluated (parsed once)."""
        self.meta = meta
        """Its metadata as parsed (None: the pod could not be read)."""
        self.names = tuple(names)
        """A tuple: once the collector has seen it holds only strings it stops tracking it, and the
        extender keeps hundreds of these (a list of thousands of names would be rescanned)."""
        self.table = table
        self.rows = rows
        self.fit = np.ones(count, dtype=np.bool_)
        self.reason = np.full(count, -1, dtype=np.int64)
        """Why each rejected node fails, as a position in ``texts`` (-1: it fits)."""
        self.texts: list[str] = []
        self._text_ids: dict[str, int] = {}
        self.numa_score = np.zeros(count, dtype=np.int64)
        self.has_numa = np.zeros(count, dtype=np.bool_)
        self.network_score: dict[int, int] = {}
        self.score = np.zeros(count, dtype=np.int64)
        self.numa_zone = np.full(count, -1, dtype=np.int64)
        """The predicted NUMA id from the columnar path; -1 with ``explicit`` unset: every zone."""
        self.explicit: dict[int, list[int]] = {}
        """Predicted NUMA ids of nodes answered one by one."""
        self.pod_error: str | None = None
        """Why the pod itself cannot be placed anywhere (it fails every node with this reason)."""
        self.devices: dict[int, Alignment] = {}
        """How the DRA devices predicted on a node lie against the pod's CPUs (nodes judged)."""
        self._fitting: tuple[str, ...] | None = None
        self._names: npt.NDArray[np.object_] | None = None
        self._position: dict[str, int] | None = None

    def _text_id(self, reason: str) -> int:
        found = self._text_ids.get(reason)
        if found is None:
            found = self._text_ids[reason] = len(self.texts)
            self.texts.append(reason)
        return found

    def fail(self, i: int, reason: str) -> None:
        self.fail_many(np.array([i], dtype=np.int64), [reason], np.zeros(1, dtype=np.int64))

    def fail_many(self, which: Ints, reasons: Sequence[str], of: Ints) -> None:
        """Reject nodes ``which``, the k-th for ``reasons[of[k]]`` (thousands of nodes share a few reasons)."""
        ids = np.array([self._text_id(r) for r in reasons], dtype=np.int64)
        self.fit[which] = False
        self.reason[which] = ids[of]
        self._fitting = None

    def fail_all(self, reason: str) -> None:
        count = len(self.names)
        self.fail_many(np.arange(count, dtype=np.int64), [reason], np.zeros(count, dtype=np.int64))

    def reason_of(self, i: int) -> str:
        code = int(self.reason[i])
        return self.texts[code] if code >= 0 else ""

    def name_array(self) -> "npt.NDArray[np.object_]":
        if self._names is None:
            self._names = np.empty(len(self.names), dtype=object)
            self._names[:] = self.names
        return self._names

    def numa_ids(self, i: int) -> list[int]:
        if not self.fit[i]:
            return []
        if i in self.explicit:
            return self.explicit[i]
        if self.numa_zone[i] >= 0:
            return [int(self.numa_zone[i])]
        row = self.table.index.get(self.names[i])  # by name: the row may have been reused since
        return self.table.zones_of(row) if row is not None else []

    def zones(self, i: int) -> list[str]:
        return [f"{NRT_ZONE_PREFIX}{n}" for n in self.numa_ids(i)]

    def has(self, node: str) -> bool:
        return node in self._positions()

    def prediction(self, node: str) -> tuple[list[int], list[str]]:
        """The NUMA ids and zone names the kubelet is predicted to use on ``node`` (none if it fails)."""
        i = self._positions()[node]
        return self.numa_ids(i), self.zones(i)

    def failed(self, prefix: str = "") -> dict[str, str]:
        """Each rejected node's reason (``prefix`` before it), spread from a few distinct texts."""
        failed = np.flatnonzero(~self.fit)
        texts = np.empty(len(self.texts), dtype=object)
        texts[:] = [f"{prefix}{t}" for t in self.texts]
        return dict(zip(self.name_array()[failed].tolist(), texts[self.reason[failed]].tolist(), strict=True))

    def _positions(self) -> dict[str, int]:
        if self._position is None:
            self._position = {n: i for i, n in enumerate(self.names)}
        return self._position

    def fitting(self) -> tuple[str, ...]:
        if self._fitting is None:
            self._fitting = tuple(self.name_array()[self.fit].tolist())
        return self._fitting

    def scores_of(self, names: Sequence[str]) -> list[int]:
        """Total scores of ``names`` (each a candidate), in their order."""
        candidates = tuple(names)
        if candidates == self.fitting():  # the usual call: prioritize after filter
            return self.score[self.fit].tolist()  # type: ignore[no-any-return]
        if candidates == self.names:
            return self.score.tolist()
        position = self._positions()
        return [int(self.score[position[n]]) for n in names]

    def node(self, i: int) -> NodeResult:
        scores = {"numa": int(self.numa_score[i])} if self.has_numa[i] else {}
        if i in self.network_score:
            scores["network"] = self.network_score[i]
        return NodeResult(
            node=self.names[i],
            fit=bool(self.fit[i]),
            reason=self.reason_of(i),
            numa_zones=self.zones(i),
            scores=scores,
            score=int(self.score[i]),
            devices=self.devices.get(i),
        )

    def all(self) -> list[NodeResult]:
        return [self.node(i) for i in range(len(self.names))]


def evaluate_pod(
    pod_body: Mapping[str, Any], candidates: Sequence[str], snapshot: Snapshot, config: PlacementConfig | None = None
) -> list[NodeResult]:
    return evaluate(pod_body, candidates, snapshot, config).all()


def evaluate(
    pod_body: Mapping[str, Any], candidates: Sequence[str], snapshot: Snapshot, config: PlacementConfig | None = None
) -> Results:
    config = config or PlacementConfig()
    if snapshot.table is None:
        snapshot.table = NodeTable()
        snapshot.table.sync(snapshot.nrts)
    table = snapshot.table
    rows = table.rows(candidates)
    try:
        pod, meta = parse_pod(pod_body)
    except ValueError as exc:  # every node fails for the same reason, and the caller is told
        results = Results(candidates, table, rows, Pod(()))
        results.pod_error = f"invalid pod: {exc}"
        results.fail_all(results.pod_error)
        return results
    results = Results(candidates, table, rows, pod, meta)
    try:
        pod_policy = parse_annotation(meta.annotations.get(NUMA_TOPOLOGY_SPEC_ANNOTATION))
    except PolicyError as exc:
        results.fail_all(f"invalid {NUMA_TOPOLOGY_SPEC_ANNOTATION}: {exc}")
        return results
    _invalid_nodes(results, snapshot)
    _blind_nodes(pod, results, snapshot)
    columnar = np.zeros(len(candidates), dtype=np.bool_)
    # The table answers nodes under single-numa-node: where the pod's own policy is that one too.
    if (
        config.vectorize
        and _applies(pod_policy, SINGLE_NUMA_NODE) == SINGLE_NUMA_NODE
        and eligible_pod(pod, config.numa_strategy, pod_policy.exclusive is not None)
    ):
        known = rows >= 0
        columnar[known] = table.single_numa[rows[known]]
        columnar &= results.fit  # not the nodes already failed as invalid
    _columnar(pod, results, np.flatnonzero(columnar), config)
    _one_by_one(pod, pod_policy, results, np.flatnonzero(~columnar & results.fit).tolist(), snapshot, config)
    _network(meta, results, snapshot, config)
    # A weighted mean of the scores that apply (a pod outside AppGroups has no network score).
    weighted = results.numa_score * config.numa_weight * results.has_numa
    weights = results.has_numa * config.numa_weight
    for i, value in results.network_score.items():
        weighted[i] += value * config.network_weight
        weights[i] += config.network_weight
    results.score = np.where(weights > 0, weighted // np.maximum(weights, 1), 0)
    return results


def _invalid_nodes(results: Results, snapshot: Snapshot) -> None:
    """Nodes whose NRT or Node object could not be read fail, with what is wrong with it. Usually
    there are none; else one pass over the rows, and a look-up of the few rowless candidates."""
    if not snapshot.invalid:
        return
    index = results.table.index
    reasons = {row: reason for name, reason in snapshot.invalid.items() if (row := index.get(name)) is not None}
    if reasons:
        for i in np.flatnonzero(np.isin(results.rows, list(reasons))).tolist():
            results.fail(i, reasons[int(results.rows[i])])
    for i in np.flatnonzero(results.rows < 0).tolist():
        reason = snapshot.invalid.get(results.names[i])
        if reason is not None:
            results.fail(i, reason)


def _blind_nodes(pod: Pod, results: Results, snapshot: Snapshot) -> None:
    """Nodes whose NUMA knowledge is missing or stale fail a pod that needs exclusive CPUs, pinned
    memory or devices (as the static CPU and Static Memory Managers would give them): nothing says
    what their kubelet would admit."""
    if not snapshot.blind or not holds_exclusive(pod, STATIC_CPU, STATIC_MEMORY):
        return
    for i, name in enumerate(results.names):
        reason = snapshot.blind.get(name)
        if reason is not None and results.fit[i]:
            results.fail(i, reason)


def _columnar(pod: Pod, results: Results, which: Ints, config: PlacementConfig) -> None:
    if not len(which):
        return
    table = results.table
    answer = table.answer(pod, results.rows[which], config.numa_strategy, config.resource_weights)
    rejected = np.flatnonzero(~answer.admitted)
    if len(rejected):
        results.fail_many(which[rejected], answer.details, answer.reason[rejected])
    admitted = which[answer.admitted]
    results.numa_zone[admitted] = answer.numa_zone[answer.admitted]
    results.numa_score[admitted] = answer.score[answer.admitted]
    results.has_numa[admitted] = True


def _one_by_one(
    pod: Pod, pod_policy: PodPolicy, results: Results, which: list[int], snapshot: Snapshot, config: PlacementConfig
) -> None:
    weights = tuple(sorted(config.resource_weights.items()))
    known = results.table.verdicts((pod.shape, pod_policy.policy, config.numa_strategy, weights))
    for i in which:
        name = results.names[i]
        nrt = snapshot.nrts.get(name)
        if nrt is None:
            if config.missing_nrt_fits:
                results.has_numa[i] = True  # with the lowest score
            else:
                results.fail(i, "no NodeResourceTopology for this node")
            continue
        seen = known.get(name)
        if seen is not None and seen[0]() is nrt:
            outcome: _Outcome = seen[1]
        else:
            outcome = _predict(pod, pod_policy, nrt, config)
            known[name] = (weakref.ref(nrt), outcome)
        if isinstance(outcome, str):
            results.fail(i, outcome)
            continue
        zones, numa_score = outcome
        results.explicit[i] = list(zones)
        if pod_policy.exclusive and zones:
            placements = [p.numa for p in snapshot.placed if p.node == name and p.numa]
            statuses = {n: numa_status(placements, n) for n in nrt.numa_ids}
            if not exclusive_ok(list(zones), statuses):
                if pod_policy.exclusive == "Required":
                    results.fail(i, "NUMA zones not exclusive as singleNUMANodeExclusive requires")
                    continue
                numa_score = 0
        results.numa_score[i] = numa_score
        results.has_numa[i] = True


_Outcome = str | tuple[tuple[int, ...], int]
"""Why the node fails, or the predicted NUMA zones and the NUMA score."""


def _applies(pod_policy: PodPolicy, node_policy: str) -> str | None:
    """The policy a node applies to the pod, None where the two disagree."""
    try:
        return effective_policy(pod_policy, node_policy)
    except PolicyError:
        return None


def _predict(pod: Pod, pod_policy: PodPolicy, nrt: NodeTopology, config: PlacementConfig) -> _Outcome:
    try:
        policy = effective_policy(pod_policy, nrt.policy)
    except PolicyError as exc:
        return str(exc)
    node = nrt if policy == nrt.policy else replace(nrt, policy=policy)
    verdict = predict(node, pod)
    if not verdict.admit:
        return verdict.reason
    zones = tuple(sorted({n for ids in verdict.numa.values() for n in ids}))
    return zones, node_score(config.numa_strategy, node, pod, verdict.numa, config.resource_weights)


def _network(meta: PodMeta, results: Results, snapshot: Snapshot, config: PlacementConfig) -> None:
    namespace = meta.namespace
    group, workload = meta.member or ("", None)
    appgroup = snapshot.appgroups.get((namespace, group))
    if appgroup is None or workload is None:
        return
    edges = _edges(appgroup)
    placed = [(p.workload, p.node) for p in snapshot.placed if p.namespace == namespace and p.appgroup == group]
    placed_pairs = [(w, n) for w, n in placed if w]
    hosts = {n for _, n in placed_pairs}
    members = [n for _, n in placed] if config.network.cohesion else []
    hosting = set(members)
    # The answer depends on the node only through its location, unless a related pod runs on it.
    seen: dict[tuple[Location | None, str], tuple[Any, int]] = {}
    pair_costs: dict[tuple[str, str], int] = {}
    raw: dict[int, int] = {}
    for i in np.flatnonzero(results.fit).tolist():
        name = results.names[i]
        key = (snapshot.locations.get(name), name if name in hosts or name in hosting else "")
        found = seen.get(key)
        if found is None:
            ev = evaluate_network(
                workload, name, snapshot.locations, edges, placed_pairs, snapshot.links, config.network
            )
            for m in members:
                if (name, m) not in pair_costs:
                    pair_costs[(name, m)] = pair_cost(name, m, snapshot.locations, snapshot.links, config.network)
            found = seen[key] = (ev, with_cohesion(ev.cost, name, members, pair_costs))
        ev, cost = found
        if not ev.fits:
            why = "; ".join(ev.reasons or ["more violated than satisfied"])
            results.fail(i, f"network requirements not met: {why}")
            continue
        raw[i] = cost
    results.network_score.update(normalize(raw, config.network.log_scale))
