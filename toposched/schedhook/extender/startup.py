"""Where the extender's cold start goes, told once at Ready: one INFO line and the
``toposched_extender_start_*`` gauges.

Steps (seconds): ``before_lists`` (process start -> the lists begin: imports, TLS, listeners),
per kind ``list_<kind>`` (first request -> last page parsed), of which ``parse_<kind>`` (its JSON),
then ``store_<kind>`` (the object store takes it in: for pods, their requests), ``lists`` (the
lists begin -> the last one waited for is stored), ``parse`` (nodes, NRTs, AppGroups and
NetworkTopologies into placement's models), ``knowledge`` (which nodes are blind), ``table``
(placement's node table filled) and ``ready`` (process start -> Ready). Per kind also the
bytes and objects of its first list.
"""

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psutil
from prometheus_client import Gauge

from toposched.kube.watch import ListStats

logger = logging.getLogger(__name__)
START_SECONDS = Gauge(
    "toposched_extender_start_seconds",
    "The extender's last cold start by step (before_lists, list_<kind>, parse_<kind>, store_<kind>, lists, parse, "
    "knowledge, table, ready).",
    ["step"],
)
START_BYTES = Gauge("toposched_extender_start_list_bytes", "Bytes of each kind's first list at start-up.", ["kind"])
START_OBJECTS = Gauge(
    "toposched_extender_start_list_objects", "Objects in each kind's first list at start-up.", ["kind"]
)
WARM_STEPS = ("parse", "knowledge", "table")


def process_started() -> float:
    """When this process started (monotonic clock), as the kernel says it."""
    return time.monotonic() - (time.time() - float(psutil.Process().create_time()))


class StartUp:
    """The figures of one cold start, as they come in; said once, at ``ready``."""

    def __init__(self, process_start: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.process_start = process_start if process_start is not None else process_started()
        self.lists_began: float | None = None
        self.steps: dict[str, float] = {}
        self.lists: dict[str, ListStats] = {}
        self.done = False

    def begin_lists(self) -> None:
        self.lists_began = self.clock()
        self._step("before_lists", self.lists_began - self.process_start)

    def listed(self, kind: str, stats: ListStats) -> None:
        """The first list of ``kind`` is in (later ones, after a failed watch, are not a start)."""
        if kind in self.lists:
            return
        self.lists[kind] = stats
        self._step(f"list_{kind}", stats.seconds)
        self._step(f"parse_{kind}", stats.parse_seconds)
        START_BYTES.labels(kind).set(stats.bytes)
        START_OBJECTS.labels(kind).set(stats.objects)

    def stored(self, kind: str, seconds: float) -> None:
        if f"store_{kind}" not in self.steps:
            self._step(f"store_{kind}", seconds)

    def all_listed(self) -> None:
        """Every kind waited for is stored."""
        if self.lists_began is not None and "lists" not in self.steps:
            self._step("lists", self.clock() - self.lists_began)

    @contextmanager
    def timed(self, step: str) -> Iterator[None]:
        began = self.clock()
        try:
            yield
        finally:
            self._step(step, self.clock() - began)

    def ready(self) -> None:
        """Ready: the total, the gauge and the one line (once)."""
        if self.done:
            return
        self.done = True
        self._step("ready", self.clock() - self.process_start)
        logger.info("%s", summary(self.steps, self.lists))

    def _step(self, step: str, seconds: float) -> None:
        self.steps[step] = seconds
        START_SECONDS.labels(step).set(round(seconds, 4))


def summary(steps: dict[str, float], lists: dict[str, ListStats]) -> str:
    """``ready in 9.1 s: before lists 1.2 s; nodes 20000 (61.0 MiB) listed in 4.1 s, parse 0.9 s,
    store 0.1 s; ...; parse 1.5 s, knowledge 0.2 s, table 0.4 s``."""
    parts = [f"ready in {steps.get('ready', 0.0):.1f} s", f"before lists {steps.get('before_lists', 0.0):.1f} s"]
    for kind, stats in lists.items():
        parts.append(
            f"{kind} {stats.objects} ({stats.bytes / 2**20:.1f} MiB) listed in {stats.seconds:.1f} s, "
            f"parse {stats.parse_seconds:.1f} s, store {steps.get(f'store_{kind}', 0.0):.1f} s"
        )
    if "lists" in steps:
        parts.append(f"all listed in {steps['lists']:.1f} s")
    parts.append(", ".join(f"{step} {steps[step]:.1f} s" for step in WARM_STEPS if step in steps))
    return "; ".join(p for p in parts if p)
