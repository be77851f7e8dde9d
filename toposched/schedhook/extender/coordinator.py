"""kube-scheduler's three calls -- filter, prioritize's scores, bind -- from the HTTP adapter to the
roles that answer them.

A filter waits for the binds of pods answered before it (``bindwait``), evaluates the pod on the
cluster view (``clusterview``) and keeps the results (``filtered``) for the pod's prioritize and
bind; a bind reserves, then posts (``binding``). Nodes turning blind and objects found unreadable
get a Warning Event (``eventsink``). A pod the filter left without a node is kept, to be woken
once room may have freed (``wakeups``).

kube-scheduler binds asynchronously: the next pod's filter can arrive before the previous pod's
bind, hence the wait -- only for binds that can still come, at most ``bind_wait``.
"""

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from toposched.apis.constants import WEIGHT_NETPERF
from toposched.kube import rest
from toposched.schedhook.extender.allocatorproc import AllocatorProcess
from toposched.schedhook.extender.binding import Binder
from toposched.schedhook.extender.bindwait import BindWait
from toposched.schedhook.extender.clusterview import ClusterView
from toposched.schedhook.extender.devices import Devices
from toposched.schedhook.extender.eventsink import EventSink
from toposched.schedhook.extender.filtered import FilterMemory
from toposched.schedhook.extender.knowledge import Knowledge
from toposched.schedhook.extender.refusals import refusal_line
from toposched.schedhook.extender.startup import StartUp
from toposched.schedhook.extender.store import ObjectStore
from toposched.schedhook.extender.wakeups import Wakeups, refused_pod
from toposched.schedhook.placement.evaluate import PlacementConfig, Results, evaluate
from toposched.schedhook.placement.parse import pod_uid
from toposched.schedhook.settings import SchedhookSettings

logger = logging.getLogger(__name__)
SAID_NODES = 8
"""Refused nodes described per refused pod in the debug log."""


@dataclass(frozen=True)
class ExtenderConfig:
    """What the extender is told of its job (``toposched schedhook``'s settings)."""

    weights_name: str = WEIGHT_NETPERF
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    bind_wait: float = 1.0
    """At most this long a filter waits for earlier binds."""
    reservation_timeout: float = 60.0
    nrt_grace: float = 600.0
    stale_after: float = 30.0
    dra_alignment: str = "auto"
    dra_allocator: str = ""
    """The allocator helper's path ("": found on PATH)."""
    dra_timeout: float = 2.0

    @classmethod
    def of(cls, settings: SchedhookSettings) -> Self:
        return cls(
            weights_name=settings.weights_name,
            placement=PlacementConfig(numa_strategy=settings.strategy, missing_nrt_fits=settings.missing_nrt == "pass"),
            bind_wait=settings.bind_wait,
            reservation_timeout=settings.reservation_timeout,
            nrt_grace=settings.nrt_grace,
            stale_after=settings.stale_after,
            dra_alignment=settings.dra_alignment,
            dra_allocator=settings.dra_allocator,
            dra_timeout=settings.dra_timeout,
        )


