"""Which earlier pods a filter waits for, and until when.

kube-scheduler binds asynchronously: the next pod's filter can arrive before the bind of a pod
answered just before it, and a filter that did not wait would not see that pod's reservation. But
some answered pods are never bound through the extender (a Reserve or Permit plugin refused them,
the pod was deleted, another binder took it, a client that only filters), and a filter that waits
for them stalls for nothing. So a pod is awaited only while its bind can still be coming:

- for as long after its answer as binds have actually taken here: three times the 99th percentile of the recent
  answer-to-bind lag, never less than ``floor`` (50 ms: a machine that slows down must not lose
  a reservation to one late bind), never more than ``limit``;
- and only while this extender is seen to be the binder: after ``IN_VAIN_BEFORE_IDLE`` waits in a
  row that no bind ended, with no bind seen since, nothing is awaited until a bind arrives again.

``BindWindows`` keeps the windows (pure bookkeeping); ``BindWait`` is the filters' wait on them.
"""

import asyncio
import time
from collections import deque

from prometheus_client import Counter, Histogram

LAGS_KEPT = 200
"""Recent answer-to-bind lags the window is taken from."""
LAGS_BEFORE_LEARNING = 20
"""Until this many lags are known, the window is ``limit``."""
LAG_MARGIN = 3.0
"""The window: this many times the 99th percentile of the recent lags."""
IN_VAIN_BEFORE_IDLE = 3
TIMER_SLACK = 0.001
"""A wait that timed out may wake a hair before the window's end by the clock."""

LAG = Histogram(
    "toposched_extender_bind_lag_seconds",
    "Time from a filter's answer to the bind of the same pod.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
IN_VAIN = Counter(
    "toposched_extender_bind_waits_in_vain_total",
    "Filters that waited for an earlier pod's bind until its window closed, without the bind.",
)
BIND_WAIT = Histogram(
    "toposched_extender_bind_wait_seconds",
    "Time a filter waited for the binds of earlier pods.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)


class BindWindows:
    """Pods answered with fitting nodes whose bind has not arrived, and how long each is awaited."""

    def __init__(self, limit: float, floor: float = 0.05) -> None:
        self.limit = limit
        self.floor = min(floor, limit)
        self.answered: dict[str, float] = {}
        """Pod uid -> when its filter answered with fitting nodes (monotonic)."""
        self.lags: deque[float] = deque(maxlen=LAGS_KEPT)
        self.in_vain = 0
        """Waits in a row that ended without the bind awaited (reset by any bind)."""

    def answer(self, uid: str, now: float) -> None:
        self.answered[uid] = now

    def bound(self, uid: str, now: float) -> None:
        """The bind of ``uid`` arrived."""
        since = self.answered.pop(uid, None)
        if since is not None:
            lag = max(0.0, now - since)
            self.lags.append(lag)
            LAG.observe(lag)
        self.in_vain = 0

    def window(self) -> float:
        """How long after its answer a pod's bind is still awaited."""
        if len(self.lags) < LAGS_BEFORE_LEARNING:
            return self.limit
        ordered = sorted(self.lags)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        return min(self.limit, max(self.floor, LAG_MARGIN * p99))

    def deadline(self, uid: str, now: float) -> float | None:
        """Until when the filter of ``uid`` waits for the binds of pods answered before it (None:
        it does not wait). Pods whose window has closed are forgotten, each counted as a wait
        in vain when a filter was waiting for it."""
        if self.in_vain >= IN_VAIN_BEFORE_IDLE:  # binds do not come here: do not wait for them
            self.answered = {u: t for u, t in self.answered.items() if u == uid}
            return None
        window = self.window()
        self.answered = {u: t for u, t in self.answered.items() if u == uid or now - t <= window}
        ends = [t + window for u, t in self.answered.items() if u != uid]
        return max(ends) if ends else None

    def closed(self, uid: str, now: float) -> None:
        """A wait by the filter of ``uid`` ran out: what it waited for did not come."""
        window = self.window()
        late = [u for u, t in self.answered.items() if u != uid and now - t >= window - TIMER_SLACK]
        if late:
            IN_VAIN.inc()
            self.in_vain += 1
            for u in late:
                del self.answered[u]


class BindWait:
    """A filter's wait for the binds of pods answered before it, at most ``limit`` seconds."""

    def __init__(self, limit: float) -> None:
        self.windows = BindWindows(limit)
        """Pods answered with fitting nodes whose bind has not arrived yet, and how long each is awaited."""
        self._reserved = asyncio.Event()

    def answered(self, uid: str) -> None:
        """The filter of ``uid`` answered with fitting nodes: its bind is awaited."""
        self.windows.answer(uid, time.monotonic())

    def bound(self, uid: str) -> None:
        """The bind of ``uid`` arrived (its reservation is not made yet)."""
        self.windows.bound(uid, time.monotonic())

    def reserved(self) -> None:
        """A bind's reservation is in the ledger: the waiting filters look again."""
        self._reserved.set()

    async def earlier_binds(self, uid: str) -> None:
        """Until the binds of the pods answered before ``uid`` have arrived, or their windows closed."""
        started = time.monotonic()
        while True:
            now = time.monotonic()
            deadline = self.windows.deadline(uid, now)
            if deadline is None:
                break
            self._reserved.clear()
            try:
                await asyncio.wait_for(self._reserved.wait(), deadline - now)
            except TimeoutError:
                self.windows.closed(uid, time.monotonic())
                break
        BIND_WAIT.observe(time.monotonic() - started)
