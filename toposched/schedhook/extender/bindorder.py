"""Per-node ordering of the extender's binding calls.

The extender predicts NUMA zones in the order binds arrive, reserving each pod's zones before
it calls the API. The kubelet, however, admits pods in the order their bindings reach it, and
two binding calls to one node that are in flight together can be stored in either order. Then
the kubelet fills the zones in the other order: the annotated zones are wrong, and the later pod
may no longer fit (a TopologyAffinityError, seen on real kubelets). So a node's binding calls
are issued one after another, in the order their zones were predicted. Binds to different nodes
still run in parallel.
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class NodeBindOrder:
    def __init__(self, wait: float = 10.0) -> None:
        self.wait = wait
        """At most this long for an earlier call to the same node (the API call has its own timeout)."""
        self._last: dict[str, asyncio.Future[None]] = {}

    @asynccontextmanager
    async def turn(self, node: str) -> AsyncIterator[None]:
        """Enter in prediction order (no await before it); the body runs once the previous call
        to ``node`` has finished, whether it failed or not."""
        previous = self._last.get(node)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._last[node] = done
        try:
            if previous is not None and not previous.done():
                await asyncio.wait({previous}, timeout=self.wait)
            yield
        finally:
            done.set_result(None)
            if self._last.get(node) is done:
                del self._last[node]
