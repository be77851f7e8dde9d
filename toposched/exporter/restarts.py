"""When a restarted kubelet still holds what pods it no longer runs hold. Pure bookkeeping.

The kubelet drops the CPUs, pinned memory and devices of pods it no longer runs (deleted pods
whose checkpoint entries are left) when it computes the next pod's hints -- but only once all its
pod sources are ready, which a started kubelet is only after it has handled its first batch of
pods from the apiserver. Every pod of that batch is admitted against the checkpoints as restored,
stale entries included: a pod bound while the kubelet was down, or in the second after it came
back, can find its CPUs held by a pod deleted shortly before the restart and be rejected with a
TopologyAffinityError. Outside that batch the exporter counts stale entries free, as the kubelet's
next admission will.

So from a restart (PodResources unreachable, its socket recreated, or the exporter's own start)
stale entries count as held, until the kubelet has dropped them from its checkpoints (its CPU
Manager does within its reconcile period of the first batch) or ``hold`` seconds after
PodResources answered again: its first batch comes from its first list of pods, a moment after it
starts (the Memory Manager keeps stale entries until the next admission, which drops them).
"""

import math
from dataclasses import dataclass

HOLD = 15.0
"""Seconds after PodResources answers again that stale entries count as held at most."""

SocketId = tuple[int, int] | None
"""The PodResources socket's inode and change time (None: not there): the kubelet makes a new
socket at each start."""


@dataclass
class RestartHold:
    hold: float = HOLD
    since: float | None = -math.inf
    """When a restart was seen (monotonic); None: no hold. The exporter's start counts as one."""
    back: float | None = None
    """When PodResources answered after it (monotonic); None: not yet."""
    socket: SocketId = None
    """The socket PodResources last answered on."""

    def down(self, now: float) -> bool:
        """PodResources is unreachable: hold. True when the hold begins now."""
        began = self.since is None
        if began:
            self.since = now
        self.back = None
        return began

    def answered(self, now: float, socket: SocketId) -> bool:
        """PodResources answered, on ``socket``. True when that shows a restart not seen before
        (a new socket: the kubelet restarted between two reads)."""
        restarted = self.socket is not None and socket is not None and socket != self.socket
        self.socket = socket if socket is not None else self.socket
        if restarted:
            self.since, self.back = now, now
        elif self.since is not None and self.back is None:
            self.back = now
        return restarted

    def holding(self, now: float) -> bool:
        """Stale entries count as held now."""
        if self.since is not None and self.back is not None and now - self.back >= self.hold:
            self.since = self.back = None
        return self.since is not None

    def dropped(self) -> None:
        """The checkpoints hold no stale entry while PodResources answers: the hold is over."""
        if self.back is not None:
            self.since = self.back = None

    def ends_at(self) -> float | None:
        """When (monotonic) the hold ends by time, if nothing else ends it first (None: not known yet)."""
        return None if self.since is None or self.back is None else self.back + self.hold
