"""When a restarted kubelet still holds what pods it no longer runs hold. Pure bookkeeping.

The kubelet drops the CPUs, pinned memory and devices of pods it no longer runs (deleted pods
whose checkpoint entries are left) when it computes the next pod's hints -- but only once all its
pod sources are ready, which a started kubelet is only after it has handled its first batch of
pods from the apiserver. Every pod of that batch is admitted against the checkpoints as restored,
stale entries included: a pod bound while the kubelet was down, or in the second after it came
back, can find its CPUs held by a pod deleted shortly before the restart and be rejected with a
TopologyAffinityError. Outside that batch the exporter counts stale entries free, as the kubelet's
next admission will (counting them held then would be wrong the other way: the kubelet would put
the next pod on a zone the scheduler side thinks full).

So stale entries count as held while PodResources does not answer, and for ``hold`` seconds from
the start of the kubelet that answers (its PodResources socket's creation: the kubelet makes a new
one at each start), in which its first batch comes: it lists its pods at once. The hold ends
earlier once that kubelet's checkpoints hold no stale entry (its CPU Manager drops them within its
reconcile period of the first batch, any manager at the next admission).
"""

from dataclasses import dataclass

HOLD = 10.0
"""Seconds from a kubelet's start during which stale entries count as held at most."""

SocketId = tuple[int, int] | None
"""The PodResources socket's inode and change time in ns (None: not there)."""


@dataclass
class RestartHold:
    hold: float = HOLD
    away: bool = False
    """PodResources has not answered since it last failed."""
    socket: SocketId = None
    """The socket PodResources last answered on."""
    started: float | None = None
    """When the kubelet answering on it started (wall clock); None: none answered yet."""
    settled: bool = False
    """The kubelet answering was seen holding nothing stale: no hold for it any more."""

    def down(self) -> bool:
        """PodResources is unreachable: hold. True when that is new."""
        began, self.away = not self.away, True
        return began

    def answered(self, now: float, socket: SocketId) -> bool:
        """PodResources answered, on ``socket``, at ``now`` (wall clock). True when that is another
        socket than the last answer's: a kubelet restarted since."""
        restarted = self.started is not None and socket != self.socket
        self.away = False
        if restarted or self.started is None:
            self.socket, self.settled = socket, False
            self.started = socket[1] / 1e9 if socket is not None else now
        return restarted

    def holding(self, now: float) -> bool:
        """Stale entries count as held now (wall clock)."""
        if self.away or self.started is None:
            return True
        return not self.settled and now - self.started < self.hold

    def dropped(self) -> None:
        """The checkpoints hold no stale entry while PodResources answers: no hold for this kubelet."""
        if not self.away and self.started is not None:
            self.settled = True
