"""One DRA oracle case against the local control plane: its objects written in a fresh namespace,
its earlier pods allocated by the real kube-scheduler, toposched's prediction taken, the case pod
let go, and what the scheduler did read back.

The case pod is created with a scheduling gate: the resourceclaim controller makes its template
claims (and records them in the pod's status) while the scheduler leaves it alone, the prediction
is taken once the extender's store holds everything the case wrote, and only then is the gate
removed. Its ResourceClaims exist before it; the earlier pods are bound (their allocations
written) or given up on before it comes, so nothing of the scheduler's is in flight -- except on
the cases drawn ``racing``, whose last earlier pod is not waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from testkit.oracle_dra.cases import Case
from testkit.oracle_dra.objects import LABEL, Objects, PodObjects, render
from testkit.oracle_dra.predict import Prediction, Predictor
from toposched.kube import rest
from toposched.schedhook.placement.dra import allocation_picks, pod_claims

GROUP, VERSION = "resource.k8s.io", "v1"
PLURALS = {
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
}
NOT_SCHEDULED = ("Unschedulable", "SchedulerError")
"""PodScheduled=False reasons: the scheduler tried and found no node, or aborted on an error."""
FAILURES = (rest.ApiError, aiohttp.ClientError, OSError, TimeoutError, RuntimeError)


class NotJudgedError(Exception):
    """The scheduler, still running, did not decide on the case pod in time."""


@dataclass
class Observation:
    node: str
    """Where the scheduler bound the case pod; empty when it did not."""
    reason: str = ""
    """When not bound: the PodScheduled condition's reason and message."""
    allocations: dict[str, list[tuple[str, str, str, str]] | None] = field(default_factory=dict)
    """Every claim of the case (namespace/name; the earlier pods' too) -> its allocation's devices
    as (request, driver, pool, device), in order; None when it is not allocated."""


@dataclass
class CaseRun:
    case: Case
    worker: str
    namespace: str
    nodes: list[str]
    prediction: Prediction | None = None
    observation: Observation | None = None
    claims: list[str] = field(default_factory=list)
    """The case pod's claims (namespace/name), in its order."""
    earlier: dict[str, str] = field(default_factory=dict)
    """Earlier pod -> the node it went to ("" where none, or not waited for)."""
    allocated_seen: list[str] = field(default_factory=list)
    """The claims (namespace/name) the store held allocated when toposched predicted."""
    outcome: str = "judged"
    """judged, not judged or error."""
    error: str = ""
    not_judged: str = ""
    seconds: float = 0.0


def object_path(body: dict[str, Any]) -> str:
    meta = body["metadata"]
    return rest.path(GROUP, VERSION, PLURALS[body["kind"]], meta.get("namespace"), meta["name"])


