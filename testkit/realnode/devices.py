"""A real node's devices as data: per extended resource name, the devices its device plugin
reports, each with its NUMA zones and health, and what the plugin offers the kubelet.

    NodeDevices.parse(["example.com/gpu:preferred=0,0,1,1!", "example.com/nic=0+1,0+1", "example.com/fpga=-"])

The text form (``--device`` of ``python -m testkit.realnode add|reset``), one resource per spec::

    NAME[:OPTION...]=DEVICE,DEVICE,...      (nothing after "=": a resource without devices)
    OPTION  preferred   the plugin offers GetPreferredAllocation
            prestart    the plugin asks for PreStartContainer
    DEVICE  [ID@]ZONES[!]
    ZONES   a NUMA zone (0), zones joined by "+" (0+1: a device between two zones),
            or "-" (the plugin reports no topology for it)
    !       the device is unhealthy
    ID      defaults to the resource's last name segment and the device's position: gpu-0, gpu-1...

Structural mistakes are refused when the data is made; :meth:`NodeDevices.validate` then checks
it against the node's topology. Two kinds of garbage pass only when asked for, because they test
what the kubelet makes of them: NUMA zones the topology does not have (``allow_unknown_numa``)
and a device id reported twice for one resource (``allow_duplicate_ids``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from testkit.realnode.topology import Topology

OPTIONS = ("preferred", "prestart")
HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"
"""The health strings of the device plugin API (v1beta1)."""

_INT64 = 2**63
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# Characters the text form and the plugin's call log use as separators.
_ID_FORBIDDEN = re.compile(r"[\s,@!=]")


class DevicesError(ValueError):
    """Device data a plugin could not report as meant (or that does not fit the topology)."""


def check_resource_name(name: str) -> None:
    """Raise unless the kubelet would accept ``name`` from a device plugin: an extended resource
    name (``domain/name``, not in the kubernetes.io domain), as its ``IsExtendedResourceName``."""
    domain, slash, short = name.partition("/")
    if not slash:
        raise DevicesError(f"resource name {name!r}: an extended resource needs a domain, e.g. example.com/gpu")
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        raise DevicesError(f"resource name {name!r}: the kubernetes.io domain is for native resources")
    quota_domain = "requests." + domain  # the kubelet checks the name as a quota would name it
    if len(quota_domain) > 253 or not _DNS_SUBDOMAIN.match(quota_domain):
        raise DevicesError(f"resource name {name!r}: {domain!r} is not a DNS subdomain")
    if len(short) > 63 or not _NAME_PART.match(short):
        raise DevicesError(
            f"resource name {name!r}: {short!r} must be at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )


def is_extended_resource(name: str) -> bool:
    """Whether the kubelet would take ``name`` for an extended resource (see :func:`check_resource_name`)."""
    try:
        check_resource_name(name)
    except DevicesError:
        return False
    return True


def default_id(resource: str, position: int) -> str:
    """The id a device gets in the text form unless one is given: ``gpu-0`` for the first of
    ``example.com/gpu``."""
    return f"{resource.rsplit('/', 1)[-1]}-{position}"


def natural_key(device_id: str) -> tuple[tuple[int, int | str], ...]:
    """Orders ids as people count them: ``gpu-2`` before ``gpu-10``."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", device_id) if p)


@dataclass(frozen=True)
class Device:
    """One device: its id, the NUMA zones it is attached to (``()``: the plugin reports no
    topology; two zones: a device between sockets) and its health."""

    id: str
    numa: tuple[int, ...] = ()
    healthy: bool = True

    def __post_init__(self) -> None:
        if not self.id or self.id == "-" or _ID_FORBIDDEN.search(self.id):
            raise DevicesError(f"device id {self.id!r}: use a non-empty id without spaces, ',', '@', '!' or '='")
        for zone in self.numa:
            if not -_INT64 <= zone < _INT64:
                raise DevicesError(f"device {self.id}: NUMA zone {zone} is not a 64-bit integer")
        if len(set(self.numa)) != len(self.numa):
            raise DevicesError(f"device {self.id}: a NUMA zone is named twice in {list(self.numa)}")

    @property
    def health(self) -> str:
        """The API's health string."""
        return HEALTHY if self.healthy else UNHEALTHY


