"""What the extender knows of each node's NUMA zones, and where it is blind. Pure bookkeeping.

A node's knowledge is one of:

- **known**: its NRT is there and keeps up with the pods bound to the node;
- **stale**: its NRT has left out a pod bound to the node for longer than ``stale_after``
  (by the NRT's pods fingerprint: the exporter on that node is not keeping up), or at once when
  it went back -- it leaves out pods still running there that an earlier NRT counted (a restarted
  kubelet rebuilding its state: ``freshness.went_back``) -- until it counts them again;
- **missing**: it has no NRT, but one is expected -- the Node carries a Topology Manager policy
  label other than ``none`` (the exporter sets it from its kubelet; an operator may set it), or the
  node had an NRT less than ``grace`` seconds ago;
- **never NUMA-managed**: no NRT and none expected (a node without a Topology Manager policy).

Stale and missing nodes are *blind*: a pod that needs exclusive CPUs, pinned memory or devices
must not pass them, since nothing says what their kubelet will admit. The other pods, and nodes
never NUMA-managed, are judged as before. How many are blind is in a metric, and each Node that
turns blind is told to a callback (the extender posts an Event on it).
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import Gauge

from toposched.apis.constants import NRT_ATTR_PODS_FINGERPRINT, TOPOLOGY_MANAGER_POLICY_LABEL
from toposched.schedhook.extender.store import ObjectStore, attributes_of, key_name, store_key
from toposched.schedhook.placement.freshness import left_out, matched, went_back
from toposched.schedhook.placement.model import Pod

logger = logging.getLogger(__name__)
STALE, MISSING = "stale", "missing"
BLIND = Gauge(
    "toposched_extender_blind_nodes",
    "Nodes whose NUMA knowledge is missing (an NRT expected, none there) or stale (it leaves out bound pods).",
    ["state"],
)

OnNode = list[tuple[str, str, Pod]]
"""The pods bound to a node, oldest bind first: (namespace, name, requests); those gone lately first."""
Keys = set[tuple[str, str]]
"""Pods (namespace, name) leaving a node: being deleted, or gone lately."""
TurnedBlind = Callable[[dict[str, Any], str], None]
"""Told of a Node that turned blind: its body, and why."""


@dataclass(frozen=True)
class Blind:
    state: str
    """``stale`` or ``missing``."""
    since: float
    """Wall-clock time (seconds) the node has been so."""
    reason: str


def clock(at: float) -> str:
    """``12:01:03`` (UTC): when, as a filter's reason says it."""
    return time.strftime("%H:%M:%S", time.gmtime(at))


