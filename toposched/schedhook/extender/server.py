"""The scheduler extender's HTTP endpoints: filter, prioritize and bind (kube-scheduler's JSON).

kube-scheduler calls them for pods of the ``toposched`` profile. Filter answers for every
candidate (with a reason for each rejected node, which ends up in the pod's FailedScheduling
Event); prioritize maps our 0-100 scores onto the extender's 0-10; bind records the NUMA
zones the kubelet is predicted to use (annotation, and a reservation in the cache) and binds.

kube-scheduler binds asynchronously: the next pod's filter can arrive before the previous pod's
bind. A filter therefore waits (up to ``bind_wait``) for the binds of pods that were answered
with fitting nodes, so it sees their reservations; the bind reserves before it calls the API,
and a node's binding calls go out one after another in the order of its reservations
(``bindorder``), so the kubelet fills its zones in the predicted order.
"""

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import aiohttp
import numpy as np
import orjson
from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import Counter, Histogram

from toposched.apis.constants import APPGROUP_LABEL, NUMA_ZONES_ANNOTATION, SCHEDHOOK_COMPONENT, WORKLOAD_LABEL
from toposched.kube import events, rest
from toposched.schedhook.extender.bindorder import NodeBindOrder
from toposched.schedhook.extender.cache import ClusterCache
from toposched.schedhook.extender.reservations import Reservation
from toposched.schedhook.placement.evaluate import PlacementConfig, Results, evaluate
from toposched.schedhook.placement.model import Placed, container_request

logger = logging.getLogger(__name__)