@dataclass(frozen=True)
class DeviceResource:
    """One extended resource of the node and the devices its plugin reports (maybe none).

    ``preferred_allocation``: the plugin offers GetPreferredAllocation (highest ids first);
    ``pre_start_required``: the kubelet must call PreStartContainer before each container."""

    name: str
    devices: tuple[Device, ...] = ()
    preferred_allocation: bool = False
    pre_start_required: bool = False

    def __post_init__(self) -> None:
        check_resource_name(self.name)
        object.__setattr__(self, "devices", tuple(self.devices))

    def device(self, device_id: str) -> Device:
        for device in self.devices:
            if device.id == device_id:
                return device
        raise DevicesError(f"{self.name} has no device {device_id!r} (it has {', '.join(self.ids()) or 'none'})")

    def ids(self) -> list[str]:
        return [d.id for d in self.devices]

    def counts(self) -> tuple[int, int]:
        """(capacity, allocatable) as the kubelet counts them once it has the list: healthy ids
        and unhealthy ids, each counted once (a duplicate id with both healths counts twice)."""
        healthy = {d.id for d in self.devices if d.healthy}
        unhealthy = {d.id for d in self.devices if not d.healthy}
        return len(healthy) + len(unhealthy), len(healthy)

    @classmethod
    def parse(cls, spec: str) -> DeviceResource:
        """A resource from its text form (see the module docstring)."""
        head, sep, body = spec.partition("=")
        if not sep:
            raise DevicesError(
                f"device spec {spec!r}: expected NAME[:OPTION...]=DEVICE,... (e.g. example.com/gpu=0,0,1,1)"
            )
        name, *options = head.strip().split(":")
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise DevicesError(f"device spec {spec!r}: unknown option {unknown[0]!r} (known: {', '.join(OPTIONS)})")
        devices = []
        items = body.split(",") if body.strip() else []
        for position, item in enumerate(i.strip() for i in items):
            try:
                devices.append(_parse_device(item, default_id(name, position)))
            except DevicesError as exc:
                raise DevicesError(f"device spec {spec!r}: {exc}") from None
        return cls(name, tuple(devices), "preferred" in options, "prestart" in options)

    def spec(self) -> str:
        """The text form; :meth:`parse` reads it back as it is."""
        head = ":".join([self.name, *(o for o, on in zip(OPTIONS, self._flags(), strict=True) if on)])
        items = []
        for position, device in enumerate(self.devices):
            zones = "+".join(str(z) for z in device.numa) if device.numa else "-"
            named = "" if device.id == default_id(self.name, position) else f"{device.id}@"
            items.append(f"{named}{zones}{'' if device.healthy else '!'}")
        return f"{head}={','.join(items)}"

    def _flags(self) -> tuple[bool, bool]:
        return self.preferred_allocation, self.pre_start_required


def _parse_device(item: str, default: str) -> Device:
    if not item:
        raise DevicesError("an empty device (two commas in a row?)")
    text = item[:-1] if item.endswith("!") else item
    named, at, zones = text.rpartition("@")
    device_id = named if at else default
    if zones == "-":
        numa: tuple[int, ...] = ()
    else:
        try:
            numa = tuple(int(z) for z in zones.split("+"))
        except ValueError:
            raise DevicesError(f"device {item!r}: NUMA zones are numbers joined by '+', or '-' for none") from None
    return Device(device_id, numa, healthy=not item.endswith("!"))


