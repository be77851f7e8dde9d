"""One reconcile per burst of changes to an object's inputs, retried with backoff while it fails.

Kopf's own mechanisms do not do this here without writing more, to the user's objects too. Its
retries, backoff and ``TemporaryError(delay=)`` belong to change handlers (``on.create``,
``on.update``, ``on.resume``), which keep the last handled spec in an annotation of the object;
``@kopf.timer`` and ``@kopf.daemon`` put a finalizer on every object (a deletion then waits for
a running operator); and Kopf's batching joins events of one object only, while a burst of pod
events here must become one status write of another object, their AppGroup.

Measured side by side on the local control plane (an AppGroup of 100 workloads, spec change to
status seen, three alternating runs of 60 changes each): this path 59-80 ms median and 142-174 ms
p99 with one write per change; the same status from Kopf's change handlers with retries and
``TemporaryError(delay=)`` 69-92 ms median and 179-250 ms p99 with two writes per change (the
status, then Kopf's annotation).
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class Coalescer(Generic[K]):
    """Runs ``action(key)`` once per burst of pokes, and again with backoff while it fails.

    Pokes for a key already waiting are absorbed, so a storm of pod events becomes one
    status write. A per-key lock keeps two runs for the same key from overlapping.
    """

    def __init__(self, action: Callable[[K], Awaitable[None]], delay: float, max_backoff: float = 60.0):
        self._action = action
        self._delay = delay
        self._max_backoff = max_backoff
        self._pending: set[K] = set()
        self._locks: dict[K, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def poke(self, key: K, delay: float | None = None, attempt: int = 0) -> None:
        if key in self._pending:
            return
        self._pending.add(key)
        task = asyncio.create_task(self._later(key, self._delay if delay is None else delay, attempt))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def run_now(self, key: K) -> None:
        """Run at once (a spec change should not wait for the coalescing window)."""
        await self._run(key, attempt=0)

    async def _later(self, key: K, delay: float, attempt: int) -> None:
        await asyncio.sleep(delay)
        self._pending.discard(key)
        await self._run(key, attempt)

    async def _run(self, key: K, attempt: int) -> None:
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            try:
                await self._action(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                backoff = min(self._max_backoff, 0.5 * 2**attempt)
                logger.warning("reconcile of %s failed (%s); retrying in %.1fs", key, exc, backoff)
                self.poke(key, delay=backoff, attempt=attempt + 1)

    def forget(self, key: K) -> None:
        self._locks.pop(key, None)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
