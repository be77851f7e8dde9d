"""Writes the node's NodeResourceTopology: create, or replace when the content changed, never half.

A replace carries the resourceVersion it read, so a concurrent writer makes it fail with 409;
the publisher then reads again and retries. Labels and annotations others put on the object
are kept. The object is owned by its Node, so it is garbage-collected with the node.
"""

import logging
from typing import Any

from toposched.apis.constants import NODE_BANDWIDTH_RESOURCE
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.kube.nodeclient import ApiError, KubeAPI

logger = logging.getLogger(__name__)

NRTS = f"/apis/{NodeResourceTopology.GROUP}/{NodeResourceTopology.VERSION}/{NodeResourceTopology.PLURAL}"
MERGE = "application/merge-patch+json"
CONTENT = ("topologyPolicies", "zones", "attributes")


class NodeGoneError(RuntimeError):
    """The Node this exporter serves does not exist (any more)."""


def content(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: obj.get(k) for k in CONTENT} | {"owners": obj.get("metadata", {}).get("ownerReferences")}


class Publisher:
    def __init__(self, api: KubeAPI, node: str) -> None:
        self.api = api
        self.node = node

    async def read_node(self) -> dict[str, Any]:
        """The Node object; NodeGoneError when it was deleted."""
        try:
            node: dict[str, Any] = await self.api.request("GET", f"/api/v1/nodes/{self.node}")
        except ApiError as exc:
            if exc.status == 404:
                raise NodeGoneError(f"node {self.node} does not exist") from None
            raise
        return node

    async def label_node(self, node: dict[str, Any], labels: dict[str, str]) -> bool:
        """Set ``labels`` on the Node unless it has them already; True when written."""
        have = (node.get("metadata") or {}).get("labels") or {}
        if all(have.get(k) == v for k, v in labels.items()):
            return False
        await self.api.request("PATCH", f"/api/v1/nodes/{self.node}", {"metadata": {"labels": labels}}, MERGE)
        return True

    async def owner(self) -> dict[str, str]:
        """The ownerReference of the Node; NodeGoneError when it was deleted."""
        node = await self.read_node()
        return {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": node["metadata"]["uid"]}

    async def publish(self, nrt: NodeResourceTopology, attempts: int = 3) -> bool:
        """Make the stored object equal ``nrt``; True when something was written."""
        desired = nrt.to_dict()
        for _ in range(attempts):
            try:
                current = await self.api.request("GET", f"{NRTS}/{self.node}")
            except ApiError as exc:
                if exc.status != 404:
                    raise
                try:
                    await self.api.request("POST", NRTS, desired)
                    return True
                except ApiError as again:
                    if again.status == 409:  # created meanwhile: compare with that one
                        continue
                    raise
            if content(current) == content(desired):
                return False
            body = dict(desired)
            meta = dict(current["metadata"])
            for key in ("managedFields",):
                meta.pop(key, None)
            meta["ownerReferences"] = desired["metadata"].get("ownerReferences", meta.get("ownerReferences"))
            body["metadata"] = meta
            try:
                await self.api.request("PUT", f"{NRTS}/{self.node}", body)
                return True
            except ApiError as exc:
                if exc.status != 409:
                    raise
                logger.info("NRT %s changed while writing; reading it again", self.node)
        raise RuntimeError(f"NRT {self.node}: still conflicting after {attempts} attempts")

    async def advertise_bandwidth(self, bits_per_second: int) -> None:
        """Publish the NIC capacity as the extended resource network.aware.com/bandwidth."""
        value = str(bits_per_second)
        patch = {
            "status": {"capacity": {NODE_BANDWIDTH_RESOURCE: value}, "allocatable": {NODE_BANDWIDTH_RESOURCE: value}}
        }
        await self.api.request("PATCH", f"/api/v1/nodes/{self.node}/status", patch, content_type=MERGE)