@dataclass(frozen=True)
class NodeDevices:
    """Every device resource of a node (one device plugin serves them all).

    ``allow_unknown_numa`` lets devices name NUMA zones the topology lacks (negative ones too);
    ``allow_duplicate_ids`` lets one resource report a device id more than once."""

    resources: tuple[DeviceResource, ...] = ()
    allow_unknown_numa: bool = False
    allow_duplicate_ids: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "resources", tuple(self.resources))
        names = [r.name for r in self.resources]
        for name in names:
            if names.count(name) > 1:
                raise DevicesError(f"resource {name} is given twice (one plugin registers it once)")
        if self.allow_duplicate_ids:
            return
        for resource in self.resources:
            ids = resource.ids()
            twice = sorted({i for i in ids if ids.count(i) > 1}, key=natural_key)
            if twice:
                raise DevicesError(
                    f"{resource.name}: device id {twice[0]} is given twice "
                    "(allow_duplicate_ids=True reports it so to the kubelet)"
                )

    @classmethod
    def parse(
        cls, specs: Iterable[str], *, allow_unknown_numa: bool = False, allow_duplicate_ids: bool = False
    ) -> NodeDevices:
        """Devices from text specs (see the module docstring), one resource per spec."""
        resources = tuple(DeviceResource.parse(spec) for spec in specs)
        return cls(resources, allow_unknown_numa, allow_duplicate_ids)

    def specs(self) -> list[str]:
        return [r.spec() for r in self.resources]

    def describe(self) -> str:
        """One line: the specs, or ``no devices``."""
        return " ".join(self.specs()) or "no devices"

    def names(self) -> list[str]:
        return [r.name for r in self.resources]

    def resource(self, name: str) -> DeviceResource:
        for resource in self.resources:
            if resource.name == name:
                return resource
        raise DevicesError(f"no device resource {name!r} (the node has {', '.join(self.names()) or 'none'})")

    def validate(self, topology: Topology) -> None:
        """Raise :class:`DevicesError` for a NUMA zone ``topology`` does not have, unless allowed."""
        if self.allow_unknown_numa:
            return
        zones = len(topology.zones)
        for resource in self.resources:
            for device in resource.devices:
                unknown = [z for z in device.numa if not 0 <= z < zones]
                if unknown:
                    raise DevicesError(
                        f"{resource.name}: device {device.id} is on NUMA zone {unknown[0]}; the topology has "
                        f"zones 0-{zones - 1} (allow_unknown_numa=True reports it so to the kubelet)"
                    )

    def counts(self) -> dict[str, tuple[int, int]]:
        """Resource name -> (capacity, allocatable) the Node shows once the kubelet has the lists."""
        return {r.name: r.counts() for r in self.resources}

    def with_resource(self, resource: DeviceResource) -> NodeDevices:
        """These devices with ``resource`` replacing the one of its name (or added last)."""
        kept = [resource if r.name == resource.name else r for r in self.resources]
        if resource.name not in self.names():
            kept.append(resource)
        return replace(self, resources=tuple(kept))

    def without_resource(self, name: str) -> NodeDevices:
        self.resource(name)
        return replace(self, resources=tuple(r for r in self.resources if r.name != name))

    def with_health(self, resource: str, device_id: str, healthy: bool) -> NodeDevices:
        """These devices with one device (every entry of its id) marked healthy or not."""
        current = self.resource(resource)
        current.device(device_id)
        devices = tuple(replace(d, healthy=healthy) if d.id == device_id else d for d in current.devices)
        return self.with_resource(replace(current, devices=devices))

    # -- (de)serialisation -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "resources": [
                {
                    "name": r.name,
                    "devices": [{"id": d.id, "numa": list(d.numa), "healthy": d.healthy} for d in r.devices],
                    **({"preferredAllocation": True} if r.preferred_allocation else {}),
                    **({"preStartRequired": True} if r.pre_start_required else {}),
                }
                for r in self.resources
            ]
        }
        if self.allow_unknown_numa:
            out["allowUnknownNuma"] = True
        if self.allow_duplicate_ids:
            out["allowDuplicateIds"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeDevices:
        """Inverse of :meth:`to_dict`."""
        _only(data, {"resources", "allowUnknownNuma", "allowDuplicateIds"}, "devices")
        resources = []
        for entry in data.get("resources") or []:
            _only(entry, {"name", "devices", "preferredAllocation", "preStartRequired"}, "a device resource")
            devices = []
            for device in entry.get("devices") or []:
                _only(device, {"id", "numa", "healthy"}, f"a device of {entry.get('name')}")
                devices.append(
                    Device(
                        str(device["id"]),
                        tuple(int(z) for z in device.get("numa") or ()),
                        healthy=bool(device.get("healthy", True)),
                    )
                )
            resources.append(
                DeviceResource(
                    str(entry["name"]),
                    tuple(devices),
                    preferred_allocation=bool(entry.get("preferredAllocation", False)),
                    pre_start_required=bool(entry.get("preStartRequired", False)),
                )
            )
        return cls(
            tuple(resources),
            allow_unknown_numa=bool(data.get("allowUnknownNuma", False)),
            allow_duplicate_ids=bool(data.get("allowDuplicateIds", False)),
        )


def _only(data: Mapping[str, Any], known: set[str], what: str) -> None:
    unknown = set(data) - known
    if unknown:
        raise DevicesError(f"{what}: unknown fields {sorted(unknown)} (known: {sorted(known)})")
