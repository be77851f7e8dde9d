"""The admission webhooks over TLS: AdmissionReview in, AdmissionReview out.

Decisions are made by toposched.schedhook.webhooks.admission; this module only speaks HTTP.
"""

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from toposched.schedhook.webhooks.admission import Rules, mutate_pod, review_response, validate_appgroup, validate_pod

PinClaim = Callable[[Mapping[str, Any], str], Awaitable[list[dict[str, Any]]]]
"""JSON patch operations pinning a new ResourceClaim (in a namespace) to a NUMA node, or none."""


class Webhooks:
    def __init__(self, rules: Rules, pin_claim: PinClaim | None = None) -> None:
        self.rules = rules
        self.pin_claim = pin_claim

    async def _review(self, request: web.Request) -> tuple[dict[str, Any], dict[str, Any]]:
        review = await request.json()
        req = review.get("request") or {}
        return req, req.get("object") or {}

    async def mutate_pods(self, request: web.Request) -> web.Response:
        req, pod = await self._review(request)
        patch = mutate_pod(pod, req.get("namespace") or "", self.rules)
        return web.json_response(review_response(req, patch=patch))

    async def mutate_claims(self, request: web.Request) -> web.Response:
        req, claim = await self._review(request)
        patch = await self.pin_claim(claim, req.get("namespace") or "") if self.pin_claim is not None else []
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
                web.post("/mutate-claims", self.mutate_claims),
                web.post("/validate-pods", self.validate_pods),
                web.post("/validate-appgroups", self.validate_appgroups),
            ]
        )
        return application