MAX_EXTENDER_PRIORITY = 10
KEEP_RESULTS = 64
"""Filter results kept for prioritize and bind (pods that never bind are forgotten oldest first).
kube-scheduler binds a pod within milliseconds of its filter; each result of 5,000 nodes is about
250 KB of columns."""
LATENCY = Histogram(
    "toposched_extender_request_seconds",
    "Extender request latency.",
    ["verb"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
)
FORGOTTEN = Counter(
    "toposched_extender_binds_reevaluated_total",
    "Binds whose filter result was no longer kept, so the pod was read and evaluated again.",
)
BIND_WAIT = Histogram(
    "toposched_extender_bind_wait_seconds",
    "Time a filter waited for the binds of earlier pods.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
)


class Extender:
    def __init__(
        self, cache: ClusterCache, api: rest.Kube | None, config: PlacementConfig | None = None, bind_wait: float = 0.25
    ) -> None:
        self.cache = cache
        self.api = api
        self.config = config or PlacementConfig()
        self.bind_wait = bind_wait
        self.last: OrderedDict[str, tuple[Results, dict[str, Decimal]]] = OrderedDict()
        """Per pod uid: the latest filter's results and the pod's request, for prioritize and bind."""
        self.identity: OrderedDict[str, tuple[str, str | None]] = OrderedDict()
        """Per AppGroup member's uid: (AppGroup, workload) from its labels, for its placement in flight at bind."""
        self.unbound: dict[str, float] = {}
        """Pods answered with fitting nodes whose bind has not arrived yet (uid -> when)."""
        self._bind_arrived = asyncio.Event()
        self.bind_order = NodeBindOrder()
        self._tasks: set[asyncio.Task[None]] = set()

    def _evaluate(self, pod: dict[str, Any], names: list[str]) -> Results:
        uid = _uid(pod)
        results = evaluate(pod, names, self.cache.snapshot(exclude=uid), self.config)
        total: dict[str, Decimal] = {}
        for c in results.pod.containers:
            for r, q in container_request(c).items():
                total[r] = total.get(r, Decimal(0)) + q
        self.last[uid] = (results, total)
        self.last.move_to_end(uid)
        meta = pod.get("metadata")
        labels = meta.get("labels") if isinstance(meta, dict) else None
        labels = labels if isinstance(labels, dict) else {}
        group, workload = labels.get(APPGROUP_LABEL), labels.get(WORKLOAD_LABEL)
        if isinstance(group, str) and group:
            self.identity[uid] = (group, workload if isinstance(workload, str) else None)
            self.identity.move_to_end(uid)
        while len(self.last) > KEEP_RESULTS:
            self.last.popitem(last=False)
        while len(self.identity) > KEEP_RESULTS:
            self.identity.popitem(last=False)
        return results

    async def _await_earlier_binds(self, uid: str) -> None:
        started = time.monotonic()
        deadline = started + self.bind_wait
        while True:
            now = time.monotonic()
            for other, since in list(self.unbound.items()):
                if now - since > self.bind_wait:
                    del self.unbound[other]  # the scheduler did not bind it (another plugin, deletion...)
            if not any(other != uid for other in self.unbound) or now >= deadline:
                break
            self._bind_arrived.clear()
            try:
                await asyncio.wait_for(self._bind_arrived.wait(), deadline - now)
            except TimeoutError:
                break
        BIND_WAIT.observe(time.monotonic() - started)

    async def filter(self, request: web.Request) -> web.Response:
        pod, names, uid = await _extender_args(request)
        if not self.cache.synced.is_set():  # a partial cache would misplace the pod: let it retry
            return _json({"Error": "toposched: the extender's cache is still syncing"})
        await self._await_earlier_binds(uid)
        started = time.perf_counter()
        results = self._evaluate(pod, names)
        self._report_rejected()
        if results.pod_error is not None:  # the pod, not any node: the scheduler records why
            return _json({"NodeNames": [], "FailedNodes": {}, "Error": f"toposched: {results.pod_error}"})
        fitting = results.fitting()
        if fitting:
            self.unbound[uid] = time.monotonic()
        body = {
            "NodeNames": fitting,
            "FailedNodes": _failed(results),
            "FailedAndUnresolvableNodes": {},
            "Error": "",
        }
        response = _json(body)
        LATENCY.labels("filter").observe(time.perf_counter() - started)
        return response

    async def prioritize(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        pod, names, uid = await _extender_args(request)
        cached = self.last.get(uid)
        results = cached[0] if cached else None
        try:
            scores = results.scores_of(names) if results is not None else None
        except KeyError:  # a node the filter did not see
            scores = None
        if scores is None:
            scores = self._evaluate(pod, names).scores_of(names)
        response = web.Response(body=_priorities(names, scores), content_type="application/json")
        LATENCY.labels("prioritize").observe(time.perf_counter() - started)
        return response

    async def bind(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        try:
            args = orjson.loads(await request.read())
            name, namespace, node = (str(args[key]) for key in ("PodName", "PodNamespace", "Node"))
            uid = str(args.get("PodUID") or "")
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            raise _bad_request("expected ExtenderBindingArgs (PodName, PodNamespace, PodUID, Node)") from None
        self.unbound.pop(uid, None)
        cached = self.last.pop(uid, None)
        if cached is None or node not in cached[0].names:
            # Filtered long ago (a slow binding cycle) or by an earlier process: evaluate again.
            FORGOTTEN.inc()
            cached = await self._evaluate_bound(namespace, name, node)
        annotations: dict[str, str] | None = None
        if cached is not None:
            results, total = cached
            i = results.names.index(node)
            numa = results.numa_ids(i)
            if numa:
                # Reserve before any await, so the next pod's filter already sees it.
                self.cache.reserve(Reservation(uid, node, tuple(numa), total, key=f"{namespace}/{name}"))
                annotations = {NUMA_ZONES_ANNOTATION: json.dumps(results.zones(i))}
        identity = self.identity.pop(uid, None)
        if identity is not None:  # an AppGroup member: the next pods of its group go near it
            self.cache.binding(f"{namespace}/{name}", Placed(namespace, node, *identity))
        self._bind_arrived.set()
        # One call: the apiserver copies a Binding's annotations onto the pod. A plain dict body
        # skips the client's model serialisation.
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        if annotations:
            metadata["annotations"] = annotations
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        if annotations:  # zones predicted: the kubelet must see this node's bindings in this order
            async with self.bind_order.turn(node):
                error = await self._post_binding(binding)
        else:
            error = await self._post_binding(binding)
        if error:
            logger.warning(error)
            self.cache.release(uid)
            self.cache.not_binding(f"{namespace}/{name}")
        LATENCY.labels("bind").observe(time.perf_counter() - started)
        return _json({"Error": error})

    async def _post_binding(self, binding: dict[str, Any]) -> str:
        """The binding call; its failure as a message (kube-scheduler retries the pod), else ""."""
        name, namespace = binding["metadata"]["name"], binding["metadata"]["namespace"]
        node = binding["target"]["name"]
        if self.api is None:
            return f"binding {namespace}/{name} to {node}: no API client"
        try:
            await self.api.create(rest.path("", "v1", "pods", namespace, name) + "/binding", binding)
        except rest.ApiError as exc:
            return f"binding {namespace}/{name} to {node}: {exc.status} {exc.reason}"
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:  # the apiserver away: kube-scheduler retries
            return f"binding {namespace}/{name} to {node}: the apiserver did not answer ({exc or type(exc).__name__})"
        return ""

    def _report_rejected(self) -> None:
        """A Warning Event on each Node or NRT the cache found unreadable (once per version)."""
        rejected = self.cache.take_rejected()
        if self.api is None:  # in process, without a cluster
            return
        for body, reason in rejected:
            what = f"{body.get('kind') or 'object'} ignored by the scheduler extender: {reason}"
            task = asyncio.create_task(
                events.post_event(self.api, body, "Warning", "InvalidObject", what, SCHEDHOOK_COMPONENT)
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _evaluate_bound(self, namespace: str, name: str, node: str) -> tuple[Results, dict[str, Decimal]] | None:
        if self.api is None:
            return None
        try:
            pod = await self.api.get(rest.path("", "v1", "pods", namespace, name))
        except (rest.ApiError, aiohttp.ClientError, OSError, TimeoutError, orjson.JSONDecodeError) as exc:
            logger.warning("bind of %s/%s: cannot read the pod (%s); bound without NUMA zones", namespace, name, exc)
            return None
        results = self._evaluate(pod, [node])
        return self.last.pop(_uid(pod), (results, {}))

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok") if self.cache.synced.is_set() else web.Response(status=503, text="syncing")

    def app(self, middlewares: Iterable[Middleware] = ()) -> web.Application:
        application = web.Application(middlewares=middlewares)
        application.add_routes(
            [
                web.post("/filter", self.filter),
                web.post("/prioritize", self.prioritize),
                web.post("/bind", self.bind),
                web.get("/healthz", self.healthz),
                web.get("/readyz", self.readyz),
            ]
        )
        return application


async def _extender_args(request: web.Request) -> tuple[dict[str, Any], list[str], str]:
    """kube-scheduler's ExtenderArgs (node names only: nodeCacheCapable): the pod, names, pod uid.

    A body that is not ExtenderArgs is answered 400 with what is wrong (a bad pod is not: its
    filter answer says why it fits nowhere)."""
    try:
        args = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        raise _bad_request(f"not JSON: {exc}") from None
    if not isinstance(args, dict):
        raise _bad_request("expected ExtenderArgs (a JSON object)")
    pod = args.get("Pod") or args.get("pod") or {}
    names = args.get("NodeNames") or args.get("nodenames") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _bad_request("NodeNames: expected a list of node names")
    pod = pod if isinstance(pod, dict) else {}
    return pod, names, _uid(pod)


def _uid(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return uid if isinstance(uid, str) else ""


def _bad_request(reason: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(
        text=orjson.dumps({"Error": f"toposched: {reason}"}).decode(), content_type="application/json"
    )


def _json(body: object) -> web.Response:
    # orjson: a prioritize answer for 5,000 nodes encodes in 0.1 ms instead of 2 ms.
    return web.Response(body=orjson.dumps(body), content_type="application/json")


def _failed(results: Results) -> dict[str, str]:
    """FailedNodes: each rejected node's reason (a few distinct texts, spread with array indexing)."""
    failed = np.flatnonzero(~results.fit)
    texts = np.empty(len(results.texts), dtype=object)
    texts[:] = [f"toposched: {t}" for t in results.texts]
    return dict(zip(results.name_array()[failed].tolist(), texts[results.reason[failed]].tolist(), strict=True))


_SCORE_THEN_HOST = np.array([b'","Score":%d},{"Host":"' % s for s in range(MAX_EXTENDER_PRIORITY + 1)], dtype=object)
_SCORE_LAST = [b'","Score":%d}]' % s for s in range(MAX_EXTENDER_PRIORITY + 1)]


def _priorities(names: list[str], scores: list[int]) -> bytes:
    """HostPriorityList ``[{"Host": name, "Score": 0..10}, ...]``, encoded without a dict per host.

    The names are encoded by orjson as one list and split at its separators (quote, comma,
    quote). Node names are DNS subdomains and never hold a quote; a name that did would split
    into extra pieces, and the count check sends such a list down the plain path.
    """
    if not names:
        return b"[]"
    extender = np.clip(np.asarray(scores, dtype=np.int64) * MAX_EXTENDER_PRIORITY // 100, 0, MAX_EXTENDER_PRIORITY)
    hosts = orjson.dumps(names)[2:-2].split(b'","')
    if len(hosts) != len(names):
        return orjson.dumps([{"Host": n, "Score": s} for n, s in zip(names, extender.tolist(), strict=True)])
    pieces = np.empty(2 * len(hosts), dtype=object)
    pieces[0::2] = hosts
    pieces[1::2] = _SCORE_THEN_HOST[extender]
    pieces[-1] = _SCORE_LAST[int(extender[-1])]
    return b'[{"Host":"' + b"".join(pieces.tolist())
