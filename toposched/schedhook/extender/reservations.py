"""The reservation ledger: requests of pods the extender bound, held on the NUMA zones the kubelet
is predicted to use until the node's NRT accounts for them.

NRTs lag behind binds; without the ledger a burst of pods would see the same stale ``available``
and pile onto one zone. A reservation ends when the NRT's pods fingerprint includes the pod (or,
on an NRT without one, when it was updated ``settle`` seconds after the bind), when the pod is
deleted or finishes, or after ``timeout``. The ledger is bookkeeping; ``Accounting`` reads what
the NRTs and the bound pods say.
"""

import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol

from toposched.apis.constants import NRT_ATTR_PODS_FINGERPRINT
from toposched.schedhook.extender.store import ObjectStore, attributes_of
from toposched.schedhook.placement.freshness import matched
from toposched.schedhook.placement.model import Pod


@dataclass
class Reservation:
    pod: str
    """The pod's uid."""
    node: str
    numa: tuple[int, ...]
    request: dict[str, Decimal]
    since: float = field(default_factory=time.monotonic)
    key: str = ""
    """namespace/name, to find the pod among the node's pods."""
    rebuilt: bool = False
    """Held from a bound pod's annotation (``inflight``), not by a bind of this process."""


def request_of(pod: Pod) -> dict[str, Decimal]:
    """What a bind of the pod holds on its zones: the sum of its app containers' requests (what
    the NRT will show taken)."""
    request: dict[str, Decimal] = {}
    for c in pod.containers:
        for r, q in c.request.items():
            request[r] = request.get(r, Decimal(0)) + q
    return request


class Accounts(Protocol):
    def accounts(self, node: str, key: str) -> bool | None:
        """Does the node's NRT account for pod ``key`` (None: it cannot say)?"""

    def left_out(self, node: str, key: str) -> bool:
        """Is the node's NRT exactly of a set of its pods without pod ``key``?"""


class Accounting:
    """Does a node's NRT account for a bound pod? By its pods fingerprint, worked out once per NRT
    version and set of the node's pods."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._matched: dict[str, tuple[Hashable, frozenset[tuple[str, str]] | None]] = {}
        """Node -> (NRT version, pods version and leaving pods; the pods its fingerprint is exactly
        of: None when it is of no set of them)."""

    def accounts(self, node: str, key: str) -> bool | None:
        """Whether the node's NRT accounts for pod ``key`` by its fingerprint; None: it has none.
        False when it is of no set of the node's pods: the pod's own reservation stays."""
        has, exact = self._exact(node)
        if not has:
            return None
        return exact is not None and self._named(node, key) in exact

    def left_out(self, node: str, key: str) -> bool:
        """True when the fingerprint is exactly of a set of the node's pods that leaves pod ``key``
        out; False when it names the pod, or is of no set (a pod gone, the NRT behind: nothing can
        be said of any pod then), or there is none."""
        exact = self._exact(node)[1]
        named = self._named(node, key)
        return exact is not None and named is not None and named not in exact

    def counted(self, node: str) -> frozenset[tuple[str, str]] | None:
        """The pods (namespace, name) the node's NRT is exactly of (gone ones too); None when it
        has no fingerprint or is of no set of them."""
        return self._exact(node)[1]

    def said(self, node: str) -> str:
        """What the fingerprint says of the node's pods, for the debug log."""
        has, exact = self._exact(node)
        if not has:
            return "no fingerprint"
        return "fingerprint of no set of its pods" if exact is None else "fingerprint of the pods marked *"

    def _named(self, node: str, key: str) -> tuple[str, str] | None:
        entry = self.store.pods.on.get(node, {}).get(key)  # absent: the watch has not shown the bind yet
        return None if entry is None else (entry[0], entry[1])

    def _exact(self, node: str) -> tuple[bool, frozenset[tuple[str, str]] | None]:
        """Whether the node's NRT has a fingerprint, and the pods it is exactly of (None: no set)."""
        body = self.store.nrt(node)
        if body is None or not attributes_of(body).get(NRT_ATTR_PODS_FINGERPRINT):
            return False, None
        pods, leaving = self.store.pods.leaving_on(node)  # bind order
        state = (body["metadata"].get("resourceVersion"), self.store.pods.version.get(node, 0), frozenset(leaving))
        cached = self._matched.get(node)
        if cached is None or cached[0] != state:
            cached = (state, matched(attributes_of(body), pods, terminating=leaving))
            self._matched[node] = cached
        return True, cached[1]


