"""CPUs of pods ended that their node's NRT still counts, given back. Pure bookkeeping over the store.

The kubelet gives the CPUs of a pod it has let go of to the next pod it admits, at once; the NRT
counts them until its exporter has seen the pod go and written again (a few tenths of a second,
more on a busy node). A placement in that moment sees the zone fuller than the kubelet does, and
predicts the other zone, or refuses the node. When a pod has ended (its terminal status or its
deletion is seen: the kubelet had let go of it before it sent either) and the NRT's fingerprint
is exactly of a set that still includes it, its pinned CPUs (the NRT's ``toposched.io/pod-cpus``,
by zone) are given back on those zones. Nothing is given back without that attribute or without
an exact match: the NRT may already have let the pod go.
"""

import logging
from decimal import Decimal

from toposched.apis.constants import NRT_ATTR_POD_CPUS
from toposched.apis.podcpus import parse_pod_cpus
from toposched.schedhook.extender.reservations import Accounting, Reservation
from toposched.schedhook.extender.store import ObjectStore, attributes_of, key_name

logger = logging.getLogger(__name__)
CPU = "cpu"


class Credits:
    def __init__(self, store: ObjectStore, accounting: Accounting) -> None:
        self.store = store
        self.accounting = accounting
        self._given: dict[str, tuple[Reservation, ...]] = {}
        """Node -> what is given back there now (negative requests, one zone each)."""
        self._unreadable: dict[str, str | None] = {}
        """Node -> the NRT version whose attribute could not be read (said once)."""
        self._nrts = store.changes(("nrts",))
        self._moved = store.pods.reader()

    def of(self, node: str) -> tuple[Reservation, ...]:
        return self._given.get(node, ())

    def nodes(self) -> list[str]:
        """The nodes given something back now."""
        return list(self._given)

    def changed(self) -> set[str]:
        """Work out again what is given back on the nodes whose NRT or pods changed (and on those
        given something, whose pods gone lately age out); the nodes where that changed."""
        nrts = self._nrts.take()["nrts"]
        moved = self.store.pods.take_moved(self._moved)
        if nrts is None or moved is None:
            nodes = set(self.store.pods.on) | set(self.store.pods.gone) | set(self._given)
        else:
            nodes = moved | {key_name(key) for key in nrts} | set(self._given)
        out = set()
        for node in nodes:
            given = self._work_out(node)
            if given != self._given.get(node, ()):
                out.add(node)
                if given:
                    self._given[node] = given
                else:
                    self._given.pop(node, None)
        return out

    def _work_out(self, node: str) -> tuple[Reservation, ...]:
        body = self.store.nrt(node)
        if body is None:
            return ()
        text = attributes_of(body).get(NRT_ATTR_POD_CPUS)
        if not text:
            return ()
        ended = {(ns, name) for ns, name, _ in self.store.pods.gone_lately(node)}
        counted = self.accounting.counted(node) if ended else None  # the fingerprint's match only when needed
        gone = ended & counted if counted else set()
        if not gone:
            return ()
        try:
            cpus = parse_pod_cpus(text)
        except ValueError as exc:  # the NRT's figures stand; said once per version of it
            version = body["metadata"].get("resourceVersion")
            if self._unreadable.get(node) != version:
                self._unreadable[node] = version
                logger.warning("NRT %s: %s; the CPUs of its pods ended are not given back early", node, exc)
            return ()
        return tuple(
            Reservation(f"ended:{ns}/{name}", node, (zone,), {CPU: -Decimal(count)}, key=f"{ns}/{name}")
            for ns, name in sorted(gone)
            for zone, count in sorted(cpus.get((ns, name), {}).items())
        )
