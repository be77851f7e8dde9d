"""The NetworkTopology reconciler: recomputes NetperfCosts when anything it depends on changes.

Inputs are the CR spec, the measurement ConfigMap, the nodes' topology labels and bandwidth,
and the placed pods of AppGroups (for bandwidthAllocated). Each change pokes the affected
NetworkTopologies; pokes are coalesced, and a periodic resync catches anything missed.
Writes happen only when the result differs, so the operator's own write ends the loop.
"""

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from toposched.apis.appgroup import AppGroup
from toposched.apis.constants import WEIGHT_NETPERF
from toposched.apis.errors import describe
from toposched.apis.netperf import parse
from toposched.apis.networktopology import NetworkTopology, WeightInfo
from toposched.apis.quantity import parse_quantity
from toposched.kube import rest
from toposched.operators import k8s, metrics
from toposched.operators.appgroup.status import PodView
from toposched.operators.coalescer import Coalescer
from toposched.operators.indexes import Bodies, Key, PodViews
from toposched.operators.invalid import report_invalid
from toposched.operators.networktopology.costs import (
    Dependency,
    NodeInfo,
    Placement,
    allocated_bandwidth,
    compute,
    node_info,
)
from toposched.operators.networktopology.status import Outcome, configmap_name_problem, reconcile
from toposched.operators.runtime import Runtime

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Inputs:
    """What one reconcile computes from besides the object, read once: its ConfigMap and the nodes."""

    namespace: str
    invalid: str | None
    """What is wrong with spec.configmapName, if anything (then no ConfigMap is read)."""
    data: Mapping[str, str] | None
    """The ConfigMap's data; None when it does not exist."""
    nodes: list[NodeInfo]
    now: datetime


