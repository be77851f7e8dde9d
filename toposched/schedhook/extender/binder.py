"""From a filter's answer to the Binding: what the extender remembers between kube-scheduler's calls.

The binder keeps each pod's latest filter results (for prioritize and bind), waits in a filter
for the binds of pods it answered before (so their reservations count), reserves a bound pod's
request on its predicted zones before it calls the API, issues a node's binding calls in the order
their zones were predicted (``bindorder``), and remembers AppGroup members being bound until the
watch shows them (so the next member is placed near them).

kube-scheduler binds asynchronously: the next pod's filter can arrive before the previous pod's
bind, hence the wait -- only for binds that can still come (``bindwait``), at most ``bind_wait``.
"""

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import aiohttp
import orjson
from prometheus_client import Counter, Gauge, Histogram

from toposched.apis.constants import APPGROUP_LABEL, NUMA_ZONES_ANNOTATION, SCHEDHOOK_COMPONENT, WORKLOAD_LABEL
from toposched.kube import events, rest
from toposched.schedhook.extender.bindorder import NodeBindOrder
from toposched.schedhook.extender.bindwait import BindWindows
from toposched.schedhook.extender.knowledge import MISSING, STALE, Knowledge
from toposched.schedhook.extender.reservations import Accounting, Ledger, Reservation
from toposched.schedhook.extender.snapshots import SnapshotBuilder
from toposched.schedhook.extender.store import ObjectStore
from toposched.schedhook.placement.evaluate import PlacementConfig, Results, evaluate
from toposched.schedhook.placement.model import Placed
from toposched.schedhook.placement.snapshot import Snapshot

logger = logging.getLogger(__name__)

KEEP_RESULTS = 64
"""Filter results kept for prioritize and bind (pods that never bind are forgotten oldest first).
kube-scheduler binds a pod within milliseconds of its filter; each result of 5,000 nodes is about
250 KB of columns."""
BINDING_SECONDS = 30.0
"""How long a pod being bound counts as placed without the watch showing it so."""
FORGOTTEN = Counter(
    "toposched_extender_binds_reevaluated_total",
    "Binds whose filter result was no longer kept, so the pod was read and evaluated again.",
)
BLIND = Gauge(
    "toposched_extender_blind_nodes",
    "Nodes whose NUMA knowledge is missing (an NRT expected, none there) or stale (it leaves out bound pods).",
    ["state"],
)
BIND_WAIT = Histogram(
    "toposched_extender_bind_wait_seconds",
    "Time a filter waited for the binds of earlier pods.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
)


@dataclass
class Filtered:
    """A pod's latest filter: its results and what a bind of it reserves."""

    results: Results
    request: dict[str, Decimal]
    """The sum of its app containers' requests (what the NRT will show taken)."""
    member: tuple[str, str | None] | None
    """(AppGroup, workload) of an AppGroup member, from its labels."""


