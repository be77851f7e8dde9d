"""Per-node ordering of the extender's binding calls.

The extender predicts NUMA zones in the order binds arrive, reserving each pod's zones before
it calls the API. The kubelet, however, admits pods in the order their bindings reach it, and
two binding calls to one node that are in flight together can be stored in either order. Then
the kubelet fills the zones in the other order: the annotated zones are wrong, and the later pod
may no longer fit (a TopologyAffinityError, seen on real kubelets). So a node's binding calls
are issued in the order their zones were predicted. Binds to different nodes run in parallel.

One exception keeps a burst of replicas fast: calls in a row to one node whose pods have the same
*kind* -- the same shape (everything of a pod the kubelet's admission reads, ``Pod.shape``) and
the same predicted zones -- may be in flight together. Whichever of them the kubelet admits first
takes what the first was predicted to take, and the zones each is annotated with are the same:
every order of them ends in the same kubelet state. Such a run waits for the calls before it; a
call of another kind waits for the whole run.
"""

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass
class _Run:
    """Calls in a row to one node of one kind: they wait for ``before``, never for each other."""

    kind: object
    before: list[asyncio.Future[None]]
    calls: list[asyncio.Future[None]] = field(default_factory=list)


class NodeBindOrder:
    def __init__(self, wait: float = 10.0) -> None:
        self.wait = wait
        """At most this long for an earlier call to the same node (the API call has its own timeout)."""
        self._last: dict[str, _Run] = {}

    @asynccontextmanager
    async def turn(self, node: str, kind: Hashable | None = None) -> AsyncIterator[None]:
        """Enter in prediction order (no await before it); the body runs once the earlier calls to
        ``node`` it must follow have finished, whether they failed or not. ``kind`` (None: unlike
        any other) lets calls in a row of one kind go together."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        run = self._last.get(node)
        if run is None or kind is None or run.kind != kind:
            # A call of another kind follows every call before it; those of the last run finish
            # only after the runs before them, so the last run's calls are enough to wait for.
            run = _Run(kind if kind is not None else object(), [c for c in run.calls if not c.done()] if run else [])
            self._last[node] = run
        run.calls = [c for c in run.calls if not c.done()]  # a steady stream of one kind stays short
        run.calls.append(done)
        try:
            pending = [c for c in run.before if not c.done()]
            if pending:
                await asyncio.wait(pending, timeout=self.wait)
            yield
        finally:
            done.set_result(None)
            if self._last.get(node) is run and all(c.done() for c in run.calls):
                del self._last[node]
