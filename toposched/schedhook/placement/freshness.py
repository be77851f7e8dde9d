"""Does a node's NRT already account for the pods bound to it? Pure.

The exporter publishes ``nodeTopologyPodsFingerprint``: the pfp0v001 fingerprint of the pods the
kubelet reported (all of them, or only those holding exclusive resources, as
``nodeTopologyPodsFingerprintMethod`` says). When the fingerprint of the pods the extender
knows on the node (or of all but the newest few: an NRT is usually a little behind) is the same,
the NRT's ``available`` already has their requests taken off, and the reservations of those pods
can go, while the newer ones stay.
"""

from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple

from toposched.apis.constants import (
    NRT_ATTR_CPU_MANAGER_POLICY,
    NRT_ATTR_MEMORY_MANAGER_POLICY,
    NRT_ATTR_PODS_FINGERPRINT,
    NRT_ATTR_PODS_FINGERPRINT_METHOD,
)
from toposched.apis.fingerprint import METHOD_ALL, fingerprint
from toposched.schedhook.placement.kubelet.claims import holds_exclusive
from toposched.schedhook.placement.model import Pod


def accounted(
    attributes: Mapping[str, str], pods: Sequence[tuple[str, str, Pod]], lag: int = 8
) -> frozenset[tuple[str, str]] | None:
    """The pods (namespace, name) the NRT accounts for; None when it has no fingerprint.

    ``pods`` are the pods bound to the node, oldest bind first. An NRT is usually a little
    behind: it matches the pods without the newest few. Up to ``lag`` newest are tried before
    giving up (an empty set: nothing can be said)."""
    if not attributes.get(NRT_ATTR_PODS_FINGERPRINT):
        return None
    return matched(attributes, pods, lag) or frozenset()


def matched(
    attributes: Mapping[str, str], pods: Sequence[tuple[str, str, Pod]], lag: int = 8
) -> frozenset[tuple[str, str]] | None:
    """The pods the NRT's fingerprint is exactly of (the node's pods without the newest few, up to
    ``lag``); None when it has none or it is of no such set (nothing can be said)."""
    published = attributes.get(NRT_ATTR_PODS_FINGERPRINT)
    if not published:
        return None
    counted = [(ns, name) for ns, name, _ in counted_pods(attributes, pods)]
    for newest in range(min(lag, len(counted)) + 1):
        prefix = counted[: len(counted) - newest]
        if fingerprint(prefix) == published:
            return frozenset(prefix)
    return None


def went_back(
    before: frozenset[tuple[str, str]], now: frozenset[tuple[str, str]], running: Collection[tuple[str, str]]
) -> frozenset[tuple[str, str]]:
    """The pods an earlier NRT of the node accounted for, still running there, that this one
    (``now``, what it is exactly of) leaves out: the NRT went back.

    A restarted kubelet does so: its PodResources lists no pod until it has admitted the running
    ones again from its checkpoint, and the NRT then shows their CPUs free. Its managers are being
    rebuilt meanwhile (a new pod may find no CPU hint at all), so nothing the NRT says of the node
    holds until it accounts for those pods again."""
    return frozenset(pod for pod in before if pod in running and pod not in now)


def counted_pods(attributes: Mapping[str, str], pods: Sequence[tuple[str, str, Pod]]) -> list[tuple[str, str, Pod]]:
    """The pods an NRT's fingerprint counts, by its method: all, or those holding exclusive resources."""
    method = attributes.get(NRT_ATTR_PODS_FINGERPRINT_METHOD, METHOD_ALL)
    cpu, memory = attributes.get(NRT_ATTR_CPU_MANAGER_POLICY), attributes.get(NRT_ATTR_MEMORY_MANAGER_POLICY)
    return [p for p in pods if method == METHOD_ALL or holds_exclusive(p[2], cpu, memory)]


class LeftOut(NamedTuple):
    pods: list[tuple[str, str]]
    """Bound pods (namespace, name) the fingerprint counts but the NRT does not account for."""
    matched: bool
    """The NRT matches some recent set of the node's pods (it is a few pods behind, not lost)."""


def left_out(attributes: Mapping[str, str], pods: Sequence[tuple[str, str, Pod]]) -> LeftOut | None:
    """What the NRT leaves out of the pods bound to its node; None when it has no fingerprint
    (nothing can be said)."""
    held = accounted(attributes, pods)
    if held is None:
        return None
    counted = [(ns, name) for ns, name, _ in counted_pods(attributes, pods)]
    return LeftOut([key for key in counted if key not in held] if held else counted, bool(held))
