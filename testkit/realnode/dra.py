"""A real node's DRA devices as data: per driver, the pools and ResourceSlices its DRA driver
publishes for the node, each device with the attributes that say where it sits (its NUMA node,
in any of the forms drivers use, and its PCIe root).

    NodeDRA.parse(["gpu.example.com=0,0,1,-1,-", "nic.example.com:nics/b=dra.net/numaNode=1,-#pci0000:80"])

The text form (``--dra`` of ``python -m testkit.realnode add|reset``), one ResourceSlice per spec::

    DRIVER[:POOL[/SLICE]]=DEVICE,DEVICE,...    (nothing after "=": a slice without devices)
    POOL      the pool's name; default: the node's name
    SLICE     the slice's name in its pool; default s0, s1... by its place among the pool's specs
    DEVICE    [NAME@]NUMA[&NUMA...][#PCIEROOT]
    NUMA      0, 1, -1...     resource.kubernetes.io/numaNode, an int (-1 too)
              ATTRIBUTE=N     another int attribute, e.g. dra.net/numaNode=-1 or gpu.nvidia.com/numa=0
              -               no NUMA attribute at all
    PCIEROOT  resource.kubernetes.io/pcieRoot, a string (pci0000:00)
    NAME      defaults to the driver's first label and the device's place in its pool: gpu-0, gpu-1...

Names order the scheduler's search (its allocator takes pools by driver and pool name, a pool's
slices by object name, a slice's devices as listed), so they are the caller's to choose: a
slice's object is ``<node>.<driver>.<pool>.<slice>``, and within a pool its order is SLICE's.
A device is known cluster-wide by (driver, pool, device): two nodes must not publish one pool.

The list form of an attribute (``resource.kubernetes.io/numaNode: [0, 1]``, written ``[0+1]``) is
refused: it needs the DRAListTypeAttributes feature gate, alpha and off in Kubernetes 1.36, and
without it the apiserver drops the list and rejects the slice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from testkit.realnode.topology import Topology

STANDARD_NUMA = "resource.kubernetes.io/numaNode"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
API_VERSION = "resource.k8s.io/v1"
MAX_DEVICES = 128
"""Devices of one ResourceSlice (the API's limit)."""
MAX_ATTRIBUTES = 32

_INT64 = 2**63
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STRING_FORBIDDEN = re.compile(r"[\s,&#@=]")


class DRAError(ValueError):
    """DRA device data a driver could not publish as meant (or that does not fit the topology)."""


def _check(pattern: re.Pattern[str], value: str, limit: int, what: str) -> None:
    if len(value) > limit or not pattern.match(value):
        kind = "a DNS label" if pattern is _LABEL else "a DNS subdomain"
        raise DRAError(f"{what} {value!r}: must be {kind} of at most {limit} characters")


def check_attribute_name(name: str) -> None:
    """Raise unless ``name`` is a qualified attribute name (``domain/identifier``)."""
    domain, slash, identifier = name.partition("/")
    if not slash:
        raise DRAError(f"attribute {name!r}: give its domain, e.g. dra.net/numaNode")
    _check(_SUBDOMAIN, domain, 63, f"attribute {name!r}: domain")
    if len(identifier) > 32 or not _IDENTIFIER.match(identifier):
        raise DRAError(f"attribute {name!r}: {identifier!r} must be a C identifier of at most 32 characters")


@dataclass(frozen=True)
class NumaAttribute:
    """One int attribute saying a device's NUMA node (-1: none, as some drivers write it)."""

    name: str
    value: int

    def __post_init__(self) -> None:
        check_attribute_name(self.name)
        if not -_INT64 <= self.value < _INT64:
            raise DRAError(f"attribute {self.name}: {self.value} is not a 64-bit integer")

    def spec(self) -> str:
        return str(self.value) if self.name == STANDARD_NUMA else f"{self.name}={self.value}"


@dataclass(frozen=True)
class DRADevice:
    """One device of a slice: its name, its NUMA attributes (none, or several forms at once) and
    its PCIe root ("": none)."""

    name: str
    numa: tuple[NumaAttribute, ...] = ()
    pcie_root: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "numa", tuple(self.numa))
        _check(_LABEL, self.name, 63, "device name")
        names = [a.name for a in self.numa]
        if len(set(names)) != len(names):
            raise DRAError(f"device {self.name}: a NUMA attribute is given twice in {names}")
        if PCIE_ROOT in names:
            raise DRAError(f"device {self.name}: {PCIE_ROOT} is a string, given after '#'")
        if len(names) + bool(self.pcie_root) > MAX_ATTRIBUTES:
            raise DRAError(f"device {self.name}: more than {MAX_ATTRIBUTES} attributes")
        if len(self.pcie_root) > 64 or _STRING_FORBIDDEN.search(self.pcie_root):
            raise DRAError(f"device {self.name}: PCIe root {self.pcie_root!r} must be at most 64 characters, no spaces")

    def attributes(self) -> dict[str, dict[str, int | str]]:
        """The device's ``attributes`` as the API writes them."""
        found: dict[str, dict[str, int | str]] = {a.name: {"int": a.value} for a in self.numa}
        if self.pcie_root:
            found[PCIE_ROOT] = {"string": self.pcie_root}
        return found

    def zones(self) -> set[int]:
        """The NUMA nodes its attributes name (-1 left out)."""
        return {a.value for a in self.numa if a.value != -1}


