"""The cluster as the next placement call sees it. Pure bookkeeping over the object store.

A snapshot holds the store's objects with the live reservations taken off the NRTs (the ledger is
settled first: reservations of pods ended, accounted for by their NRT or timed out are dropped)
and the CPUs of pods ended that an NRT still counts given back (``credits``),
the blind nodes, and the pods placed -- the watch's, plus the AppGroup members being bound that the
watch does not show yet (so the next member is placed near them).
"""

import time
from typing import Any

from toposched.apis.constants import WEIGHT_NETPERF
from toposched.schedhook.extender.credits import Credits
from toposched.schedhook.extender.inflight import InFlight
from toposched.schedhook.extender.knowledge import Knowledge
from toposched.schedhook.extender.reservations import Accounting, Ledger, Reservation
from toposched.schedhook.extender.snapshots import SnapshotBuilder
from toposched.schedhook.extender.store import ObjectStore, key_name, store_key
from toposched.schedhook.placement.model import Placed
from toposched.schedhook.placement.snapshot import Snapshot

BINDING_SECONDS = 30.0
"""How long a pod being bound counts as placed without the watch showing it so."""


class ClusterView:
    def __init__(
        self,
        store: ObjectStore,
        knowledge: Knowledge | None = None,
        weights_name: str = WEIGHT_NETPERF,
        reservation_timeout: float = 60.0,
    ) -> None:
        self.store = store
        self.knowledge = knowledge or Knowledge(store)
        self.snapshots = SnapshotBuilder(store, weights_name)
        self.ledger = Ledger(reservation_timeout)
        self.accounting = Accounting(store)
        self.in_flight = InFlight(store, self.ledger, self.accounting)
        self.credits = Credits(store, self.accounting)
        self._nrt_changes = store.changes(("nrts",))
        self._moved = store.pods.reader()
        self.being_bound: dict[str, tuple[Placed, float]] = {}
        """AppGroup members being bound (store key -> where, since when) until the watch shows them."""

    def snapshot(self, exclude: str = "") -> Snapshot:
        """The cluster with the live reservations taken off the NRTs (except pod ``exclude``'s, for
        this call only: the next one puts it back)."""
        self.settle()
        stale = self.ledger.take_stale()
        mine = self.ledger.by_pod.get(exclude) if exclude else None
        if mine is not None:
            stale.add(mine.node)
            self.ledger.touch(mine.node)
        stale |= self.credits.changed()
        snap = self.snapshots.snapshot(
            lambda node: self.credits.of(node) + self.ledger.held(node, exclude),
            [*self.ledger.by_node, *self.credits.nodes()],
            stale,
            [*self.store.pods.placed.values(), *self._in_flight()],
        )
        snap.blind = self.knowledge.blind_nodes()
        return snap

    def settle(self) -> list[Reservation]:
        """The reservations still held, after ending those of pods deleted or finished, those the
        NRTs now account for and those timed out, and holding the binds in flight it did not make."""
        self.ledger.release_pods(self.store.pods.take_ended())
        self.in_flight.hold()
        self.ledger.check_again(self.store.pods.take_moved(self._moved))
        nrts = self._nrt_changes.take()["nrts"]
        self.ledger.check_again(None if nrts is None else [key_name(key) for key in nrts])
        return self.ledger.live(self.accounting, lambda node: self.store.nrt_updated.get(node, 0.0))

    def take_rejected(self) -> list[tuple[dict[str, Any], str]]:
        """Nodes and NRTs found unreadable since the last call, with why (each version once)."""
        return self.snapshots.take_rejected()

    def binding(self, name: str, member: Placed) -> None:
        """The AppGroup member ``name`` is being bound where ``member`` says: placed from now on."""
        self.being_bound[store_key(member.namespace, name)] = (member, time.monotonic())

    def not_bound(self, namespace: str, name: str) -> None:
        """Its Binding was refused: it is placed nowhere."""
        self.being_bound.pop(store_key(namespace, name), None)

    def _in_flight(self) -> list[Placed]:
        now = time.monotonic()
        placed = self.store.pods.placed
        for key, (_, since) in list(self.being_bound.items()):
            if key in placed or now - since > BINDING_SECONDS:  # the watch shows it, or it was lost
                del self.being_bound[key]
        return [p for p, _ in self.being_bound.values()]
