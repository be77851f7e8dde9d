"""Binds in flight, rebuilt from the cluster rather than from memory. Pure bookkeeping over the store.

A pod bound with predicted NUMA zones carries them in its annotation. Until its node's NRT
accounts for it (by the pods fingerprint), the NRT shows those zones free: the extender that bound
it holds them in its ledger, but an extender that did not -- a standby that took over, one started
again, one whose reservation timed out or whose NRT went back -- would give them away. So every
such pod the ledger does not hold is held again, from its annotation and its requests, until its
NRT accounts for it or it ends (the ledger's own rules). A pod being deleted is not held again.

Only nodes whose NRT or pods changed are looked at again (all of them after a list).
"""

from collections.abc import Iterable

from toposched.schedhook.extender.reservations import Accounts, Ledger, Reservation, request_of
from toposched.schedhook.extender.store import ObjectStore, attributes_of, key_name
from toposched.schedhook.placement.freshness import counted_pods


class InFlight:
    def __init__(self, store: ObjectStore, ledger: Ledger, accounting: Accounts) -> None:
        self.store = store
        self.ledger = ledger
        self.accounting = accounting
        self._nrts = store.changes(("nrts",))
        self._moved = store.pods.reader()

    def hold(self) -> list[Reservation]:
        """Hold the unaccounted binds of the nodes changed since the last call; what was held anew."""
        nrts = self._nrts.take()["nrts"]
        moved = self.store.pods.take_moved(self._moved)
        if nrts is None or moved is None:
            nodes: Iterable[str] = list(self.store.pods.on)
        else:
            nodes = moved | {key_name(key) for key in nrts}
        held = []
        for node in nodes:
            for reservation in self._unheld(node):
                self.ledger.reserve(reservation)
                held.append(reservation)
        return held

    def _unheld(self, node: str) -> list[Reservation]:
        """The node's pods bound with zones that its NRT leaves out and the ledger does not hold."""
        nrt = self.store.nrt(node)
        on_node = self.store.pods.on.get(node, {})
        if nrt is None or not on_node:
            return []
        counted = {(ns, name) for ns, name, _ in counted_pods(attributes_of(nrt), list(on_node.values()))}
        out = []
        for key, (namespace, name, pod) in on_node.items():
            placed = self.store.pods.placed.get(key)
            body = self.store.objects["pods"].get(key) or {}
            uid = str((body.get("metadata") or {}).get("uid") or "")
            if placed is None or not placed.numa or not uid or uid in self.ledger.by_pod:
                continue
            # Being deleted and left out of the NRT: its kubelet let go of it (or never admitted it,
            # as it does not once termination is asked). Held again, a zone its kubelet gives the
            # next pod would look full, until the pod object is gone (seconds).
            if key in self.store.pods.terminating:
                continue
            # Only when the NRT is exactly of a set of the node's pods without it: with no
            # fingerprint, or one of no such set (a pod gone that the NRT still counts, say), a bind
            # in flight cannot be told from one long accounted, and holding every pod of the node
            # again would make it look full.
            if (namespace, name) in counted and self.accounting.left_out(node, key):
                out.append(Reservation(uid, node, placed.numa, request_of(pod), key=key, rebuilt=True))
        return out
