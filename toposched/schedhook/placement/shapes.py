"""Pod shapes the capacity count is asked about: written inline or taken from a pod. Pure.

Inline, ``gpu-train=cpu:8,memory:16Gi,example.com/gpu:1`` is one Guaranteed container (requests
equal to limits), the shape a workload that wants whole CPUs and devices on one NUMA zone has. A
pod manifest gives its own containers, init containers and pod-level resources.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from toposched.schedhook.placement.kubelet.claims import effective
from toposched.schedhook.placement.model import Container, Pod
from toposched.schedhook.placement.parse import pod_from_spec, quantities

_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_RESOURCE = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
STANDARD = ("cpu", "memory", "ephemeral-storage", "pods")
"""Resources every node has, whether or not it lists them."""


class ShapeError(ValueError):
    """A shape that cannot be counted; the message says which and why, on one line."""


@dataclass(frozen=True)
class Shape:
    name: str
    pod: Pod

    @property
    def requests(self) -> dict[str, Decimal]:
        """The pod's requests as the scheduler counts them."""
        return effective(self.pod)


def inline_shape(text: str) -> Shape:
    """``[name=]resource:amount,...``; without a name, the text is the name."""
    name, eq, spec = text.partition("=")
    if not eq:
        name, spec = text, text
    name = name.strip()
    if not _NAME.fullmatch(name) and eq:
        raise ShapeError(f"shape {text!r}: the name {name!r} must be lower-case letters, digits, '-' and '.'")
    raw: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        resource, colon, amount = part.partition(":")
        if not colon or not resource.strip() or not amount.strip():
            raise ShapeError(f"shape {text!r}: {part!r} is not resource:amount (e.g. cpu:8)")
        raw[resource.strip()] = amount.strip()
    if not raw:
        raise ShapeError(f"shape {text!r}: no requests (e.g. {name}=cpu:8,memory:16Gi)")
    try:
        values = quantities(raw, "requests")
    except ValueError as exc:
        raise ShapeError(f"shape {name}: {exc}") from None
    shape = Shape(name, Pod((Container(name, values, values),)))
    check_shape(shape)
    return shape


def pod_shape(body: Mapping[str, Any], where: str) -> Shape:
    """The shape of a pod manifest, named by its ``metadata.name``."""
    meta = body.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ShapeError(f"{where}: metadata.name: a pod shape needs a name")
    try:
        shape = Shape(name, pod_from_spec(body.get("spec")))
    except ValueError as exc:
        raise ShapeError(f"{where}: pod {name}: {exc}") from None
    check_shape(shape)
    return shape


def check_shape(shape: Shape) -> None:
    """Every resource name well formed, every amount positive, something requested at all."""
    containers = (*shape.pod.init_containers, *shape.pod.containers)
    if shape.pod.resources is not None:
        containers = (*containers, shape.pod.resources)
    for c in containers:
        for resource, amount in {**c.limits, **c.requests}.items():
            if not _RESOURCE.fullmatch(resource):
                raise ShapeError(f"shape {shape.name}: {resource!r} is not a resource name")
            if amount <= 0:
                raise ShapeError(f"shape {shape.name}: {resource} must be positive, not {amount}")
    if not any(amount > 0 for amount in shape.requests.values()):
        raise ShapeError(f"shape {shape.name}: requests nothing, so it has no capacity to count")


def unknown_resources(shape: Shape, known: set[str]) -> list[str]:
    """The shape's resources no node has (``known``: what the nodes and their NRTs list)."""
    return sorted(r for r in shape.requests if r not in known and r not in STANDARD and not r.startswith("hugepages-"))