@dataclass(frozen=True)
class DRASlice:
    """One ResourceSlice of a driver: its pool ("": the node's name), its name in the pool, its devices."""

    driver: str
    name: str
    devices: tuple[DRADevice, ...] = ()
    pool: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", tuple(self.devices))
        _check(_SUBDOMAIN, self.driver, 63, "driver name")
        if self.pool:
            _check(_LABEL, self.pool, 63, "pool name")
        _check(_LABEL, self.name, 63, "slice name")
        if len(self.devices) > MAX_DEVICES:
            raise DRAError(f"slice {self.name} of {self.driver}: more than {MAX_DEVICES} devices")

    def pool_name(self, node: str) -> str:
        return self.pool or node

    def object_name(self, node: str) -> str:
        return f"{node}.{self.driver}.{self.pool_name(node)}.{self.name}"


def default_slice_name(position: int, count: int) -> str:
    """The name of a pool's slice at ``position`` (of ``count``) unless one is given: s0, s1...
    zero-padded so that names sort as positions do."""
    return f"s{position:0{len(str(count - 1))}d}"


def default_device_name(driver: str, position: int) -> str:
    """The name of a pool's device at ``position`` unless one is given: gpu-0 for gpu.example.com."""
    return f"{driver.split('.', 1)[0]}-{position}"


def _parse_numa(token: str, device: str) -> NumaAttribute:
    if token.startswith("["):
        raise DRAError(
            f"device {device!r}: {token} is a list attribute; the apiserver of Kubernetes 1.36 refuses those "
            "unless its DRAListTypeAttributes feature gate (alpha, off) is on: give one int per attribute"
        )
    name, eq, value = token.rpartition("=")
    try:
        number = int(value)
    except ValueError:
        raise DRAError(f"device {device!r}: NUMA {token!r} is an int, ATTRIBUTE=INT or '-'") from None
    return NumaAttribute(name if eq else STANDARD_NUMA, number)


def _parse_device(item: str, default: str) -> DRADevice:
    if not item:
        raise DRAError("an empty device (two commas in a row?)")
    named, at, rest = item.rpartition("@")
    body, _, root = rest.partition("#")
    numa = () if body == "-" else tuple(_parse_numa(t, item) for t in body.split("&"))
    return DRADevice(named if at else default, numa, root)


def _split_spec(spec: str) -> tuple[str, str, str | None, list[str]]:
    """(driver, pool, slice name or None, device items) of one spec."""
    head, sep, body = spec.partition("=")
    if not sep:
        raise DRAError(f"DRA spec {spec!r}: expected DRIVER[:POOL[/SLICE]]=DEVICE,... (e.g. gpu.example.com=0,1)")
    driver, _, where = head.strip().partition(":")
    pool, slash, name = where.partition("/")
    if slash and not name:
        raise DRAError(f"DRA spec {spec!r}: no slice name after '/'")
    items = [i.strip() for i in body.split(",")] if body.strip() else []
    return driver, pool, name if slash else None, items


