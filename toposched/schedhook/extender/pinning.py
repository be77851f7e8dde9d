"""The claim webhook's choice: which NUMA node a pod's new claim is pinned to (``placement.drapin``).

For each NUMA node k, the candidate nodes (those kube-scheduler's label and taint filters pass)
where the kubelet is predicted to pin the pod's CPUs on k alone are asked of the allocator with the
claim kept on k; the claim is pinned where most fit. Nothing is pinned when the pod does not ask
for it, holds no pinned CPUs, or fits nowhere: the claim is created as it was written. Bounded by
the webhook's own timeout: a late answer pins nothing.
"""

import copy
import logging
from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson

from toposched.kube import rest
from toposched.schedhook.extender.allocatorproc import AllocatorGoneError
from toposched.schedhook.extender.coordinator import Coordinator
from toposched.schedhook.extender.store import key_name
from toposched.schedhook.placement.dra import cpu_zones, pins_cpus
from toposched.schedhook.placement.drapin import choose, numa_expression, owner_pod, pin_patch, wants_pin
from toposched.schedhook.placement.evaluate import evaluate
from toposched.schedhook.placement.nodefit import selects

logger = logging.getLogger(__name__)


class Pinner:
    def __init__(self, coordinator: Coordinator, api: rest.Kube | None, pin_all: bool = False) -> None:
        self.coordinator = coordinator
        self.api = api
        self.pin_all = pin_all

    async def patch(self, claim: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
        """JSON patch operations pinning the claim, or none."""
        name = owner_pod(claim)
        if name is None or self.api is None:
            return []
        try:
            pod = await self.api.get(rest.path("", "v1", "pods", namespace, name))
        except (rest.ApiError, aiohttp.ClientError, OSError, TimeoutError, orjson.JSONDecodeError) as exc:
            logger.warning("claim of pod %s/%s: the pod not read (%s); not pinned", namespace, name, exc)
            return []
        if not wants_pin(pod, self.pin_all):
            return []
        try:
            k = choose(await self._fitting(pod, claim, namespace))
        except (AllocatorGoneError, ValueError, TimeoutError, OSError) as exc:
            logger.warning("claim of pod %s/%s: not pinned (%s)", namespace, name, exc)
            return []
        logger.info("claim of pod %s/%s: pinned to NUMA node %s", namespace, name, k)
        return pin_patch(claim, k) if k is not None else []

    async def _fitting(self, pod: dict[str, Any], claim: Mapping[str, Any], namespace: str) -> dict[int, int]:
        """NUMA node k -> the candidate nodes pinning the pod's CPUs on k where the claim kept on k fits."""
        view = self.coordinator.view
        snapshot = view.snapshot()
        nodes = view.store.objects["nodes"]
        names = sorted(key_name(k) for k, node in nodes.items() if selects(pod, node))
        results = evaluate(pod, names, snapshot, self.coordinator.config.placement)
        pins = pins_cpus(results.pod)
        by_zone: dict[int, list[str]] = {}
        for i in range(len(names)):
            if not results.fit[i]:
                continue
            cpus = cpu_zones(pins, snapshot.nrts.get(names[i]), results.numa_ids(i))
            if cpus is not None and len(cpus) == 1:
                by_zone.setdefault(cpus[0], []).append(names[i])
        predictor = self.coordinator.devices.predictor
        await predictor.sync()
        fitting: dict[int, int] = {}
        for k, candidates in sorted(by_zone.items()):
            pinned = _pinned(claim, namespace, k)
            answers = await predictor.allocator.allocate([pinned], candidates, per_node=predictor.timeout)
            fitting[k] = sum(1 for a in answers.values() if not a.error and not a.unsuitable)
        return fitting


def _pinned(claim: Mapping[str, Any], namespace: str, k: int) -> dict[str, Any]:
    """The claim as it would be once pinned to ``k`` (named, for the allocator, if it is not yet)."""
    pinned = copy.deepcopy(dict(claim))
    meta = pinned.setdefault("metadata", {})
    meta.setdefault("namespace", namespace)
    meta.setdefault("name", f"{meta.get('generateName', 'claim-')}pinned")
    selector = {"cel": {"expression": numa_expression(k)}}
    for request in ((pinned.get("spec") or {}).get("devices") or {}).get("requests") or []:
        for target in (request.get("exactly"), *(request.get("firstAvailable") or ())):
            if isinstance(target, dict):
                target["selectors"] = [*(target.get("selectors") or ()), selector]
    return pinned
