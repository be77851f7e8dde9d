"""ResourceSlices (``resource.k8s.io/v1``): the devices a DRA driver publishes, and where each one is. Pure.

toposched reads what a slice says of its devices -- driver, pool, node, names, attributes and
capacities -- and keeps every other field as the server sent it. Which NUMA zones a device is near
comes from its attributes, by the one table ``NUMA_ATTRIBUTES``: the standard name first, then the
names drivers used before it. A missing attribute, or -1, means *unknown*: never zone 0.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from pydantic import Field

from toposched.apis.limits import MAX_NUMA_NODES
from toposched.apis.meta import CamelModel, KubeObject
from toposched.apis.quantity import Quantity

RESOURCE_GROUP: Final = "resource.k8s.io"
RESOURCE_VERSION: Final = "v1"

NUMA_ATTRIBUTES: Final = (
    "resource.kubernetes.io/numaNode",  # the standard name (KEP-6072): GPU, NIC and CPU drivers; a list where allowed
    "dra.net/numaNode",  # dranet and the SR-IOV DRA driver (-1: none)
    "dra.cpu/numaNodeID",  # dra-driver-cpu
    "dra.memory/numaNode",  # the memory driver (KEP-6072's table)
    "gpu.nvidia.com/numa",  # NVIDIA's older GPU driver, on VFIO devices
)
"""Device attributes that say which NUMA node a device is attached to, the first present one deciding."""
NO_NUMA_NODE: Final = -1
"""What drivers that always publish the attribute put for a device without a NUMA node."""


class DeviceAttribute(CamelModel):
    """One attribute value: exactly one field is set (the list fields with DRAListTypeAttributes)."""

    int_: int | None = Field(default=None, alias="int")
    bool_: bool | None = Field(default=None, alias="bool")
    string: str | None = None
    version: str | None = None
    ints: list[int] | None = None
    bools: list[bool] | None = None
    strings: list[str] | None = None
    versions: list[str] | None = None


class DeviceCapacity(CamelModel):
    value: Quantity


class Device(CamelModel):
    name: str
    attributes: dict[str, DeviceAttribute] = Field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = Field(default_factory=dict)


class ResourcePool(CamelModel):
    name: str
    generation: int = 0
    resource_slice_count: int = 1


class ResourceSliceSpec(CamelModel):
    driver: str
    pool: ResourcePool
    node_name: str | None = None
    all_nodes: bool | None = None
    devices: list[Device] = Field(default_factory=list)


class ResourceSlice(KubeObject):
    GROUP = RESOURCE_GROUP
    VERSION = RESOURCE_VERSION
    PLURAL = "resourceslices"
    NAMESPACED = False
    api_version: Literal["resource.k8s.io/v1"] = "resource.k8s.io/v1"
    kind: Literal["ResourceSlice"] = "ResourceSlice"
    spec: ResourceSliceSpec


@dataclass(frozen=True)
class DeviceNuma:
    """Where a device is: the NUMA zones it is near (every one of a list), or None when unknown."""

    zones: frozenset[int] | None
    why: str
    """The attribute the zones come from, or why they are unknown."""


def qualified(driver: str, name: str) -> str:
    """An attribute's full name: one without a domain is in the driver's."""
    return name if "/" in name else f"{driver}/{name}"


def device_numa(driver: str, attributes: Mapping[str, DeviceAttribute]) -> DeviceNuma:
    """The device's NUMA zones from the first attribute of ``NUMA_ATTRIBUTES`` it has a usable value
    of. -1 says the device has none (unknown, and final); a value no NUMA node can have is skipped
    for the next name, and said when no name has a usable one."""
    named = {qualified(driver, name): value for name, value in attributes.items()}
    refused = ""
    for name in NUMA_ATTRIBUTES:
        value = named.get(name)
        if value is None:
            continue
        numbers = value.ints if value.ints is not None else [value.int_] if value.int_ is not None else None
        if numbers is None:
            refused = refused or f"{name} is not a number"
        elif NO_NUMA_NODE in numbers:
            return DeviceNuma(None, f"{name} is {NO_NUMA_NODE}: the device has no NUMA node")
        elif not numbers or not all(0 <= n < MAX_NUMA_NODES for n in numbers):
            refused = refused or f"{name} {_short(numbers)} is no NUMA node"
        else:
            return DeviceNuma(frozenset(numbers), name)
    return DeviceNuma(None, refused or f"no NUMA attribute ({', '.join(NUMA_ATTRIBUTES)})")


def _short(numbers: list[int]) -> str:
    text = str(numbers[0]) if len(numbers) == 1 else str(numbers)
    return text if len(text) <= 40 else f"{text[:36]}..."
