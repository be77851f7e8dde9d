"""How the long-running commands log: one format, and the level of toposched's own messages.

``--log-level debug`` turns on toposched's debug messages only (what the extender saw when it
refused or bound a pod, say); the libraries below it stay at info, so a debug log says what
toposched decided rather than every HTTP frame.
"""

import logging

LEVELS = ("debug", "info", "warning", "error")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str = "info") -> None:
    """Log to stderr: the libraries at info (or above, when ``level`` is), toposched at ``level``."""
    numeric = logging.getLevelNamesMapping()[level.upper()]
    logging.basicConfig(level=max(numeric, logging.INFO), format=FORMAT)
    logging.getLogger("toposched").setLevel(numeric)