class Worker:
    """Runs cases one after another on its own kwok nodes (``nodes``, labelled with its name)."""

    def __init__(
        self, name: str, nodes: Sequence[str], api: rest.Kube, predictor: Predictor, decide_within: float = 30.0
    ) -> None:
        self.name = name
        self.nodes = list(nodes)
        self.api = api
        self.predictor = predictor
        self.decide_within = decide_within

    async def run(self, case: Case) -> CaseRun:
        started = time.monotonic()
        namespace = f"odra-{case.seed}-{case.number}-{secrets.token_hex(2)}"
        run = CaseRun(case, self.name, namespace, self.nodes)
        objects = render(case, namespace, self.name, self.nodes)
        try:
            await self._write(objects)
            await self._earlier(objects, run)
            pod = await self._gated(objects.case_pod)
            await self._caught_up(objects)
            run.allocated_seen = self.predictor.allocated(namespace)  # before: what the prediction saw at least
            run.prediction = await self.predictor.predict(pod, self.nodes)
            run.claims = [f"{namespace}/{name}" for name in _claim_names(pod)]
            await self.api.patch(rest.path("", "v1", "pods", namespace, "pod"), {"spec": {"schedulingGates": []}})
            run.observation = await self._observe(namespace, run.prediction)
        except NotJudgedError as exc:
            run.outcome, run.not_judged = "not judged", str(exc)
        except FAILURES as exc:
            run.outcome, run.error = "error", f"{type(exc).__name__}: {exc}"
        finally:
            await self._clean(objects)
            run.seconds = time.monotonic() - started
        return run

    async def _write(self, objects: Objects) -> None:
        metadata = {"name": objects.namespace, "labels": {LABEL: self.name}}
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
        await self.api.create(rest.path("", "v1", "namespaces"), namespace)
        for body in (*objects.classes, *objects.slices):
            await self.api.create(rest.path(GROUP, VERSION, PLURALS[body["kind"]]), body)

    async def _create_pod(self, pod: PodObjects) -> dict[str, Any]:
        """The pod's claims and templates, then the pod (again while the namespace's service
        account is not made yet)."""
        namespace = pod.pod["metadata"]["namespace"]
        for body in pod.claims:
            await self.api.create(rest.path(GROUP, VERSION, PLURALS[body["kind"]], namespace), body)
        deadline = time.monotonic() + 30
        while True:
            try:
                created: dict[str, Any] = await self.api.create(rest.path("", "v1", "pods", namespace), pod.pod)
                return created
            except rest.ApiError as exc:
                if exc.status != 403 or "service account" not in exc.reason or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.1)

    async def _earlier(self, objects: Objects, run: CaseRun) -> None:
        """Create the earlier pods and wait until the scheduler bound each or gave up on it; those
        it gave up on are deleted (their claims hold nothing), so none is tried again beside the
        case pod."""
        for pod in objects.earlier:
            await self._create_pod(pod)
        waited = objects.earlier[:-1] if run.case.racing else objects.earlier
        for pod in waited:
            name = pod.pod["metadata"]["name"]
            decided = await self._decision(objects.namespace, name, self.decide_within)
            run.earlier[name] = (decided.get("spec") or {}).get("nodeName") or ""
            if not run.earlier[name]:
                await self.api.delete(rest.path("", "v1", "pods", objects.namespace, name))

    async def _gated(self, pod: PodObjects) -> dict[str, Any]:
        """The case pod, created gated, once the resourceclaim controller has made its template
        claims and said so in its status."""
        created = await self._create_pod(pod)
        namespace, name = created["metadata"]["namespace"], created["metadata"]["name"]
        templates = {e["name"] for e in created["spec"]["resourceClaims"] if e.get("resourceClaimTemplateName")}
        deadline = time.monotonic() + 30
        while True:
            current: dict[str, Any] = await self.api.get(rest.path("", "v1", "pods", namespace, name))
            made = {s.get("name") for s in (current.get("status") or {}).get("resourceClaimStatuses") or ()}
            if templates <= made:
                return current
            if time.monotonic() > deadline:
                raise TimeoutError(f"the claims of templates {sorted(templates - made)} were not made in 30s")
            await asyncio.sleep(0.05)

    async def _caught_up(self, objects: Objects) -> None:
        """Wait until the extender's store holds the case's slices, classes and claims as the API
        has them now."""
        selector = {"labelSelector": f"{LABEL}={objects.namespace}"}
        written: dict[str, list[dict[str, Any]]] = {}
        for kind in ("resourceslices", "deviceclasses"):
            written[kind] = (await self.api.get(rest.path(GROUP, VERSION, kind), **selector))["items"]
        claims = await self.api.get(rest.path(GROUP, VERSION, "resourceclaims", objects.namespace))
        written["resourceclaims"] = claims["items"]
        await self.predictor.seen(written)

    async def _decision(self, namespace: str, name: str, within: float, patience: float = 0.0) -> dict[str, Any]:
        """The pod once the scheduler bound it or said it could not (after ``patience`` more
        seconds of not binding it: it tries again when what it waited for comes)."""
        deadline = time.monotonic() + within
        given_up: float | None = None
        while True:
            pod: dict[str, Any] = await self.api.get(rest.path("", "v1", "pods", namespace, name))
            if (pod.get("spec") or {}).get("nodeName"):
                return pod
            if _not_scheduled(pod):
                given_up = given_up or time.monotonic()
                if time.monotonic() - given_up >= patience:
                    return pod
            if time.monotonic() > deadline:
                raise NotJudgedError(f"the scheduler had not decided on {name} after {within:.0f}s")
            await asyncio.sleep(0.05)

    async def _observe(self, namespace: str, prediction: Prediction) -> Observation:
        expected = bool(prediction.picks) and not prediction.errors
        pod = await self._decision(namespace, "pod", self.decide_within, patience=5.0 if expected else 0.0)
        node = (pod.get("spec") or {}).get("nodeName") or ""
        condition = _not_scheduled(pod) or {}
        observed = Observation(node, "" if node else f"{condition.get('reason')}: {condition.get('message')}")
        claims = await self.api.get(rest.path(GROUP, VERSION, "resourceclaims", namespace))
        for body in claims["items"]:
            picks = allocation_picks(body)
            observed.allocations[f"{namespace}/{body['metadata']['name']}"] = (
                None if picks is None else [(p.request, p.driver, p.pool, p.device) for p in picks]
            )
        return observed

    async def _clean(self, objects: Objects) -> None:
        """Delete the case's objects, and wait until the store has seen its slices go: the next
        case on these nodes must not meet them."""
        # The pods first: one the scheduler keeps failing on an error is retried (backing off) until
        # it is gone, and a namespace takes its time to empty.
        for pod in (objects.case_pod, *objects.earlier):
            with contextlib.suppress(*FAILURES):
                await self.api.delete(rest.path("", "v1", "pods", objects.namespace, pod.pod["metadata"]["name"]))
        with contextlib.suppress(*FAILURES):  # never created
            await self.api.delete(rest.path("", "v1", "namespaces", objects.namespace))
        for body in (*objects.slices, *objects.classes):
            with contextlib.suppress(*FAILURES):
                await self.api.delete(object_path(body))
        gone = [f"/{s['metadata']['name']}" for s in objects.slices]
        with contextlib.suppress(TimeoutError):
            await self.predictor.seen({}, {"resourceslices": gone}, within=10)


def _not_scheduled(pod: dict[str, Any]) -> dict[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return condition if condition.get("reason") in NOT_SCHEDULED else None
    return None


def _claim_names(pod: dict[str, Any]) -> list[str]:
    """The pod's ResourceClaims in its order, as toposched reads them (``pod_claims``)."""
    return [ref.claim for ref in pod_claims(pod) if ref.claim is not None]
