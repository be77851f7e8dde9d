"""The main loop of a process beside a node's kubelet (its device plugin, its DRA driver): one
look every tick, or at once when a signal asks for something (re-read the configuration, say),
until SIGTERM or SIGINT. Standard library only; the processes bring their gRPC."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Mapping


class SignalledLoop:
    """``asks`` maps a signal to what it asks for; a look takes the asks with :meth:`asked_for`."""

    def __init__(self, tick: float, asks: Mapping[signal.Signals, str]) -> None:
        self.tick = tick
        self.asks = dict(asks)
        self.asked: set[str] = set()
        self.wake = asyncio.Event()
        self.main: asyncio.Task[None] | None = None

    def asked_for(self, what: str) -> bool:
        """Whether a signal asked for ``what`` since the last look (the ask is then taken)."""
        found = what in self.asked
        self.asked.discard(what)
        return found

    def poke(self) -> None:
        """Look again at once."""
        self.wake.set()

    async def run(self, look: Callable[[], Awaitable[None]]) -> None:
        """Call ``look`` every tick and whenever poked or asked, until SIGTERM or SIGINT (a look
        in flight is abandoned)."""
        loop = asyncio.get_running_loop()
        for signum, what in self.asks.items():
            loop.add_signal_handler(signum, self._ask, what)
        for stop in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(stop, self._stop)
        self.main = asyncio.create_task(self._forever(look))
        with contextlib.suppress(asyncio.CancelledError):
            await self.main

    async def _forever(self, look: Callable[[], Awaitable[None]]) -> None:
        while True:
            await look()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.tick)
            self.wake.clear()

    def _ask(self, what: str) -> None:
        self.asked.add(what)
        self.wake.set()

    def _stop(self) -> None:
        if self.main is not None:
            self.main.cancel()
