"""Admission webhooks over TLS, and the controller that lifts topology-order gates.

Decisions are made by schedhook.admission and schedhook.gates; this module only speaks
AdmissionReview and the Kubernetes API.
"""

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web
from kubernetes_asyncio import client

from apis.constants import APPGROUP_LABEL, WORKLOAD_LABEL
from schedhook.admission import ORDER_GATE, Rules, mutate_pod, review_response, validate_appgroup, validate_pod
from schedhook.cache import ClusterCache
from schedhook.gates import GatedPod, to_release
from schedhook.k8s import pod_event

logger = logging.getLogger(__name__)


class Webhooks:
    def __init__(self, rules: Rules) -> None:
        self.rules = rules

    async def _review(self, request: web.Request) -> tuple[dict[str, Any], dict[str, Any]]:
        review = await request.json()
        req = review.get("request") or {}
        return req, req.get("object") or {}

    async def mutate_pods(self, request: web.Request) -> web.Response:
        req, pod = await self._review(request)
        patch = mutate_pod(pod, req.get("namespace") or "", self.rules)
        return web.json_response(review_response(req, patch=patch))

    async def validate_pods(self, request: web.Request) -> web.Response:
        req, pod = await self._review(request)
        return web.json_response(review_response(req, validate_pod(pod)))

    async def validate_appgroups(self, request: web.Request) -> web.Response:
        req, obj = await self._review(request)
        return web.json_response(review_response(req, validate_appgroup(obj)))

    def app(self) -> web.Application:
        application = web.Application()
        application.add_routes(
            [
                web.post("/mutate-pods", self.mutate_pods),
                web.post("/validate-pods", self.validate_pods),
                web.post("/validate-appgroups", self.validate_appgroups),
            ]
        )
        return application


def _created(pod: client.V1Pod) -> datetime:
    stamp = pod.metadata.creation_timestamp
    return stamp if isinstance(stamp, datetime) else datetime.now(UTC)


async def release_gates_forever(
    api: client.ApiClient,
    cache: ClusterCache,
    wait: timedelta,
    period: float = 1.0,
    settle: timedelta = timedelta(seconds=2),
) -> None:
    """Every ``period``: lift the topology-order gate of the pods whose turn has come."""
    core = client.CoreV1Api(api)
    while True:
        try:
            pods = (await core.list_pod_for_all_namespaces(label_selector=APPGROUP_LABEL)).items
            groups: dict[tuple[str, str], list[client.V1Pod]] = {}
            for pod in pods:
                groups.setdefault((pod.metadata.namespace, pod.metadata.labels[APPGROUP_LABEL]), []).append(pod)
            for (namespace, group), members in groups.items():
                if not any(_gated(p) for p in members):
                    continue
                appgroup = cache.objects["appgroups"].get(f"{namespace}/{group}")
                entries = ((appgroup or {}).get("status") or {}).get("topologyOrder") or []
                order = {e["workload"]["selector"]: e["index"] for e in entries} or None
                views = [
                    GatedPod(
                        p.metadata.name,
                        (p.metadata.labels or {}).get(WORKLOAD_LABEL),
                        _created(p),
                        _gated(p),
                        bool(p.spec.node_name),
                    )
                    for p in members
                ]
                for release in to_release(views, order, datetime.now(UTC), wait, settle):
                    pod = next(p for p in members if p.metadata.name == release.pod)
                    # Remove only our gate; other gates are someone else's business.
                    await core.patch_namespaced_pod(
                        pod.metadata.name,
                        namespace,
                        {"spec": {"schedulingGates": [{"name": ORDER_GATE, "$patch": "delete"}]}},
                        _content_type="application/strategic-merge-patch+json",
                    )
                    if release.reason == "timeout":
                        message = f"released after waiting {wait.total_seconds():.0f}s for earlier workloads"
                        await pod_event(core, pod, "TopologyOrderTimeout", message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("releasing gated pods failed: %s", exc)
        await asyncio.sleep(period)


def _gated(pod: client.V1Pod) -> bool:
    return any(g.name == ORDER_GATE for g in pod.spec.scheduling_gates or [])
