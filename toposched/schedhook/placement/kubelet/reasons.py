"""Why the kubelet would reject a pod, said once for every path that predicts it. Pure.

A rejection names its real cause: the Topology Manager's policy (no alignment it accepts: under
single-numa-node, with the first request no single zone can hold) or a resource manager's
allocation failing (the kubelet's UnexpectedAdmissionError). The predictor (``admission``) and
the columnar table write their reasons with these functions, so one pod gets one text.
"""

from collections.abc import Callable, Sequence
from decimal import Decimal

import numpy as np

from toposched.apis.kubelet import RESTRICTED, SINGLE_NUMA_NODE
from toposched.schedhook.placement.kubelet.hints import Bools, Ints, milli, milli_request
from toposched.schedhook.placement.model import Container, NodeTopology, Pod


def subject(pod: Pod, container: Container) -> str:
    """``container app``, ``init container setup``, ``sidecar container proxy``."""
    kind = ("sidecar " if container.sidecar else "init ") if container in pod.init_containers else ""
    return f"{kind}container {container.name}"


def cannot_align(who: str, policy: str, shortfall: str = "") -> str:
    """The Topology Manager rejects ``who`` (a TopologyAffinityError) under ``policy``."""
    if policy == SINGLE_NUMA_NODE:
        return f"cannot align {who} on one NUMA zone" + (f": {shortfall}" if shortfall else "")
    if policy == RESTRICTED:
        return f"cannot align {who}: no NUMA affinity all its resource managers prefer (restricted policy)"
    return f"cannot align {who}"


def cannot_allocate(who: str, why: str) -> str:
    """A resource manager's allocation for ``who`` fails (an UnexpectedAdmissionError)."""
    return f"cannot allocate for {who}: {why}"


def show_quantity(value: Decimal) -> str:
    """``6``, ``0.5``: how reasons print a quantity."""
    return str(int(value)) if value == value.to_integral_value() else str(value.normalize())


Available = Callable[[str], "tuple[Ints, Bools] | None"]
"""resource -> ([zone, row] available, [row] whether some zone reports it), or None: no row has it."""


def first_shortfall(
    requests: Sequence[tuple[str, Decimal]], available: Available, rows: int, rejected: Ints
) -> tuple[Ints, list[str]]:
    """Why each of the ``rejected`` rows (of ``rows``) fails, as a position in the returned texts
    (-1: none found): the first request, in order, that some zone reports but no zone has enough
    of, e.g. ``cpu 6 requested, best zone has 4 available``."""
    detail = np.full(rows, -1, dtype=np.int64)
    details: list[str] = []
    open_ = rejected
    for resource, amount in requests:
        found = available(resource) if len(open_) else None
        if found is None:
            continue
        values, reported = found
        best = values[:, open_].max(axis=0)
        short = reported[open_] & (milli_request(amount) > best)
        if not short.any():
            continue
        distinct, of = np.unique(best[short], return_inverse=True)  # a few distinct values among many rows
        detail[open_[short]] = len(details) + of.reshape(-1)
        head = f"{resource} {show_quantity(amount)} requested, best zone has "
        details.extend(f"{head}{show_quantity(Decimal(v) / 1000)} available" for v in distinct.tolist())
        open_ = open_[~short]
    return detail, details


def shortfall(pod: Pod, node: NodeTopology) -> str:
    """Which request of the pod no single zone of ``node`` can hold: ``cpu 6 requested, best zone has 4 available``."""
    if not node.zones:
        return ""
    requests = [(r, q) for c in (*pod.init_containers, *pod.containers) for r, q in c.request.items()]

    def available(resource: str) -> tuple[Ints, Bools]:
        values = [[milli(z.available.get(resource, Decimal(0)))] for z in node.zones]
        reported = any(resource in z.available for z in node.zones)
        return np.array(values, dtype=np.int64), np.array([reported])

    detail, details = first_shortfall(requests, available, 1, np.zeros(1, dtype=np.int64))
    return details[int(detail[0])] if detail[0] >= 0 else ""
