"""A driver's ResourceSlices for its node, kept as the configuration says through the API server:
created when missing (the kubelet deletes them when it starts, and 30 s after the driver went),
replaced when they differ, deleted when no longer configured. Each slice is owned by the Node, so
the garbage collector deletes what a removed node's driver left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from testkit.dra.service import Log
from testkit.realnode.dra import API_VERSION, owned_by_node, published
from testkit.realnode.dra_driver import ERROR, PUBLISHED
from toposched.kube.api import ApiError, path
from toposched.kube.nodeclient import KubeAPI

GROUP, VERSION = API_VERSION.split("/")
SLICES = path(GROUP, VERSION, "resourceslices")


class SlicePublisher:
    """Publishes the slices of the drivers of one node (``sync`` once per driver and look)."""

    def __init__(self, api: KubeAPI, node: str, log: Log) -> None:
        self.api = api
        self.node = node
        self.log = log
        self.errors: dict[str, str] = {}

    async def claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """A ResourceClaim (None: there is none), for the drivers' Prepare."""
        try:
            found: Mapping[str, Any] = await self.api.request(
                "GET", path(GROUP, VERSION, "resourceclaims", namespace, name)
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return found

    async def sync(self, driver: str, wanted: Sequence[Mapping[str, Any]], generation: int) -> None:
        """Make the API hold exactly ``wanted`` of ``driver`` for the node; an API error is logged
        (once until it changes) and left for the next look."""
        try:
            written = await self._sync(driver, wanted)
        except (ApiError, OSError) as exc:
            if self.errors.get(driver) != str(exc):
                self.errors[driver] = str(exc)
                self.log(ERROR, driver, (), message=f"publishing the slices failed: {exc}")
            return
        self.errors.pop(driver, None)
        if any(written.values()):
            names = [str(s["metadata"]["name"]) for s in wanted]
            self.log(
                PUBLISHED, driver, names, generation=generation, **{k: ",".join(v) or "-" for k, v in written.items()}
            )

    async def _sync(self, driver: str, wanted: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
        selector = f"spec.nodeName={self.node},spec.driver={driver}"
        listed = await self.api.request("GET", SLICES, fieldSelector=selector)
        stored = {str(s["metadata"]["name"]): s for s in listed.get("items") or []}
        written: dict[str, list[str]] = {"created": [], "replaced": [], "deleted": []}
        for name in sorted(set(stored) - {str(s["metadata"]["name"]) for s in wanted}):
            await self.api.request("DELETE", f"{SLICES}/{name}")
            written["deleted"].append(name)
        changed = [s for s in wanted if published(s) != published(stored.get(str(s["metadata"]["name"])) or {})]
        if not changed:
            return written
        node = await self.api.request("GET", path("", "v1", "nodes", name=self.node))
        for body in changed:
            name = str(body["metadata"]["name"])
            owned = owned_by_node(body, self.node, str(node["metadata"]["uid"]))
            if name in stored:
                owned["metadata"]["resourceVersion"] = stored[name]["metadata"]["resourceVersion"]
                await self.api.request("PUT", f"{SLICES}/{name}", owned)
                written["replaced"].append(name)
            else:
                await self.api.request("POST", SLICES, owned)
                written["created"].append(name)
        return written