class Coordinator:
    def __init__(self, store: ObjectStore, api: rest.Kube | None, config: ExtenderConfig | None = None) -> None:
        self.config = config or ExtenderConfig()
        self.events = EventSink(api)
        knowledge = Knowledge(store, self.config.nrt_grace, self.config.stale_after, turned_blind=self.events.blind)
        self.view = ClusterView(store, knowledge, self.config.weights_name, self.config.reservation_timeout)
        self.filtered = FilterMemory()
        self.wakeups = Wakeups()
        self.bind_wait = BindWait(self.config.bind_wait)
        self.binder = Binder(self.view, self.filtered, api, self.evaluate)
        allocator = AllocatorProcess([self.config.dra_allocator] if self.config.dra_allocator else None)
        self.devices = Devices(store, api, self.events, self.config.dra_alignment, allocator, self.config.dra_timeout)

    def ready(self) -> bool:
        """Every kind has been listed once: a partial cache would misplace pods."""
        return self.view.store.synced.is_set()

    def warm(self, start: StartUp | None = None) -> None:
        """Parse everything, judge the blind nodes and fill the table now (about a second at 5,000
        nodes), not in the first filter call, where the pods behind it would wait for it; each
        step timed into ``start``."""
        start = start or StartUp(process_start=0.0)
        with start.timed("parse"):
            self.view.snapshots.parse_all()
            self.view.snapshots.ahead.clear()
        with start.timed("knowledge"):
            self.view.knowledge.blind_nodes()
        with start.timed("table"):
            self.view.snapshot()

    async def filter(self, pod: dict[str, Any], names: Sequence[str]) -> Results:
        """Evaluate ``pod`` on ``names`` once the binds of pods answered before have arrived."""
        uid = pod_uid(pod)
        await self.bind_wait.earlier_binds(uid)
        looked = time.monotonic()
        snapshot = self.view.snapshot(exclude=uid)
        results = evaluate(pod, names, snapshot, self.config.placement)
        await self.devices.align(pod, uid, results, snapshot.nrts)
        self.filtered.keep(uid, results)
        refused = refused_pod(pod, results)
        self.wakeups.filtered(uid, refused, looked)
        if refused is not None and logger.isEnabledFor(logging.DEBUG):
            self._say_refused(refused, uid, results)
        self.events.rejected(self.view.take_rejected())
        if results.pod_error is None and results.fitting():
            self.bind_wait.answered(uid)
        return results

    def scores(self, pod: dict[str, Any], names: Sequence[str]) -> list[int]:
        """Total scores of ``names``, from the pod's filter when it saw them all, else evaluated now."""
        kept = self.filtered.get(pod_uid(pod))
        if kept is not None:
            try:
                return kept.results.scores_of(names)
            except KeyError:  # a node the filter did not see
                pass
        return self.evaluate(pod, names).scores_of(names)

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Bind the pod to ``node``, recording the NUMA zones predicted for it; "" or why it failed."""
        self.bind_wait.bound(uid)
        self.wakeups.forget(uid)
        bind = await self.binder.reserve(namespace, name, uid, node)
        self.bind_wait.reserved()  # no await since the reservation: the waiting filters see it
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("binding %s/%s (%s) to %s, zones %s; %s", namespace, name, uid, node, bind.numa,
                         self._node_line(node, "", exclude=uid))  # fmt: skip
        return await self.binder.post(bind, lambda: self.devices.check_bind(uid, name, node, bind.numa))

    def _say_refused(self, refused: tuple[str, str], uid: str, results: Results) -> None:
        failed = sorted(results.failed().items())
        lines = [self._node_line(node, reason, exclude=uid) for node, reason in failed[:SAID_NODES]]
        more = f" || ... and {len(failed) - SAID_NODES} more" if len(failed) > SAID_NODES else ""
        logger.debug("refused %s/%s (%s): %s%s", *refused, uid, " || ".join(lines), more)  # one line: one grep

    def _node_line(self, node: str, reason: str, exclude: str) -> str:
        store = self.view.store
        pods, leaving = store.pods.leaving_on(node)
        deleting = store.pods.terminating_on(node)
        now = time.monotonic()
        left = {(e[0], e[1]): now - at for at, e in store.pods.gone.get(node, {}).values()}
        marks = {key: " deleting" if key in deleting else f" gone {left.get(key, 0.0):.1f}s" for key in leaving}
        counted = self.view.accounting.counted(node) or frozenset()
        named = [f"{ns}/{name}{marks.get((ns, name), '')}{'*' * ((ns, name) in counted)}" for ns, name, _ in pods]
        held = self.view.credits.of(node) + self.view.ledger.held(node, exclude)  # given back: negative CPUs
        return refusal_line(node, reason, store.nrt(node), self.view.accounting.said(node), held, named)

    def evaluate(self, pod: dict[str, Any], names: Sequence[str]) -> Results:
        """The pod on ``names``, on the cluster without its own reservation; kept as its latest filter."""
        uid = pod_uid(pod)
        results = evaluate(pod, names, self.view.snapshot(exclude=uid), self.config.placement)
        self.filtered.keep(uid, results)
        return results
