"""The scheduler extender's HTTP endpoints: filter, prioritize and bind (kube-scheduler's JSON).

kube-scheduler calls them for pods of the ``toposched`` profile. This module reads its requests
and writes its answers; the ``Coordinator`` decides. Filter answers for every candidate (with a reason
for each rejected node, which ends up in the pod's FailedScheduling Event); prioritize maps our
0-100 scores onto the extender's 0-10; bind binds.
"""

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import numpy as np
import orjson
from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import Counter, Histogram

from toposched.schedhook.extender.coordinator import Coordinator
from toposched.schedhook.extender.wakeups import REASON_PREFIX

MAX_EXTENDER_PRIORITY = 10
LATENCY = Histogram(
    "toposched_extender_request_seconds",
    "Extender request latency.",
    ["verb"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
)

ERRORS = Counter(
    "toposched_extender_errors_total",
    "Extender requests answered with an error, by verb and kind: not_ready (cache syncing), pod (the pod cannot be "
    "placed anywhere), refused (a bind not made), bad_request, exception.",
    ["verb", "kind"],
)
for _verb in ("filter", "prioritize", "bind", "other"):  # at 0 from the start: a rate over no series is no rate
    for _kind in ("not_ready", "pod", "refused", "bad_request", "exception"):
        ERRORS.labels(_verb, _kind)


class Extender:
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    async def filter(self, request: web.Request) -> web.Response:
        pod, names = await _extender_args(request)
        if not self.coordinator.ready():  # a partial cache would misplace the pod: let it retry
            ERRORS.labels("filter", "not_ready").inc()
            return _json({"Error": "toposched: the extender's cache is still syncing"})
        started = time.perf_counter()
        results = await self.coordinator.filter(pod, names)
        if results.pod_error is not None:  # the pod, not any node: the scheduler records why
            ERRORS.labels("filter", "pod").inc()
            return _json({"NodeNames": [], "FailedNodes": {}, "Error": f"toposched: {results.pod_error}"})
        body = {
            "NodeNames": results.fitting(),
            "FailedNodes": results.failed(REASON_PREFIX),
            "FailedAndUnresolvableNodes": {},
            "Error": "",
        }
        response = _json(body)
        LATENCY.labels("filter").observe(time.perf_counter() - started)
        return response

    async def prioritize(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        pod, names = await _extender_args(request)
        scores = self.coordinator.scores(pod, names)
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
        error = await self.coordinator.bind(namespace, name, uid, node)
        LATENCY.labels("bind").observe(time.perf_counter() - started)
        if error:
            ERRORS.labels("bind", "refused").inc()
        return _json({"Error": error})

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(self, request: web.Request) -> web.Response:
        if self.coordinator.ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="syncing")

    def app(self, middlewares: Iterable[Middleware] = ()) -> web.Application:
        application = web.Application(middlewares=[_count_errors, *middlewares])
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


async def _extender_args(request: web.Request) -> tuple[dict[str, Any], list[str]]:
    """kube-scheduler's ExtenderArgs (node names only: nodeCacheCapable): the pod and the names.

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
    return pod if isinstance(pod, dict) else {}, names


@web.middleware
async def _count_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Requests that fail before an answer: a body that is not ExtenderArgs, or an exception."""
    verb = request.path.strip("/")
    verb = verb if verb in ("filter", "prioritize", "bind") else "other"  # the labels stay few
    try:
        return await handler(request)
    except web.HTTPBadRequest:
        ERRORS.labels(verb, "bad_request").inc()
        raise
    except web.HTTPException:
        raise
    except Exception:
        ERRORS.labels(verb, "exception").inc()
        raise


def _bad_request(reason: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(
        text=orjson.dumps({"Error": f"toposched: {reason}"}).decode(), content_type="application/json"
    )


def _json(body: object) -> web.Response:
    # orjson: a prioritize answer for 5,000 nodes encodes in 0.1 ms instead of 2 ms.
    return web.Response(body=orjson.dumps(body), content_type="application/json")


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
