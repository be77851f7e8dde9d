"""What the extender saw of a node when it refused or bound a pod there: one line for the debug
log. Pure.

A refusal for NUMA room is the extender's view (the NRT minus the reservations it holds) against
the pod; when a pod stays refused while its node looks empty, the question is which of the two
held the room. So the line gives both: the NRT's version and CPUs available by zone as published,
what its pods fingerprint says of the node's pods, then each reservation held on the node (the
pod, its zones and CPUs, its age, and whether it was rebuilt from a bound pod's annotation rather
than made by a bind of this process), and the pods the fingerprint may count: those bound, those
being deleted, those gone lately.
"""

import time
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from toposched.schedhook.extender.reservations import Reservation

CPU = "cpu"


def nrt_cpus(body: Mapping[str, Any] | None) -> str:
    """The NRT's version and CPUs available by zone (``available`` as published)."""
    if body is None:
        return "no NRT"
    zones = []
    for zone in body.get("zones") or []:
        if not isinstance(zone, Mapping):
            continue
        resources = [r for r in zone.get("resources") or [] if isinstance(r, Mapping)]
        cpu = next((r.get("available") for r in resources if r.get("name") == CPU), None)
        zones.append(f"{zone.get('name')}={cpu}")
    version = (body.get("metadata") or {}).get("resourceVersion")
    return f"NRT {version} cpu available {' '.join(zones) or '-'}"


def held_line(held: Iterable[Reservation], now: float | None = None) -> str:
    """The reservations of a node, oldest first."""
    now = time.monotonic() if now is None else now
    parts = [
        f"{r.key or r.pod} zones {','.join(map(str, r.numa))} cpu {r.request.get(CPU, Decimal(0))} "
        f"{now - r.since:.1f}s{' rebuilt' if r.rebuilt else ''}"
        for r in held
    ]
    return "held: " + ("; ".join(parts) if parts else "none")


def refusal_line(
    node: str,
    reason: str,
    nrt: Mapping[str, Any] | None,
    fingerprint: str,
    held: Iterable[Reservation],
    pods: Iterable[str],
) -> str:
    """One node (refused: why), the NRT as published, the reservations taken off it, and the pods
    its fingerprint may count (those bound, those being deleted, those gone lately)."""
    return (
        f"{node}{': ' + reason if reason else ''} | {nrt_cpus(nrt)}, {fingerprint} | {held_line(held)}"
        f" | pods: {', '.join(pods) or 'none'}"
    )
