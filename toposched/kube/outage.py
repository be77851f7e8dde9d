"""Saying that something keeps failing once per outage, not once per attempt.

While the apiserver restarts, every loop that calls it fails each second; a log line per attempt
buries the one that matters. An ``Outage`` logs the first failure as a warning (without a
traceback), the attempts after it as debug, and the first success after it with the outage's
length.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable


class Outage:
    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger = logger
        self.what = what
        self.since: float | None = None
        """When the current run of failures began (monotonic); None while things work."""

    def failed(self, exc: BaseException, retrying: str = "") -> None:
        reason = str(exc) or type(exc).__name__
        if self.since is None:
            self.since = time.monotonic()
            self.logger.warning("%s failed (%s)%s", self.what, reason, f"; {retrying}" if retrying else "")
        else:
            self.logger.debug("%s still failing (%s)", self.what, reason)

    def ok(self) -> None:
        if self.since is not None:
            self.logger.info("%s works again after %.1fs", self.what, time.monotonic() - self.since)
            self.since = None


async def every(period: float, outage: Outage, step: Callable[[], Awaitable[None]]) -> None:
    """``step()`` every ``period`` seconds for ever; a failing step is said once per outage."""
    while True:
        try:
            await step()
            outage.ok()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the apiserver away, a conflict: the next period tries again
            outage.failed(exc)
        await asyncio.sleep(period)
