"""The devices kube-scheduler's allocator picks for a pod's ResourceClaims on each node, predicted
by that allocator itself (``allocatorproc``) from the store's slices, device classes and claims.

Claims already allocated hold their devices on every node (the scheduler passes only the node
their allocation selects). The others are asked of the helper, which answers, for the claims'
shape, only the nodes whose answer changed since it last answered that shape: the answers are
kept here per shape, as the helper's are, so a workload's next pod costs one changed node.
"""

import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from toposched.schedhook.extender.allocatorproc import AllocatorGoneError, AllocatorProcess, NodePick
from toposched.schedhook.extender.store import DRA_KINDS, ObjectStore, key_name, store_key
from toposched.schedhook.placement.dra import (
    ClaimRef,
    DeviceZones,
    Pick,
    allocated_nodes,
    allocation_picks,
    describe,
)

logger = logging.getLogger(__name__)

HELPER_KINDS: Final = {
    "resourceslices": "ResourceSlice",
    "deviceclasses": "DeviceClass",
    "resourceclaims": "ResourceClaim",
}
KEEP_SHAPES: Final = 64
"""Shapes of claims whose answers are kept (as many as the helper keeps as sent)."""


@dataclass
class PodPicks:
    """A pod's devices on each node: the allocated claims' (``fixed``) and, per node, the helper's
    answer for the others, whose rows name claims by position in ``keys``."""

    fixed: list[Pick] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    answers: Mapping[str, NodePick] | None = None
    """None: every claim is allocated already, the same devices on every node."""
    unknown: str = ""
    """Why nothing is known (the claims not seen yet, the helper away, ...)."""
    allowed: list[frozenset[str]] = field(default_factory=list)
    """The nodes each allocated claim that names them can be used on."""

    def answer(self, node: str) -> NodePick:
        """The node's answer as the scheduler's Filter decides: the allocator's first (an error
        there aborts it whatever else), then whether the allocated claims can be used there."""
        found = NodePick() if self.answers is None else self.answers.get(node, NodePick(unsuitable=True))
        if not found.error and not found.unsuitable and not all(node in names for names in self.allowed):
            return NodePick(unsuitable=True, error="a claim of the pod is allocated for another node")
        return found

    def of(self, node: str) -> list[Pick] | None:
        """The node's devices; None where the claims do not fit, or the allocator failed."""
        if self.unknown:
            return None
        found = self.answer(node)
        if found.error or found.unsuitable:
            return None
        return [*self.fixed, *(Pick(self.keys[d[0]], d[1], d[2], d[3], d[4]) for d in found.devices)]

    def describe(self, node: str, at: int) -> str:
        """The node's ``at``-th device, as ``placement.dra.describe`` names it."""
        picks = self.of(node) or []
        return describe(picks[at]) if 0 <= at < len(picks) else ""

    def failure(self) -> str:
        """Why nodes have no answer: the pod's reason, else the first node's error."""
        if self.unknown or self.answers is None:
            return self.unknown
        errors = (a.error for a in self.answers.values() if a.error and not a.unsuitable)
        return next((f"the allocator failed: {e}" for e in errors), "")


class PickPredictor:
    def __init__(self, store: ObjectStore, allocator: AllocatorProcess, timeout: float = 10.0) -> None:
        self.store = store
        self.allocator = allocator
        self.timeout = timeout
        self.zones = DeviceZones()
        self._changes = store.changes(DRA_KINDS)
        self._shapes: OrderedDict[str, dict[str, NodePick]] = OrderedDict()
        self._generation = 0
        """The helper process the shapes were answered by."""

    async def predict(self, namespace: str, refs: Sequence[ClaimRef], nodes: Sequence[str]) -> PodPicks:
        if not all(self.store.has_listed(k) for k in DRA_KINDS):
            return PodPicks(unknown="DRA objects not listed yet (resource.k8s.io/v1 served? may the extender list it?)")
        claims: list[dict[str, Any]] = []
        for ref in refs:
            claim = self.store.objects["resourceclaims"].get(store_key(namespace, ref.claim or ""))
            if claim is None:
                seen = "not created yet" if ref.claim is None else "not seen yet"
                return PodPicks(unknown=f"claim {ref.name} of the pod: {seen}")
            claims.append(claim)
        fixed = [p for c in claims for p in allocation_picks(c) or ()]
        todo = [c for c in claims if allocation_picks(c) is None]
        allowed = [a for c in claims if allocation_picks(c) is not None and (a := allocated_nodes(c)) is not None]
        if not todo:
            return PodPicks(fixed, allowed=allowed)
        keys = [f"{namespace}/{c['metadata']['name']}" for c in todo]
        try:
            await self.sync()
            answers = await self._answers(todo, nodes)
        except (AllocatorGoneError, ValueError, TimeoutError, OSError) as exc:
            logger.warning("DRA allocator: %s", exc)
            return PodPicks(unknown=f"the DRA allocator did not answer ({exc})")
        return PodPicks(fixed, keys, answers, allowed=allowed)

    async def _answers(self, claims: list[dict[str, Any]], nodes: Sequence[str]) -> Mapping[str, NodePick]:
        if self._generation != self.allocator.generation:  # a new process: it sent nothing yet
            self._shapes.clear()
            self._generation = self.allocator.generation
        shape, delta, changed = await self.allocator.changed(claims, nodes, list(self._shapes), self.timeout)
        known = self._shapes.get(shape) if delta else None
        if known is None:
            known = self._shapes[shape] = {}
        known.update(changed)
        self._shapes.move_to_end(shape)
        while len(self._shapes) > KEEP_SHAPES:
            self._shapes.popitem(last=False)
        return known

    async def sync(self) -> None:
        """Send the helper what changed in the store since the last call (everything after it started)."""
        restarted = await self.allocator.ensure()
        taken = self._changes.take()
        for kind, model in HELPER_KINDS.items():
            objects = self.store.objects[kind]
            changed = taken[kind]
            if restarted or changed is None:
                if kind == "resourceslices":
                    self.zones.clear()
                keys: set[str] | Sequence[str] = list(objects)
            else:
                keys = changed
            for key in keys:
                obj = objects.get(key)
                name = key_name(key) if kind != "resourceclaims" else key
                if obj is None:
                    self.allocator.delete(model, name)
                    if kind == "resourceslices":
                        self.zones.delete(key)
                    continue
                self.allocator.put(model, obj)
                if kind == "resourceslices":
                    self.zones.put(key, obj)
