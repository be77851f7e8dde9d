"""Each fault of a run, and how long the system takes to be whole again after it (its recovery).

A recovery is counted from the moment the fault is over (the process started again, the object
created again, the apiserver ready again) to the moment toposched's components show the truth
again: the exporter ready (it published and confirmed its NRT), the NRT back with its Node as owner,
the extender's ``/filter`` answering from an NRT written after the fault, the operator writing an
AppGroup's order. Waits are bounded (``LONGEST``): a fault not recovered from by then counts as
that long, with the reason.
"""

from __future__ import annotations

import asyncio
import ssl
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from testkit.builders import KWOK_TOLERATION, appgroup_body, pod_body
from testkit.chaos import schedule as kinds
from testkit.chaos.scene import APPGROUPS, KWOK_LABELS, LARGE, PROBE, RealExporter, Scene, probe_nrt
from testkit.chaos.schedule import Fault
from testkit.cluster import ensure_kwok_node
from testkit.extender import FilterSession
from testkit.large_nrt import NRTS, changing
from testkit.realnode.exporter import wait_agreement

LONGEST = 120.0
"""Seconds a recovery is waited for at most."""
LARGE_WINDOW = 20.0
"""Seconds the largest NRT is rewritten every 100 ms in one fault."""
READY_TIMEOUT = aiohttp.ClientTimeout(total=5)
PROBE_POD = pod_body("probe", namespace="chaos", uid="probe", cpu=4, memory="1Gi", tolerations=[KWOK_TOLERATION])


class NotRecoveredError(RuntimeError):
    """A recovery waited for longer than it may take."""


@dataclass
class Recovery:
    fault: Fault
    seconds: float
    """The longest of ``parts`` (0: a fault with nothing to recover from, the largest NRT's writes)."""
    parts: dict[str, float] = field(default_factory=dict)
    """What recovered, and in how many seconds."""
    detail: str = ""

    def line(self) -> str:
        where = f" on {self.fault.target}" if self.fault.target else ""
        if not self.parts:
            return f"{self.fault.kind}{where}: {self.detail}"
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in self.parts.items())
        detail = f"; {self.detail}" if self.detail else ""
        return f"{self.fault.kind}{where}: recovered in {self.seconds:.1f} s ({parts}){detail}"


async def until(probe: Callable[[], Awaitable[Any]], what: str, within: float = LONGEST, every: float = 0.1) -> float:
    """Poll ``probe`` until it returns something true (errors count as false); returns when (monotonic)."""
    deadline = time.monotonic() + within
    last: object = None
    while time.monotonic() < deadline:
        try:
            if await probe():
                return time.monotonic()
        except Exception as exc:  # the apiserver away, a process starting: try again
            last = exc
        await asyncio.sleep(every)
    raise NotRecoveredError(f"{what} not within {within:.0f} s (last error: {last})")


