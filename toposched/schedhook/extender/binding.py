"""A pod's Binding to the node kube-scheduler chose, with the NUMA zones predicted for it.

A bind is done in two steps. ``reserve`` takes the pod's filter (or evaluates the pod again when
it is no longer kept), holds its request on the predicted zones in the ledger and counts an
AppGroup member as placed -- all before any await of the caller's, so the next pod's filter
already sees it. ``post`` then calls the API: a node's zone-annotated Bindings one after another,
in the order their zones were predicted (``bindorder``). A Binding the apiserver refused frees
what it held; one it never answered keeps it (the pod may be bound: its zones must not be booked
twice) until the watch shows the pod or the reservation times out.
"""

import json
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from prometheus_client import Counter, Histogram

from toposched.apis.constants import NUMA_ZONES_ANNOTATION
from toposched.kube import rest
from toposched.schedhook.extender.bindorder import NodeBindOrder
from toposched.schedhook.extender.clusterview import ClusterView
from toposched.schedhook.extender.filtered import Filtered, FilterMemory
from toposched.schedhook.extender.reservations import Reservation
from toposched.schedhook.extender.store import store_key
from toposched.schedhook.placement.evaluate import Results
from toposched.schedhook.placement.model import Placed
from toposched.schedhook.placement.parse import pod_uid

logger = logging.getLogger(__name__)

BIND_STEPS = Histogram(
    "toposched_extender_bind_step_seconds",
    "Where a bind's time goes: waiting for the node's earlier binding calls (order), the DRA check "
    "(check) and the binding call to the apiserver (api).",
    ["step"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
FORGOTTEN = Counter(
    "toposched_extender_binds_reevaluated_total",
    "Binds whose filter result was no longer kept, so the pod was read and evaluated again.",
)

Evaluate = Callable[[dict[str, Any], Sequence[str]], Results]
"""Evaluate a pod (its body) on some nodes, keeping the results as its latest filter."""


@dataclass(frozen=True)
class Bind:
    """One binding call: the apiserver copies a Binding's annotations onto the pod."""

    namespace: str
    name: str
    uid: str
    node: str
    annotations: dict[str, str] | None = None
    """The predicted NUMA zones (None: none predicted)."""
    numa: tuple[int, ...] = ()
    """The NUMA ids predicted."""
    kind: Hashable | None = None
    """The pod's shape and predicted zones: binds in a row of one kind to a node may go together
    (``bindorder``); None: the pod is like no other."""

    def body(self) -> dict[str, Any]:
        """The Binding, a plain dict (no model serialisation)."""
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if self.uid:
            metadata["uid"] = self.uid
        if self.annotations:
            metadata["annotations"] = self.annotations
        return {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node},
        }


class Binder:
    def __init__(self, view: ClusterView, filtered: FilterMemory, api: rest.Kube | None, evaluate: Evaluate) -> None:
        self.view = view
        self.filtered = filtered
        self.api = api
        self.evaluate = evaluate
        self.order = NodeBindOrder()

    async def reserve(self, namespace: str, name: str, uid: str, node: str) -> Bind:
        """The pod's Binding to ``node``, its predicted zones held in the ledger and, for an
        AppGroup member, counted as placed there (the next pods of its AppGroup go near it)."""
        kept = self.filtered.pop(uid)
        if kept is None or not kept.results.has(node):
            # Filtered long ago (a slow binding cycle) or by an earlier process: evaluate again.
            FORGOTTEN.inc()
            kept = await self._evaluate_bound(namespace, name, node)
        annotations: dict[str, str] | None = None
        numa: list[int] = []
        kind: Hashable | None = None
        if kept is not None:
            numa, zones = kept.results.prediction(node)
            if numa:  # reserved before any await, so the next pod's filter already sees it
                held = Reservation(uid, node, tuple(numa), kept.request, key=store_key(namespace, name))
                self.view.ledger.reserve(held)
                annotations = {NUMA_ZONES_ANNOTATION: json.dumps(zones)}
                kind = (kept.results.pod.shape, tuple(numa))
            if kept.member is not None:
                self.view.binding(name, Placed(namespace, node, *kept.member))
        return Bind(namespace, name, uid, node, annotations, tuple(numa), kind)

    async def post(self, bind: Bind, check: Callable[[], Awaitable[str]] | None = None) -> str:
        """Issue the binding call unless ``check`` says why not; "" or why it failed (kube-scheduler
        retries the pod). Called right after ``reserve``: the check runs in the node's turn, so what
        it awaits (a claim read) cannot let a later pod's binding reach the kubelet first."""
        if bind.annotations:  # zones predicted: the kubelet must see this node's bindings in this order
            # (or in one it cannot tell from it)
            queued = time.perf_counter()
            async with self.order.turn(bind.node, bind.kind):
                BIND_STEPS.labels("order").observe(time.perf_counter() - queued)
                error, refused = await self._checked(bind, check)
        else:
            error, refused = await self._checked(bind, check)
        if error:
            logger.warning(error)
            if refused:  # not bound: nothing to hold. Unanswered, it may be bound: the reservation
                # stays until the watch shows the pod or it times out, never double-booking its zones.
                self.abandon(bind)
        return error

    def abandon(self, bind: Bind) -> None:
        """The pod is not bound: what its reservation held is free again."""
        self.view.ledger.release(bind.uid)
        self.view.not_bound(bind.namespace, bind.name)

    async def _evaluate_bound(self, namespace: str, name: str, node: str) -> Filtered | None:
        if self.api is None:
            return None
        try:
            pod = await self.api.get(rest.path("", "v1", "pods", namespace, name))
        except (rest.ApiError, aiohttp.ClientError, OSError, TimeoutError, orjson.JSONDecodeError) as exc:
            logger.warning("bind of %s/%s: cannot read the pod (%s); bound without NUMA zones", namespace, name, exc)
            return None
        self.evaluate(pod, [node])
        return self.filtered.pop(pod_uid(pod))

    async def _checked(self, bind: Bind, check: Callable[[], Awaitable[str]] | None) -> tuple[str, bool]:
        started = time.perf_counter()
        refused = await check() if check is not None else ""
        posting = time.perf_counter()
        BIND_STEPS.labels("check").observe(posting - started)
        if refused:
            return refused, True
        try:
            return await self._post(bind)
        finally:
            BIND_STEPS.labels("api").observe(time.perf_counter() - posting)

    async def _post(self, bind: Bind) -> tuple[str, bool]:
        """The binding call's failure as a message, else ""; and whether it surely did not bind
        (the apiserver refused it, rather than not answering)."""
        where = f"binding {bind.namespace}/{bind.name} to {bind.node}"
        if self.api is None:
            return f"{where}: no API client", True
        try:
            await self.api.create(rest.path("", "v1", "pods", bind.namespace, bind.name) + "/binding", bind.body())
        except rest.ApiError as exc:
            return f"{where}: {exc.status} {exc.reason}", True
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:  # the apiserver away: kube-scheduler retries
            why = exc or type(exc).__name__
            return f"{where}: the apiserver did not answer ({why})", False
        return "", False
