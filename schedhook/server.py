"""The scheduler extender's HTTP endpoints: filter, prioritize and bind (kube-scheduler's JSON).

kube-scheduler calls them for pods of the ``toposched`` profile. Filter answers for every
candidate (with a reason for each rejected node, which ends up in the pod's FailedScheduling
Event); prioritize maps our 0-100 scores onto the extender's 0-10; bind records the NUMA
zones the kubelet is predicted to use (annotation, and a reservation in the cache) and binds.
"""

import json
import logging
import time
from decimal import Decimal
from typing import Any

from aiohttp import web
from kubernetes_asyncio import client
from prometheus_client import Histogram

from schedhook.cache import ClusterCache, Reservation
from schedhook.placement.evaluate import Config, NodeResult, evaluate_pod
from schedhook.placement.numa import container_request, pod_from_spec
from schedhook.placement.objects import NUMA_ZONES_ANNOTATION

logger = logging.getLogger(__name__)

MAX_EXTENDER_PRIORITY = 10
LATENCY = Histogram(
    "toposched_extender_request_seconds",
    "Extender request latency.",
    ["verb"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
)


class Extender:
    def __init__(self, cache: ClusterCache, api: client.ApiClient, config: Config | None = None) -> None:
        self.cache = cache
        self.api = api
        self.config = config or Config()
        self.last: dict[str, dict[str, NodeResult]] = {}
        """Results of the latest filter per pod uid, reused by prioritize and bind."""
        self.requests: dict[str, dict[str, Decimal]] = {}

    def _evaluate(self, pod: dict[str, Any], names: list[str]) -> dict[str, NodeResult]:
        uid = pod.get("metadata", {}).get("uid", "")
        results = {r.node: r for r in evaluate_pod(pod, names, self.cache.snapshot(exclude=uid), self.config)}
        self.last[uid] = results
        total: dict[str, Decimal] = {}
        for c in pod_from_spec(pod.get("spec") or {}).containers:
            for r, q in container_request(c).items():
                total[r] = total.get(r, Decimal(0)) + q
        self.requests[uid] = total
        if len(self.last) > 10_000:  # forget the oldest pods' results
            for key in list(self.last)[:1000]:
                self.last.pop(key, None)
                self.requests.pop(key, None)
        return results

    async def filter(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        args = await request.json()
        pod = args.get("Pod") or args.get("pod") or {}
        names = list(args.get("NodeNames") or args.get("nodenames") or [])
        results = self._evaluate(pod, names)
        uid = pod.get("metadata", {}).get("uid", "")
        # The scheduler picks one of the fitting nodes and binds later, asynchronously (and
        # skips prioritize when one node fits): hold the request on every fitting node until
        # the bind says which, so the next pod's filter already sees it.
        held = self.requests.get(uid, {})
        self.cache.release(uid)
        for n in names:
            zones = results[n].numa_zones
            if results[n].fit and zones and held:
                numa = tuple(int(z.removeprefix("node-")) for z in zones)
                self.cache.reserve(Reservation(uid, n, numa, held, tentative=True))
        body = {
            "NodeNames": [n for n in names if results[n].fit],
            "FailedNodes": {n: f"toposched: {results[n].reason}" for n in names if not results[n].fit},
            "FailedAndUnresolvableNodes": {},
            "Error": "",
        }
        LATENCY.labels("filter").observe(time.perf_counter() - started)
        return web.json_response(body)

    async def prioritize(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        args = await request.json()
        pod = args.get("Pod") or args.get("pod") or {}
        names = list(args.get("NodeNames") or args.get("nodenames") or [])
        uid = pod.get("metadata", {}).get("uid", "")
        results = self.last.get(uid)
        if results is None or any(n not in results for n in names):
            results = self._evaluate(pod, names)
        body = [{"Host": n, "Score": results[n].score * MAX_EXTENDER_PRIORITY // 100} for n in names]
        LATENCY.labels("prioritize").observe(time.perf_counter() - started)
        return web.json_response(body)

    async def bind(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        args = await request.json()
        name, namespace, node = args["PodName"], args["PodNamespace"], args["Node"]
        uid = args.get("PodUID", "")
        core = client.CoreV1Api(self.api)
        try:
            result = self.last.get(uid, {}).get(node)
            if result is not None and result.numa_zones:
                patch = {"metadata": {"annotations": {NUMA_ZONES_ANNOTATION: json.dumps(result.numa_zones)}}}
                await core.patch_namespaced_pod(name, namespace, patch)
                numa = tuple(int(z.removeprefix("node-")) for z in result.numa_zones)
                request_total = self.requests.get(uid, {})
                self.cache.reserve(Reservation(uid, node, numa, request_total))
            binding = client.V1Binding(
                metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid=uid or None),
                target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
            )
            await core.create_namespaced_binding(namespace, binding, _preload_content=False)
            error = ""
        except client.ApiException as exc:
            error = f"binding {namespace}/{name} to {node}: {exc.status} {exc.reason}"
            logger.warning(error)
            self.cache.release(uid)
        finally:
            self.last.pop(uid, None)
            self.requests.pop(uid, None)
        LATENCY.labels("bind").observe(time.perf_counter() - started)
        return web.json_response({"Error": error})

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok") if self.cache.synced.is_set() else web.Response(status=503, text="syncing")

    def app(self) -> web.Application:
        application = web.Application()
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
