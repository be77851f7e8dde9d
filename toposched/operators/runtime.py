"""What the handlers share at run time: settings, the API client and leadership."""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field

from toposched.kube.rest import Kube
from toposched.operators.leader import Leadership
from toposched.operators.settings import OperatorSettings

logger = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: OperatorSettings
    api: Kube
    leadership: Leadership = field(default_factory=Leadership)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class Coalescer:
    """Runs ``action(key)`` once per burst of pokes, and again with backoff while it fails.

    Pokes for a key already waiting are absorbed, so a storm of pod events becomes one
    status write. A per-key lock keeps two runs for the same key from overlapping.
    """

    def __init__(self, action: Callable[[Hashable], Awaitable[None]], delay: float, max_backoff: float = 60.0):
        self._action = action
        self._delay = delay
        self._max_backoff = max_backoff
        self._pending: set[Hashable] = set()
        self._locks: dict[Hashable, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def poke(self, key: Hashable, delay: float | None = None, attempt: int = 0) -> None:
        if key in self._pending:
            return
        self._pending.add(key)
        task = asyncio.create_task(self._later(key, self._delay if delay is None else delay, attempt))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def run_now(self, key: Hashable) -> None:
        """Run at once (a spec change should not wait for the coalescing window)."""
        await self._run(key, attempt=0)

    async def _later(self, key: Hashable, delay: float, attempt: int) -> None:
        await asyncio.sleep(delay)
        self._pending.discard(key)
        await self._run(key, attempt)

    async def _run(self, key: Hashable, attempt: int) -> None:
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

    def forget(self, key: Hashable) -> None:
        self._locks.pop(key, None)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
