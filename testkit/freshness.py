"""How fresh a node's NodeResourceTopology is, as a person would check it before placing pods: when
it was last written, and whether its pods fingerprint accounts for the pods bound to the node (the
test the extender makes before it trusts an NRT; ``toposched.schedhook.placement.freshness``).

    line = freshness("numa-1", nrt, pods).line()   # nrt: the stored object or None; pods: any pods
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from toposched.schedhook.extender.store import attributes_of
from toposched.schedhook.placement.freshness import accounted, counted_pods
from toposched.schedhook.placement.parse import placed_pod, pod_from_spec


@dataclass(frozen=True)
class Freshness:
    node: str
    written_ago: float | None
    """Seconds since the NRT was last written (its newest managedFields time); None: no NRT."""
    counted: int
    """Pods bound to the node that the NRT's fingerprint counts (by its method)."""
    left_out: int | None
    """Of those, how many the NRT does not account for; None: it has no fingerprint."""

    def current(self) -> bool:
        """The NRT is there and accounts for every pod bound to the node that it counts."""
        return self.written_ago is not None and self.left_out == 0

    def line(self) -> str:
        if self.written_ago is None:
            return f"{self.node}: no NRT"
        written = f"{self.node}: NRT written {self.written_ago:.0f} s ago"
        if self.left_out is None:
            return f"{written}, without a pods fingerprint"
        if self.left_out == 0:
            return f"{written}, its fingerprint accounts for all {self.counted} pod(s) bound there"
        return f"{written}, its fingerprint leaves out {self.left_out} of {self.counted} pod(s) bound there"


def timestamp(text: object) -> float | None:
    """An apiserver timestamp (``2026-11-25T21:01:03Z``) in seconds since the epoch; None if not one."""
    if not isinstance(text, str):
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def written_at(nrt: dict[str, Any]) -> float | None:
    """When the object was last written (whole seconds, as the apiserver records it)."""
    meta = nrt.get("metadata") or {}
    times = [timestamp(entry.get("time")) for entry in meta.get("managedFields") or []]
    known = [t for t in times if t is not None] or [t for t in [timestamp(meta.get("creationTimestamp"))] if t]
    return max(known) if known else None


def _bound_since(pod: dict[str, Any]) -> str:
    conditions = (pod.get("status") or {}).get("conditions") or []
    scheduled: dict[str, Any] = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
    return str(scheduled.get("lastTransitionTime") or (pod.get("metadata") or {}).get("creationTimestamp") or "")


def freshness(node: str, nrt: dict[str, Any] | None, pods: Iterable[dict[str, Any]], now: float) -> Freshness:
    """``node``'s NRT against the pods bound to it (``pods`` may hold others; they are skipped)."""
    if nrt is None:
        return Freshness(node, None, 0, None)
    placed = [p for p in pods if (placed := placed_pod(p)) is not None and placed.node == node]
    placed.sort(key=_bound_since)  # oldest bind first, as the fingerprint's lag is counted
    bound = [(p["metadata"].get("namespace", ""), p["metadata"]["name"], pod_from_spec(p["spec"])) for p in placed]
    attributes = attributes_of(nrt)
    counted = [(ns, name) for ns, name, _ in counted_pods(attributes, bound)]
    held = accounted(attributes, bound)
    written = written_at(nrt)
    ago = max(0.0, now - written) if written is not None else 0.0
    left_out = None if held is None else sum(1 for key in counted if key not in held)
    return Freshness(node, ago, len(counted), left_out)
