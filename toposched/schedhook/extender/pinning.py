"""The claim webhook's choice: which NUMA node a pod's new claim is pinned to (``placement.drapin``).

For each NUMA node k, the room on k is counted over the candidate nodes (those kube-scheduler's
label and taint filters pass) where the claim kept on k fits: per node, the copies of the pod the
kubelet would pin on k (``placement.capacity``: copies admitted one after another, as it would)
and the free devices on k of the pool the allocator picks from, whichever is fewer. The claim is
pinned where most room is left once the claims pinned there and not yet allocated are counted --
a burst of pods, whose claims all arrive before any is placed, spreads over the NUMA nodes.

Nothing is pinned when the pod does not ask for it, holds no pinned CPUs, or fits pinned nowhere:
the claim is created as it was written. A late answer pins nothing (the webhook's timeout).
"""

import copy
import logging
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any, Final

import aiohttp
import orjson

from toposched.kube import rest
from toposched.schedhook.extender.allocatorproc import AllocatorGoneError, NodePick
from toposched.schedhook.extender.coordinator import Coordinator
from toposched.schedhook.extender.store import key_name
from toposched.schedhook.placement.capacity import copies
from toposched.schedhook.placement.dra import allocation_picks, pins_cpus
from toposched.schedhook.placement.drapin import (
    POD_CLAIM_ANNOTATION,
    choose,
    decision_patch,
    owner_pod,
    pin_selector,
    selector_targets,
    wants_pin,
)
from toposched.schedhook.placement.nodefit import selects
from toposched.schedhook.placement.parse import pod_from_spec

logger = logging.getLogger(__name__)

FORGET_AFTER: Final = 600.0
"""Seconds a decision counts as pending at most (its pod deleted, or never scheduled)."""


class Pinner:
    def __init__(self, coordinator: Coordinator, api: rest.Kube | None, pin_all: bool = False) -> None:
        self.coordinator = coordinator
        self.api = api
        self.pin_all = pin_all
        self._decided: dict[tuple[str, str, str], tuple[str, float]] = {}
        """(namespace, pod, the pod's claim name) -> the decision, when: until the claim is allocated."""

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
            room = await self._room(pod, claim, namespace)
        except (AllocatorGoneError, ValueError, TimeoutError, OSError) as exc:
            logger.warning("claim of pod %s/%s: not pinned (%s)", namespace, name, exc)
            return []
        k = choose(room, self._pending())
        said = "left as written" if k is None else f"pinned to NUMA node {k}"
        logger.info("claim of pod %s/%s: %s (room per NUMA node: %s)", namespace, name, said, room)
        pod_claim = ((claim.get("metadata") or {}).get("annotations") or {}).get(POD_CLAIM_ANNOTATION, "")
        self._decided[(namespace, name, pod_claim)] = ("none" if k is None else str(k), time.monotonic())
        return decision_patch(claim, k)

    def _pending(self) -> Counter[str]:
        """Decisions whose claims are not allocated yet, by decision (the store may not show the
        claims of a burst yet: the decisions are remembered here)."""
        allocated = set()
        for c in self.coordinator.view.store.objects["resourceclaims"].values():
            meta = c.get("metadata") or {}
            if allocation_picks(c) is not None and (owner := owner_pod(c)) is not None:
                allocated.add((meta.get("namespace", ""), owner, (meta.get("annotations") or {})[POD_CLAIM_ANNOTATION]))
        now = time.monotonic()
        self._decided = {
            key: (k, when)
            for key, (k, when) in self._decided.items()
            if key not in allocated and now - when < FORGET_AFTER
        }
        return Counter(k for k, _ in self._decided.values())

    async def _room(self, pod: dict[str, Any], claim: Mapping[str, Any], namespace: str) -> dict[int | None, int]:
        """NUMA node k -> the pods of this shape the candidate nodes can take on k with the claim
        kept on k (empty: the pod pins no CPUs, or the claim fits pinned nowhere)."""
        parsed = pod_from_spec(pod.get("spec") or {})
        if not pins_cpus(parsed):
            return {}
        view = self.coordinator.view
        snapshot = view.snapshot()
        nodes = view.store.objects["nodes"]
        names = [key_name(k) for k, node in sorted(nodes.items()) if selects(pod, node)]
        cpu_copies: dict[int, dict[str, int]] = {}
        for name in names:
            nrt = snapshot.nrts.get(name)
            if nrt is None or name in snapshot.blind:
                continue
            for k, count in copies(nrt, parsed, {}, strict=False).zones.items():
                cpu_copies.setdefault(k, {})[name] = count
        predictor = self.coordinator.devices.predictor
        await predictor.sync()
        taken = {
            (p.driver, p.pool, p.device)
            for c in view.store.objects["resourceclaims"].values()
            for p in allocation_picks(c) or ()
        }
        room: dict[int | None, int] = {}
        for k, on in sorted(cpu_copies.items()):
            answers = await predictor.allocator.allocate(
                [_pinned(claim, namespace, k)], list(on), per_node=predictor.timeout
            )
            room[k] = sum(min(on[n], self._free_on(a, k, taken)) for n, a in answers.items() if not a.error)
        return room if any(room.values()) else {}

    def _free_on(self, answer: NodePick, k: int, taken: set[tuple[str, str, str]]) -> int:
        """Free devices on NUMA node ``k`` in the pools the allocator picked from on the node."""
        zones = self.coordinator.devices.zones
        pools = {(d[2], d[3]) for d in answer.devices}
        return sum(
            1
            for driver, pool in pools
            for device, where in zones.in_pool(driver, pool)
            if where.zones is not None and k in where.zones and (driver, pool, device) not in taken
        )


def _pinned(claim: Mapping[str, Any], namespace: str, k: int) -> dict[str, Any]:
    """The claim as it would be once pinned to ``k``, named for the allocator."""
    pinned = copy.deepcopy(dict(claim))
    meta = pinned.setdefault("metadata", {})
    meta.setdefault("namespace", namespace)
    meta.setdefault("name", f"{meta.get('generateName', 'claim-')}pinned")
    for _, target in selector_targets(pinned):
        target["selectors"] = [*(target.get("selectors") or ()), pin_selector(k)]
    return pinned
