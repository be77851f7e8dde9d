"""Saying that something keeps failing once per outage, not once per attempt.

While the apiserver restarts, every loop that calls it fails each second; a log line per attempt
buries the one that matters. An ``Outage`` logs the first failure as a warning (without a
traceback), the attempts after it as debug, and the first success after it with the outage's
length.
"""

import logging
import time


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