@dataclass(frozen=True)
class NodeDRA:
    """Every ResourceSlice a node's DRA driver process publishes, of one or more drivers.

    ``allow_unknown_numa`` lets NUMA attributes name nodes the topology lacks (-1 is always allowed)."""

    slices: tuple[DRASlice, ...] = ()
    allow_unknown_numa: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "slices", tuple(self.slices))
        seen: set[tuple[str, str, str]] = set()
        devices: set[tuple[str, str, str]] = set()
        for s in self.slices:
            if (s.driver, s.pool, s.name) in seen:
                raise DRAError(f"{s.driver}: slice {s.name} of pool {s.pool or '(the node)'} is given twice")
            seen.add((s.driver, s.pool, s.name))
            for d in s.devices:
                if (s.driver, s.pool, d.name) in devices:
                    raise DRAError(f"{s.driver}: device {d.name} is given twice in pool {s.pool or '(the node)'}")
                devices.add((s.driver, s.pool, d.name))

    @classmethod
    def parse(cls, specs: Iterable[str], *, allow_unknown_numa: bool = False) -> NodeDRA:
        """Slices from text specs (see the module docstring), one slice per spec."""
        split = [(spec, _split_spec(spec)) for spec in specs]
        pools: dict[tuple[str, str], list[int]] = {}
        for index, (_, (driver, pool, _, _)) in enumerate(split):
            pools.setdefault((driver, pool), []).append(index)
        slices = []
        for index, (spec, (driver, pool, name, items)) in enumerate(split):
            members = pools[(driver, pool)]
            first = sum(len(split[i][1][3]) for i in members[: members.index(index)])
            try:
                devices = [_parse_device(item, default_device_name(driver, first + k)) for k, item in enumerate(items)]
                default = default_slice_name(members.index(index), len(members))
                slices.append(DRASlice(driver, default if name is None else name, tuple(devices), pool))
            except DRAError as exc:
                raise DRAError(f"DRA spec {spec!r}: {exc}") from None
        return cls(tuple(slices), allow_unknown_numa)

    def specs(self) -> list[str]:
        """The text form; :meth:`parse` reads it back as it is."""
        out = []
        for s, slice_default, device_defaults in self._with_defaults():
            named_slice = "" if s.name == slice_default else f"/{s.name}"
            where = f":{s.pool}{named_slice}" if s.pool or named_slice else ""
            items = []
            for device, default in zip(s.devices, device_defaults, strict=True):
                numa = "&".join(a.spec() for a in device.numa) or "-"
                named = "" if device.name == default else f"{device.name}@"
                items.append(f"{named}{numa}{'#' + device.pcie_root if device.pcie_root else ''}")
            out.append(f"{s.driver}{where}={','.join(items)}")
        return out

    def _with_defaults(self) -> list[tuple[DRASlice, str, list[str]]]:
        """Each slice with the names :meth:`parse` would give it and its devices by position."""
        pools: dict[tuple[str, str], list[DRASlice]] = {}
        for s in self.slices:
            pools.setdefault((s.driver, s.pool), []).append(s)
        out = []
        for s in self.slices:
            members = pools[(s.driver, s.pool)]
            position = members.index(s)
            first = sum(len(m.devices) for m in members[:position])
            names = [default_device_name(s.driver, first + k) for k in range(len(s.devices))]
            out.append((s, default_slice_name(position, len(members)), names))
        return out

    def describe(self) -> str:
        return " ".join(self.specs()) or "no DRA devices"

    def drivers(self) -> list[str]:
        """The drivers, in the order their first slice comes."""
        return list(dict.fromkeys(s.driver for s in self.slices))

    def of_driver(self, driver: str) -> tuple[DRASlice, ...]:
        return tuple(s for s in self.slices if s.driver == driver)

    def device(self, driver: str, pool: str, name: str, *, node: str) -> DRADevice:
        """The device ``name`` of ``driver``'s ``pool`` (as published for ``node``)."""
        for s in self.of_driver(driver):
            if s.pool_name(node) == pool:
                for device in s.devices:
                    if device.name == name:
                        return device
        raise DRAError(f"{driver} publishes no device {name} in pool {pool}")

    def validate(self, topology: Topology) -> None:
        """Raise :class:`DRAError` for a NUMA node ``topology`` does not have, unless allowed."""
        if self.allow_unknown_numa:
            return
        zones = len(topology.zones)
        for s in self.slices:
            for device in s.devices:
                unknown = sorted(z for z in device.zones() if not 0 <= z < zones)
                if unknown:
                    raise DRAError(
                        f"{s.driver}: device {device.name} is on NUMA node {unknown[0]}; the topology has "
                        f"nodes 0-{zones - 1} (allow_unknown_numa=True publishes it so)"
                    )

    # -- the API's objects -----------------------------------------------------------------------

    def resource_slices(self, node: str, generation: int) -> list[dict[str, Any]]:
        """The ResourceSlice objects for ``node``, every pool at ``generation``."""
        counts: dict[tuple[str, str], int] = {}
        for s in self.slices:
            key = (s.driver, s.pool_name(node))
            counts[key] = counts.get(key, 0) + 1
        out = []
        for s in self.slices:
            pool = s.pool_name(node)
            metadata: dict[str, Any] = {"name": s.object_name(node)}
            devices = [
                {"name": d.name, **({"attributes": d.attributes()} if d.attributes() else {})} for d in s.devices
            ]
            spec = {
                "driver": s.driver,
                "nodeName": node,
                "pool": {"name": pool, "generation": generation, "resourceSliceCount": counts[(s.driver, pool)]},
                "devices": devices,
            }
            out.append({"apiVersion": API_VERSION, "kind": "ResourceSlice", "metadata": metadata, "spec": spec})
        return out

    # -- (de)serialisation -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "slices": [
                {
                    "driver": s.driver,
                    "name": s.name,
                    **({"pool": s.pool} if s.pool else {}),
                    "devices": [
                        {
                            "name": d.name,
                            "numa": [{"name": a.name, "value": a.value} for a in d.numa],
                            **({"pcieRoot": d.pcie_root} if d.pcie_root else {}),
                        }
                        for d in s.devices
                    ],
                }
                for s in self.slices
            ]
        }
        if self.allow_unknown_numa:
            out["allowUnknownNuma"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeDRA:
        """Inverse of :meth:`to_dict`."""
        _only(data, {"slices", "allowUnknownNuma"}, "DRA devices")
        slices = []
        for entry in data.get("slices") or []:
            _only(entry, {"driver", "name", "pool", "devices"}, "a DRA slice")
            devices = []
            for device in entry.get("devices") or []:
                _only(device, {"name", "numa", "pcieRoot"}, f"a device of {entry.get('driver')}")
                numa = tuple(NumaAttribute(str(a["name"]), int(a["value"])) for a in device.get("numa") or ())
                devices.append(DRADevice(str(device["name"]), numa, str(device.get("pcieRoot", ""))))
            slices.append(
                DRASlice(str(entry["driver"]), str(entry["name"]), tuple(devices), str(entry.get("pool", "")))
            )
        return cls(tuple(slices), allow_unknown_numa=bool(data.get("allowUnknownNuma", False)))


def published(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a ResourceSlice object the driver publishes (name, driver, node, pool, devices and
    their attributes), as comparable data: equal for the desired object and the stored one."""
    spec = obj.get("spec") or {}
    pool = spec.get("pool") or {}
    devices = tuple(
        (d.get("name"), tuple(sorted((k, tuple(sorted(v.items()))) for k, v in (d.get("attributes") or {}).items())))
        for d in spec.get("devices") or ()
    )
    return (
        (obj.get("metadata") or {}).get("name"),
        spec.get("driver"),
        spec.get("nodeName"),
        (pool.get("name"), pool.get("generation"), pool.get("resourceSliceCount")),
        devices,
    )


def resource_claim_template(
    name: str, device_class_name: str, count: int = 1, *, request: str = "devices"
) -> dict[str, Any]:
    """A ResourceClaimTemplate whose claims ask for ``count`` devices of a DeviceClass, in one
    request named ``request``."""
    exactly = {"deviceClassName": device_class_name, "allocationMode": "ExactCount", "count": count}
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": request, "exactly": exactly}]}}},
    }


def owned_by_node(body: Mapping[str, Any], node: str, uid: str) -> dict[str, Any]:
    """``body`` owned by its Node, so that the garbage collector deletes it with the Node."""
    owner = {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid, "controller": True}
    return {**body, "metadata": {**body["metadata"], "ownerReferences": [owner]}}


def device_class(driver: str, name: str = "") -> dict[str, Any]:
    """A DeviceClass selecting every device of ``driver`` (named after it unless ``name``)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": name or driver},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def _only(data: Mapping[str, Any], known: set[str], what: str) -> None:
    unknown = set(data) - known
    if unknown:
        raise DRAError(f"{what}: unknown fields {sorted(unknown)} (known: {sorted(known)})")
