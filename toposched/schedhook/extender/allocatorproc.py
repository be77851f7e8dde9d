"""kube-scheduler's DRA allocator in a process of its own (``toposched-dra-allocate``), spoken to
over its standard input and output, one JSON line a request.

The helper links the allocator kube-scheduler links, so its pick is the scheduler's by
construction. It keeps the slices, device classes and claims it is sent; ``allocate`` asks it
for a pod's claims on some nodes. A request is answered in order; a ``put`` or ``delete`` only
when it could not be read. If the process ends it is started again, and the caller sends its
state afresh (``restarted``).
"""

import asyncio
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

logger = logging.getLogger(__name__)

COMMAND: Final = "toposched-dra-allocate"
LINE_LIMIT: Final = 1 << 28
"""An answer names every node asked about; 256 MiB is far beyond 20,000 nodes."""


class AllocatorGoneError(Exception):
    """The helper process is not running (not installed, or it ended)."""


@dataclass(frozen=True)
class NodePick:
    """One node's answer: the devices picked, as [claim index, request, driver, pool, device]; or
    that the claims do not fit there; or the error the scheduler would report for it."""

    devices: Sequence[Sequence[Any]] = ()
    """As the helper sent them (thousands of nodes per answer: not copied)."""
    unsuitable: bool = False
    error: str = ""
    allocation: Sequence[dict[str, Any]] = ()


class AllocatorProcess:
    def __init__(self, command: Sequence[str] | None = None) -> None:
        found = shutil.which(COMMAND)
        self.command = list(command) if command else [found] if found else []
        self.generation = 0
        """Bumped at each start: the caller's state must be sent again."""
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next = 0
        self._lock = asyncio.Lock()

    @property
    def available(self) -> bool:
        return bool(self.command)

    async def ensure(self) -> bool:
        """Start the process if it is not running; True when it was (re)started now."""
        if self._process is not None and self._process.returncode is None:
            return False
        if not self.command:
            raise AllocatorGoneError(f"{COMMAND} is not installed")
        async with self._lock:
            if self._process is not None and self._process.returncode is None:
                return False
            self._process = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=LINE_LIMIT,
            )
            self._reader = asyncio.create_task(self._read(self._process))
            self.generation += 1
            logger.info("started %s (pid %d)", self.command[0], self._process.pid)
            return True

    def put(self, kind: str, obj: dict[str, Any]) -> None:
        self._send({"op": "put", "kind": kind, "object": obj})

    def delete(self, kind: str, name: str) -> None:
        self._send({"op": "delete", "kind": kind, "name": name})

    async def allocate(
        self,
        claims: Sequence[dict[str, Any]],
        nodes: Sequence[str],
        assumed: Sequence[dict[str, Any]] = (),
        per_node: float = 10.0,
        full: bool = False,
    ) -> dict[str, NodePick]:
        """Each node's answer for the pod's claims (those not allocated yet, in the pod's order);
        the allocator gives up on a node after ``per_node`` seconds, as the scheduler's Filter does."""
        request = {"claims": list(claims), "nodeNames": list(nodes), "assumed": list(assumed), "full": full}
        got = await self._ask(request, per_node, len(nodes))
        return {name: _node_pick(n) for name, n in (got.get("nodes") or {}).items()}

    async def changed(
        self, claims: Sequence[dict[str, Any]], nodes: Sequence[str], have: Sequence[str], per_node: float = 10.0
    ) -> tuple[str, bool, dict[str, NodePick]]:
        """As ``allocate``, but only the nodes whose answer changed since the last such call for the
        same claims' shape, which the caller holds when the shape is in ``have``: (the shape, whether
        the answer is such a delta, the nodes' answers). Not a delta: every node's, the rest forgotten."""
        request = {"claims": list(claims), "nodeNames": list(nodes), "delta": True, "have": list(have)}
        got = await self._ask(request, per_node, len(nodes))
        nodes_changed = {name: _node_pick(n) for name, n in (got.get("changed") or {}).items()}
        return str(got.get("shape", "")), bool(got.get("delta")), nodes_changed

    async def _ask(self, request: dict[str, Any], per_node: float, count: int) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = answer
        self._send({"op": "allocate", "id": ident, "timeoutMillis": int(per_node * 1000), **request})
        await self._drain()
        try:  # per node, on every core: the answer for all may take longer, but not unboundedly
            got = await asyncio.wait_for(answer, per_node * max(1, count // 64) + 5.0)
        finally:
            self._waiting.pop(ident, None)
        if got.get("error"):
            raise ValueError(got["error"])
        return got

    async def close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 5)
        except TimeoutError:
            process.kill()
            await process.wait()
        if self._reader is not None:
            self._reader.cancel()

    def _send(self, request: dict[str, Any]) -> None:
        process = self._process
        if process is None or process.returncode is not None or process.stdin is None:
            raise AllocatorGoneError(f"{COMMAND} is not running")
        process.stdin.write(orjson.dumps(request) + b"\n")

    async def _drain(self) -> None:
        process = self._process
        if process is not None and process.stdin is not None:
            try:
                await process.stdin.drain()
            except (ConnectionError, OSError) as exc:
                raise AllocatorGoneError(f"{COMMAND}: {exc}") from exc

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        try:
            while line := await process.stdout.readline():
                try:
                    answer = orjson.loads(line)
                except orjson.JSONDecodeError:
                    logger.warning("%s: an unreadable answer: %.200r", COMMAND, line)
                    continue
                waiting = self._waiting.pop(int(answer.get("id") or 0), None)
                if waiting is not None and not waiting.done():
                    waiting.set_result(answer)
                elif answer.get("error"):  # a put or delete it could not take: that object is skipped
                    logger.warning("%s: %s", COMMAND, answer["error"])
        except (ValueError, OSError) as exc:  # a line beyond the limit, a closed pipe
            logger.warning("%s: stopped reading (%s)", COMMAND, exc)
        finally:
            gone = AllocatorGoneError(f"{COMMAND} ended (exit code {process.returncode})")
            for waiting in self._waiting.values():
                if not waiting.done():
                    waiting.set_exception(gone)
            self._waiting.clear()
            if process.returncode is None:
                process.kill()


def _node_pick(raw: dict[str, Any]) -> NodePick:
    return NodePick(
        raw.get("devices") or [], raw.get("unsuitable", False), raw.get("error", ""), raw.get("allocation") or []
    )
