"""NodeResourceTopology (``topology.node.k8s.io/v1alpha2``): free resources per NUMA zone of a node.

Cluster-scoped, one object per node, named after the node.
"""

from typing import Literal

from pydantic import Field

from toposched.apis.constants import NRT_GROUP, NRT_PLURAL, NRT_VERSION
from toposched.apis.meta import CamelModel, KubeObject
from toposched.apis.quantity import Quantity


class AttributeInfo(CamelModel):
    name: str
    value: str


class CostInfo(CamelModel):
    """Distance from this zone to the zone called ``name`` (the NUMA distance table row)."""

    name: str
    value: int


class ResourceInfo(CamelModel):
    name: str
    capacity: Quantity
    allocatable: Quantity
    available: Quantity


class Zone(CamelModel):
    name: str
    type: str
    parent: str | None = None
    costs: list[CostInfo] | None = None
    attributes: list[AttributeInfo] | None = None
    resources: list[ResourceInfo] | None = None


class NodeResourceTopology(KubeObject):
    GROUP = NRT_GROUP
    VERSION = NRT_VERSION
    PLURAL = NRT_PLURAL
    NAMESPACED = False

    api_version: Literal["topology.node.k8s.io/v1alpha2"] = "topology.node.k8s.io/v1alpha2"
    kind: Literal["NodeResourceTopology"] = "NodeResourceTopology"
    topology_policies: list[str] | None = None
    zones: list[Zone] = Field(min_length=1)
    attributes: list[AttributeInfo] | None = None

    def attribute(self, name: str) -> str | None:
        """The value of a top-level attribute, or None when the exporter did not publish it."""
        for attr in self.attributes or ():
            if attr.name == name:
                return attr.value
        return None
