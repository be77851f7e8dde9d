"""Does a node's NRT already account for the pods bound to it? Pure.

The exporter publishes ``nodeTopologyPodsFingerprint``: the pfp0v001 fingerprint of the pods the
kubelet reported (all of them, or only those holding exclusive resources, as
``nodeTopologyPodsFingerprintMethod`` says). When the fingerprint of the pods the extender
knows on the node (or of all but the newest few: an NRT is usually a little behind) is the same,
the NRT's ``available`` already has their requests taken off, and the reservations of those pods
can go, while the newer ones stay.

A pod leaving its node is in the set or not. One being deleted: its kubelet lets go of it
(PodResources stops listing it) once its containers have stopped, a moment to seconds before the
pod object is gone. One gone in the last seconds: its NRT, written at most once a second after a
second look, may count it still. So the pods given as leaving (``terminating``: those being
deleted, and those gone lately, given among ``pods``) may each be in the set or not; otherwise no
set would match in those moments, and the reservations of pods the NRT already counts would be
counted again.
"""

from collections.abc import Collection, Iterator, Mapping, Sequence
from itertools import combinations
from typing import NamedTuple

from toposched.apis.constants import (
    NRT_ATTR_CPU_MANAGER_POLICY,
    NRT_ATTR_MEMORY_MANAGER_POLICY,
    NRT_ATTR_PODS_FINGERPRINT,
    NRT_ATTR_PODS_FINGERPRINT_METHOD,
)
from toposched.apis.fingerprint import METHOD_ALL, of_hashes, pod_hash
from toposched.schedhook.placement.kubelet.claims import holds_exclusive
from toposched.schedhook.placement.model import Pod

TERMINATING_TRIED = 6
"""Leaving pods of a node (being deleted, or gone lately) whose leaving out is tried (every subset
of them: 64 at most); the first in the order given (the pods gone lately come first)."""

Key = tuple[str, str]
"""A pod's namespace and name."""


def accounted(
    attributes: Mapping[str, str],
    pods: Sequence[tuple[str, str, Pod]],
    lag: int = 8,
    terminating: Collection[Key] = (),
) -> frozenset[Key] | None:
    """The pods (namespace, name) the NRT accounts for; None when it has no fingerprint.

    ``pods`` are the pods bound to the node, oldest bind first. An NRT is usually a little
    behind: it matches the pods without the newest few. Up to ``lag`` newest are tried before
    giving up (an empty set: nothing can be said). Any of the pods being deleted
    (``terminating``) may be left out too."""
    if not attributes.get(NRT_ATTR_PODS_FINGERPRINT):
        return None
    return matched(attributes, pods, lag, terminating) or frozenset()


def matched(
    attributes: Mapping[str, str],
    pods: Sequence[tuple[str, str, Pod]],
    lag: int = 8,
    terminating: Collection[Key] = (),
) -> frozenset[Key] | None:
    """The pods the NRT's fingerprint is exactly of (the node's pods without the newest few, up to
    ``lag``, and without any of the ``terminating`` ones); None when it has none or it is of no
    such set (nothing can be said)."""
    published = attributes.get(NRT_ATTR_PODS_FINGERPRINT)
    if not published:
        return None
    counted = [(ns, name) for ns, name, _ in counted_pods(attributes, pods)]
    hashes = {key: pod_hash(*key) for key in counted}
    for kept in _without_terminating(counted, terminating):
        for newest in range(min(lag, len(kept)) + 1):
            prefix = kept[: len(kept) - newest]
            if of_hashes(hashes[key] for key in prefix) == published:
                return frozenset(prefix)
    return None


def _without_terminating(counted: list[Key], terminating: Collection[Key]) -> Iterator[list[Key]]:
    """``counted``, then without each subset of its terminating pods (the oldest few), fewest left out first."""
    leaving = [key for key in counted if key in terminating][:TERMINATING_TRIED]
    for size in range(len(leaving) + 1):
        for left in combinations(leaving, size):
            yield [key for key in counted if key not in left]


def went_back(before: frozenset[Key], now: frozenset[Key], running: Collection[Key]) -> frozenset[Key]:
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
    pods: list[Key]
    """Bound pods (namespace, name) the fingerprint counts but the NRT does not account for."""
    matched: bool
    """The NRT matches some recent set of the node's pods (it is a few pods behind, not lost)."""


def left_out(
    attributes: Mapping[str, str], pods: Sequence[tuple[str, str, Pod]], terminating: Collection[Key] = ()
) -> LeftOut | None:
    """What the NRT leaves out of the pods bound to its node; None when it has no fingerprint
    (nothing can be said). A leaving pod (``terminating``: being deleted, or gone lately) it leaves
    out is let go, not left out; when it is of no set, those are not counted as left out either.
    An NRT exactly of no pod at all is a match (its node's pods all newer), not a mismatch."""
    if not attributes.get(NRT_ATTR_PODS_FINGERPRINT):
        return None
    exact = matched(attributes, pods, terminating=terminating)
    counted = [(ns, name) for ns, name, _ in counted_pods(attributes, pods)]
    missed = [key for key in counted if key not in terminating and (exact is None or key not in exact)]
    return LeftOut(missed, exact is not None)