class Faults:
    def __init__(self, scene: Scene, session: aiohttp.ClientSession) -> None:
        self.scene = scene
        stack = scene.stack
        assert stack is not None
        assert stack.pki is not None
        self.filter = FilterSession(stack.port, stack.pki, session)
        self.custom = client.CustomObjectsApi(scene.kube)
        self.core = client.CoreV1Api(scene.kube)
        self.probe_free = 0
        self.appgroups = 0
        self.outages: list[float] = []
        """When the apiserver was ready again after each of its faults (monotonic)."""

    async def inject(self, fault: Fault) -> Recovery:
        run = {
            kinds.EXPORTER_RESTART: self.exporter_restart,
            kinds.NRT_RECREATE: self.nrt_recreate,
            kinds.NODE_RECREATE: self.node_recreate,
            kinds.APISERVER_KILL: self.apiserver_kill,
            kinds.WATCH_EXPIRED: self.watch_expired,
            kinds.KUBELET_RESTART: self.kubelet_restart,
            kinds.LARGE_NRT: self.large_nrt,
        }[fault.kind]
        recovery = Recovery(fault, 0.0)
        try:
            await run(fault, recovery)
        except NotRecoveredError as exc:
            recovery.parts.setdefault("not recovered", LONGEST)
            recovery.detail = str(exc)
        recovery.seconds = max(recovery.parts.values(), default=0.0)
        return recovery

    # -- the node's NRT and exporter ------------------------------------------------------------------

    async def _nrt(self, node: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = await self.custom.get_cluster_custom_object(*NRTS, node)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    async def _owned_nrt(self, node: str) -> bool:
        """The node's NRT is there, owned by the Node that is there now."""
        nrt, current = await self._nrt(node), await self.core.read_node(node)
        owners = (nrt or {}).get("metadata", {}).get("ownerReferences") or []
        return any(o.get("uid") == current.metadata.uid for o in owners)

    async def _exporter_ready(self, node: str) -> bool:
        return await asyncio.to_thread(self.scene.exporters[node].ready)

    async def exporter_restart(self, fault: Fault, recovery: Recovery) -> None:
        exporter = self.scene.exporters[fault.target]
        exporter.kill()
        started = time.monotonic()
        await asyncio.to_thread(exporter.start)
        ready = await until(lambda: self._exporter_ready(fault.target), "the exporter ready again")
        recovery.parts["exporter ready"] = ready - started

    async def nrt_recreate(self, fault: Fault, recovery: Recovery) -> None:
        await self.custom.delete_cluster_custom_object(*NRTS, fault.target)
        deleted = time.monotonic()
        back = await until(lambda: self._owned_nrt(fault.target), "the NRT published again")
        recovery.parts["NRT back"] = back - deleted

    async def node_recreate(self, fault: Fault, recovery: Recovery) -> None:
        name = fault.target
        await self.core.delete_node(name)
        node = self.scene.real.get(name)
        if node is None:  # a kwok node: its object, made again
            await until(lambda: self._gone(name), "the Node deleted")
            again = time.monotonic()
            await ensure_kwok_node(self.scene.kube, name, KWOK_LABELS)
        else:  # a real node's kubelet registers its Node again when it starts
            began = time.monotonic()
            await asyncio.to_thread(node.restart_kubelet)
            again = time.monotonic()
            recovery.detail = f"kubelet restarted in {again - began:.1f} s"
        ready = await until(lambda: self._node_ready(name), "the Node Ready again")
        recovery.parts["Node Ready"] = ready - again
        back = await until(lambda: self._owned_nrt(name), "the NRT published again for the new Node")
        recovery.parts["NRT back"] = back - again

    async def _gone(self, name: str) -> bool:
        try:
            await self.core.read_node(name)
        except client.ApiException as exc:
            return bool(exc.status == 404)
        return False

    async def _node_ready(self, name: str) -> bool:
        node = await self.core.read_node(name)
        return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])

    async def kubelet_restart(self, fault: Fault, recovery: Recovery) -> None:
        node = self.scene.real[fault.target]
        began = time.monotonic()
        await asyncio.to_thread(node.restart_kubelet)
        ready = time.monotonic()
        recovery.detail = f"kubelet Ready again in {ready - began:.1f} s"
        exporter = self.scene.exporters[fault.target]
        assert isinstance(exporter, RealExporter)
        assert exporter.running is not None
        agreed = await asyncio.to_thread(wait_agreement, exporter.running, LONGEST)
        recovery.parts["NRT agrees with the kubelet"] = agreed

    # -- the control plane ---------------------------------------------------------------------------

    async def _filter_follows(self) -> tuple[float, float]:
        """Change the probe node's NRT (its free CPUs flip): when the write was accepted and when
        ``/filter`` first showed it (monotonic)."""
        self.probe_free = 8 if self.probe_free == 0 else 0

        async def write() -> bool:
            current = await self._nrt(PROBE)
            body = probe_nrt(self.probe_free, self.scene.probe_uid)
            if current is None:
                await self.custom.create_cluster_custom_object(*NRTS, body)
            else:
                body["metadata"] = current["metadata"]
                await self.custom.replace_cluster_custom_object(*NRTS, PROBE, body)
            return True

        written = await until(write, "the probe's NRT written")

        async def shown() -> bool:
            return (PROBE in await self.filter.fitting(PROBE_POD, [PROBE])) == (self.probe_free == 8)

        return written, await until(shown, "the extender following the probe's NRT", every=0.005)

    async def _operator_follows(self) -> float:
        """Create an AppGroup; returns when the operator has written its order (monotonic)."""
        self.appgroups += 1
        name = f"after-{self.appgroups}"

        async def create() -> bool:
            await self.custom.create_namespaced_custom_object(*APPGROUPS, appgroup_body(name, {"a": ["b"], "b": []}))
            return True

        async def ordered() -> bool:
            found = await self.custom.get_namespaced_custom_object(*APPGROUPS, name)
            return bool((found.get("status") or {}).get("topologyOrder"))

        await until(create, "an AppGroup created")
        return await until(ordered, "the operator ordering an AppGroup")

    async def _outage(self, recovery: Recovery, compact: bool) -> None:
        """kill -9 the apiserver (after compacting etcd) and start it; then how long the extender and
        the operator take to follow it again, from when it is ready."""
        killed = time.monotonic()
        await asyncio.to_thread(self.scene.plane.kill_apiserver, compact=compact)
        back = await until(self._ready, "the apiserver ready again", every=0.2)
        self.outages.append(back)
        recovery.detail = f"apiserver ready {back - killed:.1f} s after the kill"
        await asyncio.to_thread(self.scene.plane.heal)
        (_, extender), operator = await asyncio.gather(self._filter_follows(), self._operator_follows())
        recovery.parts["extender follows"] = extender - back
        recovery.parts["operator follows"] = operator - back

    async def _ready(self) -> bool:
        configuration = self.scene.kube.configuration
        async with (
            aiohttp.ClientSession() as fresh,  # a new connection each time: the old ones are dead
            fresh.get(f"{configuration.host}/readyz", ssl=_tls(configuration), timeout=READY_TIMEOUT) as r,
        ):
            return r.status == 200 and (await r.text()).strip() == "ok"

    async def apiserver_kill(self, fault: Fault, recovery: Recovery) -> None:
        await self._outage(recovery, compact=False)

    async def watch_expired(self, fault: Fault, recovery: Recovery) -> None:
        before = (await self.custom.list_cluster_custom_object(*NRTS, limit=1))["metadata"]["resourceVersion"]
        # One write after it, so that the compaction passes it: in a quiet moment nothing else may
        # have been written, and a watch from the compacted revision itself is not expired.
        marker = {"metadata": {"generateName": "chaos-watch-expired-"}, "data": {"before": before}}
        await self.core.create_namespaced_config_map("default", marker)
        await self._outage(recovery, compact=True)
        expired = await self._expired(before)
        recovery.detail += f"; a watch from before {'expired (410 Gone)' if expired else 'did NOT expire'}"

    async def _expired(self, version: str) -> bool:
        """A watch of NRTs from ``version`` (before the fault) is refused as expired."""
        try:
            response = await self.custom.list_cluster_custom_object(
                *NRTS, watch=True, resource_version=version, timeout_seconds=1, _preload_content=False
            )
        except client.ApiException as exc:
            return bool(exc.status == 410)
        try:
            return bool(response.status == 410 or b'"code":410' in await response.content.read(4096))
        finally:
            response.release()

    # -- the largest NRT ---------------------------------------------------------------------------

    async def large_nrt(self, fault: Fault, recovery: Recovery) -> None:
        """The largest NRT rewritten every 100 ms for a while; meanwhile, how long a change of the
        probe's ordinary NRT takes to reach ``/filter``."""
        stop = asyncio.Event()
        written: list[float] = []
        writer = asyncio.create_task(changing(self.scene.kube, LARGE, 0.1, stop, written))
        ends = time.monotonic() + LARGE_WINDOW
        latencies = []
        try:
            while time.monotonic() < ends:
                written_at, shown = await self._filter_follows()
                latencies.append(shown - written_at)
                await asyncio.sleep(0.5)
        finally:
            stop.set()
            await writer
        # Not a recovery: how far behind the largest object's writes an ordinary change reached /filter.
        median, longest = statistics.median(latencies), max(latencies)
        recovery.detail = (
            f"{len(written)} writes of the largest NRT in {LARGE_WINDOW:.0f} s; {len(latencies)} changes of another "
            f"NRT reached /filter {median * 1000:.0f} ms (median), {longest * 1000:.0f} ms (longest) after their writes"
        )


def _tls(configuration: client.Configuration) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    return context
