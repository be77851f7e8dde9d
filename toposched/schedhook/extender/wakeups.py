"""The pods the filter refused, and which of them to wake now. Pure bookkeeping.

kube-scheduler tries a pod an extender refused again on any cluster event it watches, else only at
its 5-minute retry of unschedulable pods. Room often frees in the extender's view alone -- an NRT
that counts a pod gone, a reservation ended, a blind node seen again, DRA devices changed -- and
kube-scheduler watches none of those. So each pod whose latest filter left it no node is kept here
(by uid) and, once room may have freed after that filter looked at the cluster, handed out to be
woken (``requeue`` patches it: an update kube-scheduler does watch).

A pod is woken once per freeing at most, the next time only after its own wait, which doubles with
each wake up to ``LONGEST`` (a pod that keeps being refused is not woken at every NRT update); all
wakes share a budget of ``RATE`` a second, oldest refusal first, so a backlog never floods the
apiserver. A pod is forgotten once bound, gone, or filtered again with a node that fits.

What a process refused dies with it. A replica that starts acting (a new process, a standby whose
scheduler took the Lease) adopts the pods kube-scheduler holds as refused by the extender
(``refused_earlier``, from the pods' own PodScheduled condition): room may have freed while no one
watched, so each is woken once, then kept like any other.
"""

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toposched.schedhook.placement.evaluate import Results

FIRST = 1.0
"""Seconds a woken pod waits before it may be woken again; doubled at each wake."""
LONGEST = 30.0
"""The longest such wait."""
RATE = 20.0
"""Wakes (patches) a second, all pods together; also the most at once."""
KEEP = 10_000
"""Refused pods kept at most (the oldest refusals are forgotten first)."""
REASON_PREFIX = "toposched: "
"""How the extender's reasons for refusing a node start; kube-scheduler quotes them in the pod's
PodScheduled condition."""


@dataclass
class Refused:
    namespace: str
    name: str
    at: float
    """When its latest refusing filter looked at the cluster (monotonic)."""
    woken: float = -math.inf
    """When it was last woken (monotonic)."""
    wait: float = 0.0
    """Seconds from ``woken`` before it may be woken again."""


def refused_pod(pod: Mapping[str, Any], results: Results) -> tuple[str, str] | None:
    """(namespace, name) of a pod this filter left without a node for the extender's own reasons
    (NUMA room or alignment, blind nodes, DRA devices); None when a node fits, or when nothing of
    the nodes could change that (the pod itself cannot be read)."""
    if results.pod_error is not None or not results.names or results.fitting() or results.meta is None:
        return None
    name = (pod.get("metadata") or {}).get("name")
    return (results.meta.namespace, name) if isinstance(name, str) and name else None


def refused_earlier(pod: Mapping[str, Any]) -> tuple[str, tuple[str, str]] | None:
    """(uid, (namespace, name)) of an unbound pod kube-scheduler holds as unschedulable because the
    extender refused it (its PodScheduled condition quotes the extender's reasons); else None."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if spec.get("nodeName") or meta.get("deletionTimestamp"):
        return None
    uid, namespace, name = meta.get("uid"), meta.get("namespace"), meta.get("name")
    if not (isinstance(uid, str) and isinstance(namespace, str) and isinstance(name, str) and uid and name):
        return None
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if not isinstance(condition, dict) or condition.get("type") != "PodScheduled":
            continue
        unschedulable = condition.get("status") == "False" and condition.get("reason") == "Unschedulable"
        if unschedulable and REASON_PREFIX in str(condition.get("message") or ""):
            return uid, (namespace, name)
    return None


@dataclass
class Wakeups:
    first: float = FIRST
    longest: float = LONGEST
    rate: float = RATE
    keep: int = KEEP
    now: Callable[[], float] = time.monotonic
    _pods: dict[str, Refused] = field(default_factory=dict, init=False)
    """By uid, oldest refusal first."""
    _freed_at: float = field(default=-math.inf, init=False)
    _pending: bool = field(default=False, init=False)
    """Some pod may be due: room freed since a pod was last looked at and it was held back."""
    _tokens: float = field(default=0.0, init=False)
    _filled: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._tokens, self._filled = self.rate, self.now()

    def filtered(self, uid: str, refused: tuple[str, str] | None, at: float) -> None:
        """The pod's latest filter, which looked at the cluster at ``at``: it left the pod no node
        (``refused``: its namespace and name) or it did not (None: forget it)."""
        if refused is None or not uid:
            self.forget(uid)
            return
        entry = self._pods.pop(uid, None) or Refused(*refused, at)
        entry.at = at  # its wait stays: a pod refused again after a wake backs off
        self._pods[uid] = entry
        if at < self._freed_at:  # room freed while this filter was under way
            self._pending = True
        self._trim()

    def adopt(self, pods: Iterable[tuple[str, tuple[str, str]]]) -> int:
        """Pods refused before this replica acted (``refused_earlier``), at a time unknown: each is due
        at the next ``due``, ahead of the pods this replica refused itself. How many were new."""
        adopted = {uid: Refused(*refused, at=-math.inf) for uid, refused in pods if uid and uid not in self._pods}
        if adopted:
            self._pods = adopted | self._pods
            self._trim()
            self.freed()
        return len(adopted)

    def _trim(self) -> None:
        while len(self._pods) > self.keep:
            del self._pods[next(iter(self._pods))]

    def forget(self, uid: str) -> None:
        """Bound, gone, or placeable: nothing to wake."""
        self._pods.pop(uid, None)

    def freed(self) -> None:
        """Room may have freed now: the pods refused before may fit."""
        self._freed_at = self.now()
        self._pending = True

    def due(self, gone: Callable[[str, Refused], bool] = lambda uid, pod: False) -> list[tuple[str, Refused]]:
        """The pods to wake now, within the budget, marked woken; those ``gone`` says are (bound
        since, say) are forgotten instead."""
        now = self.now()
        self._tokens = min(self.rate, self._tokens + (now - self._filled) * self.rate)
        self._filled = now
        if not self._pending:
            return []
        out: list[tuple[str, Refused]] = []
        held_back = False
        for uid, pod in list(self._pods.items()):
            if pod.at >= self._freed_at or pod.woken >= self._freed_at:
                continue  # it saw the room as it is now, or was woken for it already
            if now - pod.woken < pod.wait or len(out) >= int(self._tokens):
                held_back = True
                continue
            if gone(uid, pod):
                del self._pods[uid]
                continue
            out.append((uid, pod))
        for _, pod in out:
            pod.woken = now
            pod.wait = min(self.longest, max(self.first, 2 * pod.wait))
        self._tokens -= len(out)
        self._pending = held_back
        return out

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: str) -> bool:
        return uid in self._pods
