"""Release gated AppGroup pods in topology order. Pure decision; the I/O is ``gate_release``'s.

A gated pod of workload W is released when no pod of a workload placed earlier (a lower index
in the AppGroup's status.topologyOrder) is still unbound, or when it has waited long enough
(default 30 s), or when its AppGroup has no order at all (never block a pod on a missing
AppGroup).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class GatedPod:
    name: str
    workload: str | None
    created: datetime
    gated: bool
    bound: bool


@dataclass(frozen=True)
class Release:
    pod: str
    reason: str
    """``order`` (earlier workloads placed) or ``timeout`` (waited too long) or ``no-order``."""


def to_release(
    pods: Sequence[GatedPod],
    order: Mapping[str, int] | None,
    now: datetime,
    wait: timedelta,
    settle: timedelta = timedelta(0),
) -> list[Release]:
    """Which gated pods of one AppGroup may be scheduled now.

    ``settle``: a pod is not released in order before it is this old, so that pods of earlier
    workloads created at the same moment (a whole application applied at once) show up first.
    """
    out: list[Release] = []
    for pod in pods:
        if not pod.gated or now - pod.created < settle:
            continue
        mine = order.get(pod.workload) if order and pod.workload is not None else None
        if order is None or mine is None:
            out.append(Release(pod.name, "no-order"))
            continue
        waiting_on = [p for p in pods if p.workload is not None and order.get(p.workload, mine) < mine and not p.bound]
        if not waiting_on:
            out.append(Release(pod.name, "order"))
        elif now - pod.created >= wait:
            out.append(Release(pod.name, "timeout"))
    return out
