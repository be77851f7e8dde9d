"""The reservation ledger: requests of pods the extender bound, held on the NUMA zones the kubelet
is predicted to use until the node's NRT accounts for them.

NRTs lag behind binds; without the ledger a burst of pods would see the same stale ``available``
and pile onto one zone. A reservation ends when the NRT's pods fingerprint includes the pod (or,
on an NRT without one, when it was updated ``settle`` seconds after the bind), when the pod is
deleted or finishes, or after ``timeout``. The ledger is pure bookkeeping; the cache owns it and
tells it what the NRTs and pods say.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal


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


Accounts = Callable[[str, str], bool | None]
"""(node, pod key) -> does the node's NRT account for the pod by its fingerprint (None: it has none)."""


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
        """Nodes whose reservations changed since the cache last took them off the NRTs."""

    def reserve(self, reservation: Reservation) -> None:
        """Hold a bound pod's request (replacing an earlier one of the same pod)."""
        self.release(reservation.pod)
        self.by_pod[reservation.pod] = reservation
        self.by_node.setdefault(reservation.node, {})[reservation.pod] = reservation
        self.check_again(reservation.node)
        self._stale.add(reservation.node)

    def release(self, pod_uid: str) -> None:
        r = self.by_pod.pop(pod_uid, None)
        if r is not None:
            self._stale.add(r.node)
            held = self.by_node[r.node]
            del held[pod_uid]
            if not held:
                del self.by_node[r.node]

    def check_again(self, node: str) -> None:
        """The node's NRT or pods changed: look at its reservations at the next ``live``."""
        if self._recheck is not None and node in self.by_node:
            self._recheck.add(node)

    def check_all(self) -> None:
        self._recheck = None

    def touch(self, node: str) -> None:
        """Have the node's view rebuilt at the next ``take_stale`` (e.g. one call left a pod out)."""
        self._stale.add(node)

    def take_stale(self) -> set[str]:
        stale, self._stale = self._stale, set()
        return stale

    def live(self, accounts: Accounts, updated_at: Callable[[str], float]) -> list[Reservation]:
        """Drop reservations the NRT now accounts for: by the pods fingerprint when the NRT has one,
        else by an update received ``settle`` seconds after the bind; or after the timeout. Only
        nodes whose NRT or pods changed since the last call are looked at again."""
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
                matched = accounts(r.node, r.key)
                if matched is None:
                    matched = updated_at(r.node) >= r.since + self.settle
                if matched:
                    self.release(uid)
        return list(self.by_pod.values())
