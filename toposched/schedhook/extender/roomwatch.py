"""Whether room may have freed in the extender's view since the last look. Pure bookkeeping over
the cluster view.

What frees room for a pod the filter refused, and that kube-scheduler does not see: an NRT added
or changed (it counts a pod gone, its exporter caught up), a bound pod ended (the NRT and the
ledger still count it until they catch up), a reservation ended (released, accounted for or timed
out), a blind node seen again, and DRA's slices, classes and claims. Each is a cheap test; none
says the room is there, only that the filter may answer otherwise now.
"""

from toposched.schedhook.extender.clusterview import ClusterView
from toposched.schedhook.extender.store import DRA_KINDS

NRT, ENDED, RESERVATION, SEEN_AGAIN, DRA = "nrt", "pod-ended", "reservation", "seen-again", "dra"
"""What freed room, as ``freed`` names it."""


class RoomWatch:
    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self._changes = view.store.changes(("nrts", "pods", *DRA_KINDS))
        self._released = view.ledger.released
        self._blind: set[str] = set()

    def freed(self) -> list[str]:
        """What may have freed room since the last call (empty: nothing). Settles the ledger first,
        so reservations time out even while no filter call comes."""
        changed = self._changes.take()
        placed = self.view.store.pods.placed
        pods = changed["pods"]
        why = []
        if changed["nrts"] is None or changed["nrts"]:
            why.append(NRT)
        if pods is None or any(key not in placed for key in pods):  # the store holds bound pods only
            why.append(ENDED)
        if any(changed[kind] is None or changed[kind] for kind in DRA_KINDS):
            why.append(DRA)
        self.view.settle()
        if self.view.ledger.released != self._released:
            self._released = self.view.ledger.released
            why.append(RESERVATION)
        blind = set(self.view.knowledge.blind())
        if self._blind - blind:
            why.append(SEEN_AGAIN)
        self._blind = blind
        return why