class Knowledge:
    def __init__(
        self,
        store: ObjectStore,
        grace: float = 600.0,
        stale_after: float = 30.0,
        now: Callable[[], float] = time.time,
        turned_blind: TurnedBlind = lambda node, why: None,
    ) -> None:
        self.store = store
        self.grace = grace
        self.stale_after = stale_after
        self.now = now
        self.turned_blind = turned_blind
        self._told: set[str] = set()
        """Nodes already told blind (told again only after they were not)."""
        self._changes = store.changes(("nodes", "nrts"))
        self._moved = store.pods.reader()
        self._had_nrt: dict[str, float] = {}
        """Node -> when its NRT was last seen (wall clock): while ``grace`` lasts, one is expected."""
        self._missing: dict[str, float] = {}
        """Node -> since when it has had no NRT, for nodes that had one or are labelled."""
        self._behind: dict[str, tuple[float, int]] = {}
        """Node -> (since when, how many) bound pods its NRT leaves out."""
        self._counted: dict[str, frozenset[tuple[str, str]]] = {}
        """Node -> the pods its NRT accounted for (while it went back, those it accounted for before)."""
        self._went_back: dict[str, tuple[float, int]] = {}
        """Node -> (since when, how many) running pods its NRT no longer counts."""

    def blind_nodes(self) -> dict[str, str]:
        """The blind nodes now, with why: in the metric, and each that turned blind since the last
        call logged and told to ``turned_blind``."""
        blind = self.blind()
        for state in (MISSING, STALE):
            BLIND.labels(state).set(sum(1 for b in blind.values() if b.state == state))
        for name in blind.keys() - self._told:
            logger.warning("blind to node %s: %s", name, blind[name].reason)
            node = self.store.node(name)
            if node is not None:
                self.turned_blind(node, blind[name].reason)
        self._told = set(blind)
        return {name: b.reason for name, b in blind.items()}

    def blind(self) -> dict[str, Blind]:
        """The blind nodes now, by name, with why."""
        self._follow()
        now = self.now()
        out: dict[str, Blind] = {}
        for name, since in list(self._missing.items()):
            if not self._expected(name, now):
                del self._missing[name]
                continue
            why = (
                f"NRT of {name} missing since {clock(since)}; the exporter on that node is not publishing "
                "(a NUMA-managed node: the pod would be admitted or rejected blindly)"
            )
            out[name] = Blind(MISSING, since, why)
        for name, (since, count) in self._went_back.items():
            if name not in out:
                why = (
                    f"NRT of {name} went back at {clock(since)}: it no longer counts {count} pod(s) still running "
                    "there (its kubelet restarting? its state is rebuilt from its checkpoint)"
                )
                out[name] = Blind(STALE, since, why)
        for name, (since, count) in self._behind.items():
            if now - since > self.stale_after and name not in out:
                why = (
                    f"NRT of {name} is stale: {count} pod(s) bound since {clock(since)} are not in it; the exporter "
                    "on that node is not keeping up"
                )
                out[name] = Blind(STALE, since, why)
        return out

    def _expected(self, name: str, now: float) -> bool:
        node = self.store.node(name)
        if node is None:
            return False  # no Node: no pod is placed there anyway
        labels = (node.get("metadata") or {}).get("labels") or {}
        policy = labels.get(TOPOLOGY_MANAGER_POLICY_LABEL)
        if policy is not None:
            return str(policy) != "none"
        seen = self._had_nrt.get(name)
        return seen is not None and now - seen < self.grace

    def _follow(self) -> None:
        """Bring the per-node records up to date with what changed in the store."""
        changed = self._changes.take()
        names: set[str] = set()
        for kind in ("nodes", "nrts"):
            keys = changed[kind]
            names |= {key_name(k) for k in (self.store.objects[kind] if keys is None else keys)}
        moved = self.store.pods.take_moved(self._moved)
        names |= set(self.store.pods.on) if moved is None else moved
        now = self.now()
        for name in names:
            self._look(name, now, self.store.nrt(name))

    def _look(self, name: str, now: float, nrt: dict[str, Any] | None) -> None:
        if nrt is not None:
            self._had_nrt[name] = now
            self._missing.pop(name, None)
            attributes = attributes_of(nrt)
            bound, leaving = self.store.pods.leaving_on(name)
            self._went_back_of(name, attributes, bound, leaving, now)
            self._behind_of(name, attributes, bound, leaving, now)
            return
        self._behind.pop(name, None)
        if name not in self._missing and self._expected(name, now):
            self._missing[name] = now

    def _went_back_of(self, name: str, attributes: dict[str, str], bound: OnNode, leaving: Keys, now: float) -> None:
        """Whether the NRT left out running pods an earlier one counted (``went_back``). What it
        counts is judged only when its fingerprint is exactly of a recent set of the node's pods;
        otherwise the last judgement stands."""
        exact = matched(attributes, bound, terminating=leaving)
        if exact is None:
            if not attributes.get(NRT_ATTR_PODS_FINGERPRINT):  # none at all: nothing is known of its pods
                self._counted.pop(name, None)
                self._went_back.pop(name, None)
            return
        running = {(ns, pod) for ns, pod, _ in bound if (ns, pod) not in leaving}
        before = self._counted.get(name, frozenset())
        dropped = went_back(before, exact, running)
        if dropped:  # compare the next NRTs with all it counted before
            self._went_back[name] = (self._went_back.get(name, (now, 0))[0], len(dropped))
            self._counted[name] = before & running
        else:
            self._went_back.pop(name, None)
            self._counted[name] = exact

    def _behind_of(self, name: str, attributes: dict[str, str], bound: OnNode, leaving: Keys, now: float) -> None:
        """Since when the NRT has left out pods bound to the node, by its fingerprint: the newest
        few it is usually behind by, since they were bound; or, when it matches no recent set of
        the node's pods at all, since that was first seen."""
        missed = left_out(attributes, bound, leaving)
        if missed is None or not missed.pods:  # no fingerprint (nothing can be said), or none left out
            self._behind.pop(name, None)
            return
        if missed.matched:
            since = min(self.store.pods.bound_at.get(store_key(ns, pod), now) for ns, pod in missed.pods)
        else:
            since = self._behind.get(name, (now, 0))[0]
        self._behind[name] = (since, len(missed.pods))