class Binder:
    def __init__(
        self,
        store: ObjectStore,
        api: rest.Kube | None,
        weights_name: str,
        config: PlacementConfig | None = None,
        bind_wait: float = 0.25,
        reservation_timeout: float = 60.0,
        nrt_grace: float = 600.0,
        stale_after: float = 30.0,
    ) -> None:
        self.store = store
        self.api = api
        self.config = config or PlacementConfig()
        self.bind_wait = bind_wait
        self.snapshots = SnapshotBuilder(store, weights_name)
        self.ledger = Ledger(reservation_timeout)
        self.accounting = Accounting(store)
        self.knowledge = Knowledge(store, nrt_grace, stale_after)
        self._blind: set[str] = set()
        """Nodes already said to be blind (an Event each time one turns blind)."""
        self._nrt_changes = store.changes(("nrts",))
        self._moved = store.pods.reader()
        self.filtered: OrderedDict[str, Filtered] = OrderedDict()
        """Per pod uid, the latest filter (at most ``KEEP_RESULTS``)."""
        self.unbound = BindWindows(bind_wait)
        """Pods answered with fitting nodes whose bind has not arrived yet, and how long each is awaited."""
        self.binding: dict[str, tuple[Placed, float]] = {}
        """AppGroup members being bound (namespace/name -> where, since when) until the watch shows them."""
        self.bind_order = NodeBindOrder()
        self._bind_arrived = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- what a placement call sees ---------------------------------------------------------------

    def snapshot(self, exclude: str = "") -> Snapshot:
        """The cluster with the live reservations taken off the NRTs (except pod ``exclude``'s, for
        this call only: the next one puts it back)."""
        self.settle()
        stale = self.ledger.take_stale()
        mine = self.ledger.by_pod.get(exclude) if exclude else None
        if mine is not None:
            stale.add(mine.node)
            self.ledger.touch(mine.node)
        snap = self.snapshots.snapshot(
            lambda node: self.ledger.held(node, exclude),
            self.ledger.by_node,
            stale,
            [*self.store.pods.placed.values(), *self._in_flight()],
        )
        snap.blind = self._blind_nodes()
        return snap

    def _blind_nodes(self) -> dict[str, str]:
        """The nodes whose NUMA knowledge is missing or stale, with why: in the metric, and an
        Event on each Node when it turns blind."""
        blind = self.knowledge.blind()
        for state in (MISSING, STALE):
            BLIND.labels(state).set(sum(1 for b in blind.values() if b.state == state))
        for name in blind.keys() - self._blind:
            logger.warning("blind to node %s: %s", name, blind[name].reason)
            node = self.store.objects["nodes"].get(f"/{name}")
            if node is not None:
                self._event(node, "NUMAKnowledgeMissing", blind[name].reason)
        self._blind = set(blind)
        return {name: b.reason for name, b in blind.items()}

    def settle(self) -> list[Reservation]:
        """The reservations still held, after ending those of pods deleted or finished, those the
        NRTs now account for and those timed out."""
        self.ledger.release_pods(self.store.pods.take_ended())
        self.ledger.check_again(self.store.pods.take_moved(self._moved))
        nrts = self._nrt_changes.take()["nrts"]
        self.ledger.check_again(None if nrts is None else [key.partition("/")[2] for key in nrts])
        return self.ledger.live(self.accounting, lambda node: self.store.nrt_updated.get(node, 0.0))

    def warm(self) -> None:
        """Parse everything and fill the table now (about a second at 5,000 nodes), not in the first
        filter call, where the pods behind it would wait for it."""
        self.snapshot()

    def _in_flight(self) -> list[Placed]:
        now = time.monotonic()
        placed = self.store.pods.placed
        for key, (_, since) in list(self.binding.items()):
            if key in placed or now - since > BINDING_SECONDS:  # the watch shows it, or it was lost
                del self.binding[key]
        return [p for p, _ in self.binding.values()]

    # -- kube-scheduler's calls -------------------------------------------------------------------

    async def filter(self, pod: dict[str, Any], names: Sequence[str]) -> Results:
        """Evaluate ``pod`` on ``names`` once the binds of pods answered before have arrived."""
        uid = _uid(pod)
        await self._await_earlier_binds(uid)
        results = self.evaluate(pod, names)
        self._report_rejected()
        if results.pod_error is None and results.fitting():
            self.unbound.answer(uid, time.monotonic())
        return results

    def scores(self, pod: dict[str, Any], names: Sequence[str]) -> list[int]:
        """Total scores of ``names``, from the pod's filter when it saw them all, else evaluated now."""
        kept = self.filtered.get(_uid(pod))
        if kept is not None:
            try:
                return kept.results.scores_of(names)
            except KeyError:  # a node the filter did not see
                pass
        return self.evaluate(pod, names).scores_of(names)

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Bind the pod to ``node``, recording the NUMA zones predicted for it; "" or why it failed."""
        self.unbound.bound(uid, time.monotonic())
        kept = self.filtered.pop(uid, None)
        if kept is None or not kept.results.has(node):
            # Filtered long ago (a slow binding cycle) or by an earlier process: evaluate again.
            FORGOTTEN.inc()
            kept = await self._evaluate_bound(namespace, name, node)
        annotations: dict[str, str] | None = None
        if kept is not None:
            numa, zones = kept.results.prediction(node)
            if numa:
                # Reserve before any await, so the next pod's filter already sees it.
                self.ledger.reserve(Reservation(uid, node, tuple(numa), kept.request, key=f"{namespace}/{name}"))
                annotations = {NUMA_ZONES_ANNOTATION: json.dumps(zones)}
            if kept.member is not None:  # the next pods of its AppGroup go near it
                self.binding[f"{namespace}/{name}"] = (Placed(namespace, node, *kept.member), time.monotonic())
        self._bind_arrived.set()
        binding = _binding(namespace, name, uid, node, annotations)
        if annotations:  # zones predicted: the kubelet must see this node's bindings in this order
            async with self.bind_order.turn(node):
                error, refused = await self._post(binding)
        else:
            error, refused = await self._post(binding)
        if error:
            logger.warning(error)
            if refused:  # not bound: nothing to hold. Unanswered, it may be bound: the reservation
                # stays until the watch shows the pod or it times out, never double-booking its zones.
                self.ledger.release(uid)
                self.binding.pop(f"{namespace}/{name}", None)
        return error

    # -- inside -----------------------------------------------------------------------------------

    def evaluate(self, pod: dict[str, Any], names: Sequence[str]) -> Results:
        uid = _uid(pod)
        results = evaluate(pod, names, self.snapshot(exclude=uid), self.config)
        request: dict[str, Decimal] = {}
        for c in results.pod.containers:
            for r, q in c.request.items():
                request[r] = request.get(r, Decimal(0)) + q
        self.filtered[uid] = Filtered(results, request, _member(pod))
        self.filtered.move_to_end(uid)
        while len(self.filtered) > KEEP_RESULTS:
            self.filtered.popitem(last=False)
        return results

    async def _await_earlier_binds(self, uid: str) -> None:
        started = time.monotonic()
        while True:
            now = time.monotonic()
            deadline = self.unbound.deadline(uid, now)
            if deadline is None:
                break
            self._bind_arrived.clear()
            try:
                await asyncio.wait_for(self._bind_arrived.wait(), deadline - now)
            except TimeoutError:
                self.unbound.closed(uid, time.monotonic())
                break
        BIND_WAIT.observe(time.monotonic() - started)

    async def _evaluate_bound(self, namespace: str, name: str, node: str) -> Filtered | None:
        if self.api is None:
            return None
        try:
            pod = await self.api.get(rest.path("", "v1", "pods", namespace, name))
        except (rest.ApiError, aiohttp.ClientError, OSError, TimeoutError, orjson.JSONDecodeError) as exc:
            logger.warning("bind of %s/%s: cannot read the pod (%s); bound without NUMA zones", namespace, name, exc)
            return None
        self.evaluate(pod, [node])
        return self.filtered.pop(_uid(pod), None)

    async def _post(self, binding: dict[str, Any]) -> tuple[str, bool]:
        """The binding call: its failure as a message (kube-scheduler retries the pod), else "";
        and whether it surely did not bind (the apiserver refused it, rather than not answering)."""
        name, namespace = binding["metadata"]["name"], binding["metadata"]["namespace"]
        node = binding["target"]["name"]
        if self.api is None:
            return f"binding {namespace}/{name} to {node}: no API client", True
        try:
            await self.api.create(rest.path("", "v1", "pods", namespace, name) + "/binding", binding)
        except rest.ApiError as exc:
            return f"binding {namespace}/{name} to {node}: {exc.status} {exc.reason}", True
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:  # the apiserver away: kube-scheduler retries
            why = exc or type(exc).__name__
            return f"binding {namespace}/{name} to {node}: the apiserver did not answer ({why})", False
        return "", False

    def _report_rejected(self) -> None:
        """A Warning Event on each Node or NRT found unreadable (once per version)."""
        rejected = self.snapshots.take_rejected()
        for body, reason in rejected:
            self._event(
                body, "InvalidObject", f"{body.get('kind') or 'object'} ignored by the scheduler extender: {reason}"
            )

    def _event(self, body: dict[str, Any], reason: str, message: str) -> None:
        """A Warning Event on ``body``, posted in the background (none without an API client)."""
        if self.api is None:
            return
        task = asyncio.create_task(events.post_event(self.api, body, "Warning", reason, message, SCHEDHOOK_COMPONENT))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _binding(namespace: str, name: str, uid: str, node: str, annotations: dict[str, str] | None) -> dict[str, Any]:
    """One call: the apiserver copies a Binding's annotations onto the pod. A plain dict body skips
    any model serialisation."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        metadata["uid"] = uid
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def _uid(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return uid if isinstance(uid, str) else ""


def _member(pod: dict[str, Any]) -> tuple[str, str | None] | None:
    """(AppGroup, workload) from the pod's labels; None outside AppGroups."""
    meta = pod.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    labels = labels if isinstance(labels, dict) else {}
    group, workload = labels.get(APPGROUP_LABEL), labels.get(WORKLOAD_LABEL)
    if not isinstance(group, str) or not group:
        return None
    return group, workload if isinstance(workload, str) else None
