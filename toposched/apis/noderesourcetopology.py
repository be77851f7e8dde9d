"""NodeResourceTopology (``topology.node.k8s.io/v1alpha2``): free resources per NUMA zone of a node.

Cluster-scoped, one object per node, named after the node.
"""

from collections.abc import Sequence
from decimal import Decimal
from typing import Literal, Self

from pydantic import Field, model_validator

from toposched.apis.constants import NRT_GROUP, NRT_PLURAL, NRT_VERSION, NRT_ZONE_TYPE_NODE
from toposched.apis.limits import LOCAL_DISTANCE, MAX_NUMA_DISTANCE, MAX_ZONE_RESOURCES, MAX_ZONES, check_amount
from toposched.apis.meta import CamelModel, KubeObject
from toposched.apis.quantity import Quantity, parse_quantity


class AttributeInfo(CamelModel):
    name: str
    value: str


class CostInfo(CamelModel):
    """Distance from this zone to the zone called ``name`` (the NUMA distance table row)."""

    name: str
    value: int = Field(ge=0, le=MAX_NUMA_DISTANCE)


class ResourceInfo(CamelModel):
    """Amounts of one resource in a zone: each within what a machine has (``limits``), and no more
    available than allocatable."""

    name: str
    capacity: Quantity
    allocatable: Quantity
    available: Quantity

    @model_validator(mode="after")
    def _bounded(self) -> Self:
        amounts = {}
        for field in ("capacity", "allocatable", "available"):
            amounts[field] = parse_quantity(getattr(self, field))
            try:
                check_amount(self.name, amounts[field])
            except ValueError as exc:
                raise ValueError(f"{field}: {exc}") from None
        if amounts["available"] > amounts["allocatable"]:
            raise ValueError(f"available {self.available} is more than allocatable {self.allocatable} of {self.name}")
        return self


class Zone(CamelModel):
    name: str
    type: str
    parent: str | None = None
    costs: list[CostInfo] | None = Field(default=None, max_length=MAX_ZONES)
    attributes: list[AttributeInfo] | None = None
    resources: list[ResourceInfo] | None = Field(default=None, max_length=MAX_ZONE_RESOURCES)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        for cost in self.costs or ():
            if cost.name == self.name and cost.value != LOCAL_DISTANCE:
                raise ValueError(f"the distance of {self.name} to itself is {cost.value}, not {LOCAL_DISTANCE}")
        _unique("resource", [r.name for r in self.resources or ()])
        return self

    def attribute(self, name: str) -> str | None:
        """The value of one of the zone's attributes, or None when it is not published."""
        return _attribute(self.attributes, name)


class NodeResourceTopology(KubeObject):
    GROUP = NRT_GROUP
    VERSION = NRT_VERSION
    PLURAL = NRT_PLURAL
    NAMESPACED = False

    api_version: Literal["topology.node.k8s.io/v1alpha2"] = "topology.node.k8s.io/v1alpha2"
    kind: Literal["NodeResourceTopology"] = "NodeResourceTopology"
    topology_policies: list[str] | None = None
    zones: list[Zone] = Field(min_length=1, max_length=MAX_ZONES)
    attributes: list[AttributeInfo] | None = None

    @model_validator(mode="after")
    def _machine(self) -> Self:
        """Zone names are unique, and the NUMA zones together hold no more than one machine can."""
        _unique("zone", [z.name for z in self.zones])
        totals: dict[str, Decimal] = {}
        for zone in self.zones:
            if zone.type == NRT_ZONE_TYPE_NODE:  # other zone types (a socket) contain NUMA zones
                for r in zone.resources or ():
                    most = max(parse_quantity(r.capacity), parse_quantity(r.allocatable))  # available <= allocatable
                    totals[r.name] = totals.get(r.name, Decimal(0)) + most
        for resource, total in totals.items():
            try:
                check_amount(resource, total)
            except ValueError as exc:
                raise ValueError(f"the NUMA zones together: {exc}") from None
        return self

    def attribute(self, name: str) -> str | None:
        """The value of a top-level attribute, or None when the exporter did not publish it."""
        return _attribute(self.attributes, name)


def _attribute(attributes: Sequence[AttributeInfo] | None, name: str) -> str | None:
    for attr in attributes or ():
        if attr.name == name:
            return attr.value
    return None


def _unique(what: str, names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{what} name {name!r} is listed twice")
        seen.add(name)