class NetworkTopologyReconciler:
    """Writes the costs and the status of one NetworkTopology at a time; shared by every
    NetworkTopology handler, the node watch and the resync."""

    def __init__(self, runtime: Runtime, bodies: Bodies, appgroups: Bodies, pods: PodViews) -> None:
        self.runtime = runtime
        self.bodies = bodies
        self.appgroups = appgroups
        self.pods = pods
        self.coalescer: Coalescer[Key] = Coalescer(self._reconcile, delay=runtime.settings.coalesce_seconds)
        self.known_nodes: dict[str, NodeInfo] = {}
        self.nodes_listed = asyncio.Event()
        """Costs wait for the first list of nodes, so none is computed from a partial cluster."""
        self.placements: dict[str, str] = {}
        self._parsed_dependencies: dict[str, tuple[object, list[Dependency]]] = {}
        self._left_out: dict[str, str] = {}
        """AppGroup -> why it is left out of bandwidthAllocated (logged when that changes)."""
        self.invalid: dict[str, str] = {}
        """uid -> the InvalidSpec message last reported for a NetworkTopology that cannot be read."""

    def poke_all(self) -> None:
        for key in list(self.bodies):
            self.coalescer.poke(key)

    def poke_configmap(self, namespace: str, name: str) -> None:
        for (ns, nt_name), found in list(self.bodies.items()):
            for body in found:
                if ns == namespace and body.get("spec", {}).get("configmapName") == name:
                    self.coalescer.poke((ns, nt_name))

    def listed_nodes(self, items: list[dict[str, Any]]) -> None:
        nodes = {info.name: info for info in map(_node_info, items)}
        if nodes != self.known_nodes or not self.nodes_listed.is_set():
            self.known_nodes = nodes
            self.nodes_listed.set()
            self.poke_all()

    def node_event(self, type_: str, body: dict[str, Any]) -> None:
        info = _node_info(body)
        self.node_changed(None if type_ == "DELETED" else info, info.name)

    def node_changed(self, info: NodeInfo | None, name: str) -> None:
        """Poke only when what costs depend on changed, not on every node heartbeat."""
        if self.known_nodes.get(name) != info:
            if info is None:
                self.known_nodes.pop(name, None)
            else:
                self.known_nodes[name] = info
            self.poke_all()

    def placement_changed(self, uid: str, node: str | None) -> None:
        if self.placements.get(uid) == node:
            return
        if node is None:
            self.placements.pop(uid, None)
        else:
            self.placements[uid] = node
        self.poke_all()

    async def resync_forever(self) -> None:
        """A task of our own, not ``@kopf.timer``: Kopf puts a finalizer on every object a timer
        runs for (see operators.coalescer)."""
        while True:
            await asyncio.sleep(self.runtime.settings.resync_seconds)
            self.poke_all()

    def _current_nodes(self) -> list[NodeInfo]:
        return sorted(self.known_nodes.values(), key=lambda n: n.name)

    def _allocated(self, nodes: Iterable[NodeInfo]) -> dict[tuple[str, str, str], Decimal]:
        placements: list[Placement] = []
        dependencies: list[Dependency] = []
        for (namespace, name), found in list(self.appgroups.items()):
            for body in found:
                prefix = f"{namespace}/{name}/"
                dependencies += self._dependencies(prefix, body)  # [] for an AppGroup that cannot be read
                views: Iterable[PodView] = self.pods.get((namespace, name), [])
                placements += [Placement(v.node, prefix + v.workload) for v in views if v.node and v.workload]
        return allocated_bandwidth({n.name: n for n in nodes}, placements, dependencies)

    def _dependencies(self, prefix: str, body: dict[str, Any]) -> list[Dependency]:
        """The minBandwidth dependencies of an AppGroup, parsed once per resourceVersion."""
        version = body.get("metadata", {}).get("resourceVersion")
        cached = self._parsed_dependencies.get(prefix)
        if cached is not None and cached[0] == version:
            return cached[1]
        try:
            appgroup = AppGroup.from_dict(body)
            found = [
                Dependency(
                    prefix + item.workload.selector, prefix + dep.workload.selector, parse_quantity(dep.min_bandwidth)
                )
                for item in appgroup.spec.workloads
                for dep in item.dependencies or ()
                if dep.min_bandwidth is not None
            ]
        except ValueError as exc:
            # Left out of every NetworkTopology's bandwidthAllocated, which the others still get;
            # the AppGroup's own status says what is wrong (the AppGroup reconciler writes it).
            why = describe(exc)
            if self._left_out.get(prefix) != why:
                logger.warning("AppGroup %s left out of bandwidthAllocated: %s", prefix.rstrip("/"), why)
                self._left_out[prefix] = why
            found = []
        else:
            self._left_out.pop(prefix, None)
        self._parsed_dependencies[prefix] = (version, found)
        return found

    async def _reconcile(self, key: Key) -> None:
        if not self.runtime.leadership.leading.is_set():
            return
        await self.nodes_listed.wait()
        if not self.runtime.leadership.leading.is_set():  # it may have been lost while waiting
            return
        if not self.bodies.get(key):
            return
        started = time.perf_counter()
        # Read afresh, not from the index: an event of our own spec write arrives before the one of
        # the status write that followed it, and a reconcile of that body would undo the status.
        body = await k8s.read_object(self.runtime.api, NetworkTopology, key[0], key[1])
        if body is None:
            return
        try:
            nt = NetworkTopology.from_dict(body)
        except ValidationError as exc:
            await report_invalid(self.runtime, NetworkTopology, key, body, describe(exc), self.invalid)
            return
        inputs = await self._inputs(key[0], nt)
        outcome = self._evaluate(nt, inputs)
        warnings = outcome.warnings
        if outcome.weights is not None:
            updated = await self._write_weights(key, nt, outcome.weights)
            if updated is None:
                return
            calculated = outcome.status.weight_calculation_time
            nt = updated
            outcome = self._evaluate(nt, inputs)
            outcome.status.weight_calculation_time = calculated
        desired = outcome.status.to_dict()
        if desired != (nt.status.to_dict() if nt.status else {}):
            await k8s.patch_status(self.runtime.api, NetworkTopology, key[0], key[1], desired)
            metrics.STATUS_WRITES.labels("NetworkTopology").inc()
        for reason, message in warnings:
            logger.warning("NetworkTopology %s/%s: %s", key[0], key[1], message)
            await self.runtime.post_warning(body, reason, message)
        metrics.RECONCILE_SECONDS.labels("NetworkTopology").observe(time.perf_counter() - started)

    async def _inputs(self, namespace: str, nt: NetworkTopology) -> _Inputs:
        invalid = configmap_name_problem(nt.spec.configmap_name)
        data = None if invalid else await k8s.read_configmap_data(self.runtime.api, namespace, nt.spec.configmap_name)
        return _Inputs(namespace, invalid, data, self._current_nodes(), datetime.now(UTC).replace(microsecond=0))

    def _evaluate(self, nt: NetworkTopology, inputs: _Inputs) -> Outcome:
        """The spec and status ``nt`` should have (evaluated again after our own spec write)."""
        nodes, now, settings = inputs.nodes, inputs.now, self.runtime.settings
        if inputs.invalid:
            return reconcile(nt, None, None, len(nodes), now, invalid=inputs.invalid)
        if inputs.data is None:
            missing = f"ConfigMap {inputs.namespace}/{nt.spec.configmap_name} not found"
            return reconcile(nt, None, None, len(nodes), now, missing=missing)
        measurements = parse(inputs.data, settings.netperf_percentile, [n.name for n in nodes])
        previous = next((w for w in nt.spec.weights if w.name == WEIGHT_NETPERF), None)
        computed = compute(
            nodes,
            measurements,
            nt.spec.weights,
            allocated=self._allocated(nodes),
            now=now,
            max_age=timedelta(seconds=settings.netperf_max_age_seconds),
            previous=previous,
        )
        return reconcile(nt, computed, measurements, len(nodes), now)

    async def _write_weights(self, key: Key, nt: NetworkTopology, weights: list[WeightInfo]) -> NetworkTopology | None:
        """``nt`` with these spec.weights written, or None when the user edited it meanwhile: their
        edit wins, and the object is reconciled again."""
        try:
            updated = await k8s.patch_spec_field(
                self.runtime.api,
                NetworkTopology,
                key[0],
                key[1],
                str(nt.metadata.get("resourceVersion")),
                {"weights": [w.to_dict() for w in weights]},
            )
        except rest.ApiError as exc:
            if exc.status == 409:
                metrics.RECONCILE_ERRORS.labels("NetworkTopology", "Conflict").inc()
                self.coalescer.poke(key)
                return None
            raise
        return NetworkTopology.from_dict(updated)


def node_slim(body: dict[str, Any]) -> dict[str, Any]:
    """What costs depend on of a node (its name, labels and capacity): thousands of full Node
    objects, with their images and conditions, are not kept in memory."""
    meta = body.get("metadata") or {}
    return {
        "metadata": {"name": meta.get("name", ""), "labels": meta.get("labels") or {}},
        "status": {"capacity": (body.get("status") or {}).get("capacity") or {}},
    }


def _node_info(body: dict[str, Any]) -> NodeInfo:
    meta = body.get("metadata") or {}
    return node_info(meta.get("name", ""), meta.get("labels") or {}, (body.get("status") or {}).get("capacity") or {})
