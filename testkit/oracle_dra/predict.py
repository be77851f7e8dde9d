"""toposched's prediction of the DRA pick, by the product's own path: an extender ``ObjectStore``
kept by ``feed`` against the apiserver, and ``Devices.picks`` (the allocator helper) for every node.

The oracle predicts only once the store holds what it wrote for the case (``seen``): the store
is the extender's view, and a view that lags would judge the watch, not the prediction.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from testkit.paths import CRDS
from toposched.kube import rest
from toposched.schedhook.extender.allocatorproc import AllocatorProcess, NodePick
from toposched.schedhook.extender.devices import Devices
from toposched.schedhook.extender.eventsink import EventSink
from toposched.schedhook.extender.feed import feed
from toposched.schedhook.extender.store import DRA_KINDS, ObjectStore, object_key
from toposched.schedhook.placement.dra import Pick, allocation_picks, pod_claims

CRD_PATH = rest.path("apiextensions.k8s.io", "v1", "customresourcedefinitions")


@dataclass
class Prediction:
    picks: dict[str, list[Pick]] = field(default_factory=dict)
    """Node -> the devices the pod's claims are predicted to get there (nodes they fit)."""
    left_out: dict[str, NodePick] = field(default_factory=dict)
    """Node -> the allocator's answer where they do not fit or it fails."""
    unknown: str = ""
    """Why nothing is known (no prediction at all)."""
    seconds: float = 0.0

    @property
    def errors(self) -> dict[str, str]:
        """Nodes where the allocator fails as the scheduler would: a CEL runtime error, which
        aborts the pod's scheduling attempt rather than ruling out that node."""
        return {n: a.error for n, a in self.left_out.items() if a.error and not a.unsuitable}

    def to_dict(self) -> dict[str, Any]:
        return {
            "picks": {n: [p._asdict() for p in picks] for n, picks in self.picks.items()},
            "left_out": {n: a.error or "the claims do not fit" for n, a in self.left_out.items()},
            "unknown": self.unknown,
            "seconds": round(self.seconds, 3),
        }


class Predictor:
    def __init__(self, api: rest.Kube, helper: str) -> None:
        self.api = api
        self.store = ObjectStore()
        self.devices = Devices(self.store, None, EventSink(None), allocator=AllocatorProcess([helper]))
        self._feed: asyncio.Task[None] | None = None

    async def start(self, within: float = 60.0) -> None:
        await self._crds()
        self._feed = asyncio.create_task(feed(self.store, self.api))
        deadline = time.monotonic() + within
        while not all(self.store.has_listed(k) for k in DRA_KINDS):
            if self._feed.done() or time.monotonic() > deadline:
                raise RuntimeError("the extender's store did not list ResourceSlices, DeviceClasses and ResourceClaims")
            await asyncio.sleep(0.05)

    async def _crds(self) -> None:
        """The project's CRDs, which the store follows too (a cluster without them has the feed
        retrying their lists, and saying so)."""
        for path in sorted(CRDS.glob("*.yaml")):
            try:
                await self.api.create(CRD_PATH, yaml.safe_load(path.read_text()))
            except rest.ApiError as exc:
                if exc.status != 409:
                    raise

    async def close(self) -> None:
        if self._feed is not None:
            self._feed.cancel()
            await asyncio.gather(self._feed, return_exceptions=True)
        await self.devices.close()

    async def seen(
        self,
        written: Mapping[str, Sequence[Mapping[str, Any]]],
        gone: Mapping[str, Sequence[str]] | None = None,
        within: float = 30.0,
    ) -> None:
        """Wait until the store holds every object of ``written`` (kind -> objects as the API
        last answered them) at that version or a later one, and none of the keys of ``gone``."""
        deadline = time.monotonic() + within
        while not self._holds(written, gone or {}):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the extender's store did not catch up with the case's objects in {within:.0f}s")
            await asyncio.sleep(0.02)

    def _holds(self, written: Mapping[str, Sequence[Mapping[str, Any]]], gone: Mapping[str, Sequence[str]]) -> bool:
        for kind, objects in written.items():
            stored = self.store.objects[kind]
            for obj in objects:
                found = stored.get(object_key(dict(obj)))
                if found is None or _version(found) < _version(obj):
                    return False
        return not any(key in self.store.objects[kind] for kind, keys in gone.items() for key in keys)

    def allocated(self, namespace: str) -> list[str]:
        """The claims of ``namespace`` the store holds allocated now (namespace/name)."""
        claims = self.store.objects["resourceclaims"]
        return sorted(k for k, c in claims.items() if k.startswith(f"{namespace}/") and allocation_picks(c) is not None)

    async def predict(self, pod: Mapping[str, Any], nodes: Sequence[str]) -> Prediction:
        """The devices the pod's claims get on each of ``nodes``, as the extender's filter asks."""
        started = time.monotonic()
        prediction = Prediction()
        namespace = (pod.get("metadata") or {}).get("namespace", "")
        prediction.picks, prediction.unknown = await self.devices.picks(
            namespace, pod_claims(pod), nodes, prediction.left_out
        )
        prediction.seconds = time.monotonic() - started
        return prediction


def _version(obj: Mapping[str, Any]) -> int:
    """An object's resourceVersion as a number: etcd's revision, which the local apiserver uses
    (opaque in general; the oracle only runs against that apiserver)."""
    return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