class Ledger:
    def __init__(self, timeout: float = 60.0, settle: float = 1.0) -> None:
        self.timeout = timeout
        self.settle = settle
        """Without a fingerprint on the NRT: an update received this long after a bind releases it."""
        self.by_pod: dict[str, Reservation] = {}
        """By pod uid, oldest first."""
        self.by_node: dict[str, dict[str, Reservation]] = {}
        self._recheck: set[str] | None = None
        """Nodes whose NRT or pods changed since their reservations were last checked (None: all)."""
        self._stale: set[str] = set()
        """Nodes whose reservations changed since the snapshot builder last took them off the NRTs."""
        self.released = 0
        """Reservations ended so far (released, timed out, accounted for): room may have freed."""

    def reserve(self, reservation: Reservation) -> None:
        """Hold a bound pod's request (replacing an earlier one of the same pod)."""
        self.release(reservation.pod)
        self.by_pod[reservation.pod] = reservation
        self.by_node.setdefault(reservation.node, {})[reservation.pod] = reservation
        self.check_again([reservation.node])
        self._stale.add(reservation.node)

    def release(self, pod_uid: str) -> None:
        r = self.by_pod.pop(pod_uid, None)
        if r is not None:
            self.released += 1
            self._stale.add(r.node)
            held = self.by_node[r.node]
            del held[pod_uid]
            if not held:
                del self.by_node[r.node]

    def release_pods(self, keys: Iterable[str]) -> None:
        """The pods ``keys`` (namespace/name) were deleted or finished: they hold nothing."""
        ended = set(keys)
        if ended:
            for uid in [uid for uid, r in self.by_pod.items() if r.key in ended]:
                self.release(uid)

    def check_again(self, nodes: Iterable[str] | None) -> None:
        """The NRTs or pods of ``nodes`` changed (None: of any node): look at their reservations
        again at the next ``live``."""
        if nodes is None:
            self._recheck = None
        elif self._recheck is not None:
            self._recheck.update(n for n in nodes if n in self.by_node)

    def touch(self, node: str) -> None:
        """Have the node's view rebuilt at the next ``take_stale`` (e.g. one call left a pod out)."""
        self._stale.add(node)

    def take_stale(self) -> set[str]:
        stale, self._stale = self._stale, set()
        return stale

    def held(self, node: str, exclude: str = "") -> tuple[Reservation, ...]:
        """The reservations on ``node``, but pod ``exclude``'s."""
        return tuple(r for r in self.by_node.get(node, {}).values() if r.pod != exclude)

    def live(self, accounting: Accounts, updated_at: Callable[[str], float]) -> list[Reservation]:
        """Drop reservations the NRT now accounts for: by the pods fingerprint when the NRT has one,
        else by an update received ``settle`` seconds after the bind; or after the timeout. A
        node's reservations are looked at again only once its NRT or its pods changed."""
        now = time.monotonic()
        expired = []
        for uid, r in self.by_pod.items():  # oldest first
            if now - r.since < self.timeout:
                break
            expired.append(uid)
        for uid in expired:
            self.release(uid)
        nodes = list(self.by_node) if self._recheck is None else [n for n in self._recheck if n in self.by_node]
        self._recheck = set()
        for node in nodes:
            for uid, r in list(self.by_node[node].items()):
                matched = accounting.accounts(r.node, r.key)
                if matched is None:
                    matched = updated_at(r.node) >= r.since + self.settle
                if matched:
                    self.release(uid)
        return list(self.by_pod.values())
