"""``toposched exporter``: keep this node's NodeResourceTopology current.

Publishes at start, every ``period`` seconds, and when allocations change: the kubelet's state
files are watched (mtime) and PodResources List is polled at a bounded rate. Changes are
coalesced to at most one write per second; nothing is written when the content is unchanged.
If PodResources fails, the last good data is kept (never a flap to estimates), readiness turns
false and calls back off; before the first success the NRT is published from estimates and
says so.
"""

import asyncio
import contextlib
import logging
import threading
import time

import prometheus_client
from prometheus_client import Counter, Gauge, Histogram

from toposched.exporter import checkpoints
from toposched.exporter.kubeletconfig import KubeletConfigError
from toposched.exporter.podresources.client import PodResourcesClient, PodResourcesError
from toposched.exporter.publication import Publication
from toposched.exporter.publisher import NRTS, NodeGoneError, Publisher
from toposched.exporter.restarts import RestartHold, SocketId
from toposched.exporter.settings import ExporterSettings
from toposched.exporter.sysfs import SysfsError
from toposched.exporter.topology import Allocatable, PodUse
from toposched.kube.nodeclient import KubeAPI
from toposched.kube.outage import Outage

logger = logging.getLogger(__name__)

API_FAILURES = Counter("toposched_exporter_api_failures_total", "Failed calls, by API.", ["api"])
UPDATE_LATENCY = Histogram(
    "toposched_exporter_update_latency_seconds",
    "From a detected change to the NRT written.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10),
)
LAST_SUCCESS = Gauge("toposched_exporter_last_success_timestamp_seconds", "When the NRT was last confirmed current.")
PODRESOURCES_SECONDS = Histogram(
    "toposched_exporter_podresources_call_seconds", "PodResources call latency.", ["method"]
)
RETRY_FIRST = 0.5
RETRY_MAX = 2.0
"""Seconds between publish attempts while the apiserver is away: one write, and the NRT should
be current again within a few seconds of the apiserver being back."""
STATE_FILES = (checkpoints.CPU_STATE, checkpoints.MEMORY_STATE, checkpoints.DEVICE_STATE)
PLUGIN_DIR = "device-plugins"
"""The device plugins' sockets, under the kubelet's state dir."""
CONFIRM_POLL = 0.1
"""Seconds before a changed List is read again to confirm it. The kubelet admits a pod manager by
manager (devices, then CPUs, then memory), and List shows each part as it is made: a List read in
between lists the pod (so the pods fingerprint counts it) without its CPUs, which would then look
free. A List is published once two reads in a row agree."""
CONFIRM_WITHIN = 1.0
"""A List that still changes after this long is published anyway (a node admitting pods without pause)."""
RELEASE_WRITE_INTERVAL = 0.2
"""Seconds between writes while every change since the last one only let pods go (PodResources
lists fewer pods, the others as they were). The kubelet gives a pod's CPUs to the next pod as soon
as it lets go of it; an NRT counting them up to a second longer (``min_write_interval``) makes a
placement predict another zone, or refuse the node. Other changes still coalesce to one write per
``min_write_interval``."""
PLUGIN_SETTLE = 3.0
"""Seconds during which every poll reads the allocatable list again after a plugin's socket came
or went: the kubelet drops a stopped plugin's devices when their stream ends, a moment after its
socket goes, and writes no checkpoint then (the period would be the only other trigger)."""

HOLDING = "pods it no longer runs count as holding their resources until it has admitted its first pods"


class Exporter:
    def __init__(self, settings: ExporterSettings) -> None:
        self.settings = settings
        self.changed = asyncio.Event()
        self.first_poll = asyncio.Event()
        self.change_seen: float | None = None
        self.pods: list[PodUse] | None = None
        self.pods_digest: int | None = None
        self.unconfirmed: tuple[int, float] | None = None
        """A changed List waiting for the next read to agree (its digest, when first seen)."""
        self.allocatable: Allocatable | None = None
        self.allocatable_stale = True
        """Read the allocatable list again at the next poll: devices come and go (health, plugins)."""
        self.allocatable_until = 0.0
        """Until then (monotonic), every poll reads the allocatable list again (``PLUGIN_SETTLE``)."""
        self.podresources_ok = False
        self.last_success = 0.0
        self.last_loop = time.monotonic()
        self.last_write = 0.0
        self.publication = Publication(settings)
        self.restart = RestartHold()
        self.holding = True
        """Whether the last poll found the restart hold on (a change publishes again)."""
        self.only_releases = False
        """Every change since the last write only let pods go (``RELEASE_WRITE_INTERVAL``)."""

    def mark_changed(self, why: str, release: bool = False) -> None:
        if not self.changed.is_set():
            logger.debug("change: %s", why)
            self.change_seen = time.monotonic()
            self.only_releases = release
        else:
            self.only_releases &= release
        self.changed.set()

    def write_interval(self) -> float:
        """The least time between two writes, for the changes waiting now."""
        if self.only_releases:
            return min(RELEASE_WRITE_INTERVAL, self.settings.min_write_interval)
        return self.settings.min_write_interval

    async def watch_state_files(self) -> None:
        seen: dict[str, float | None] = {}
        sockets = self.plugin_sockets()
        while True:
            for name in (*STATE_FILES, PLUGIN_DIR):
                path = self.settings.kubelet_state_dir / name
                try:
                    mtime: float | None = path.stat().st_mtime
                except OSError:
                    mtime = None
                if name in seen and seen[name] != mtime and name != PLUGIN_DIR:
                    self.allocatable_stale |= name == checkpoints.DEVICE_STATE  # written when devices change
                    self.mark_changed(f"{name} changed")
                elif name in seen and seen[name] != mtime:  # a socket, or a checkpoint written there
                    now = self.plugin_sockets()
                    if now != sockets:
                        self.allocatable_until = time.monotonic() + PLUGIN_SETTLE
                    sockets = now
                seen[name] = mtime
            await asyncio.sleep(0.25)

    def socket_id(self) -> SocketId:
        """The PodResources socket's identity (the kubelet makes a new one at each start)."""
        try:
            found = self.settings.podresources.stat()
        except OSError:
            return None
        return found.st_ino, found.st_ctime_ns

    def plugin_sockets(self) -> frozenset[str]:
        """The names of the sockets in the kubelet's device-plugins directory (the kubelet's own too)."""
        with contextlib.suppress(OSError):
            return frozenset(p.name for p in (self.settings.kubelet_state_dir / PLUGIN_DIR).iterdir() if p.is_socket())
        return frozenset()

    async def poll_pods(self, podresources: PodResourcesClient) -> None:
        delay = self.settings.list_interval
        while True:
            try:
                pods = await podresources.list_pods()
                if self.allocatable_stale or not self.podresources_ok or time.monotonic() < self.allocatable_until:
                    self.allocatable_stale = False
                    allocatable = await podresources.allocatable()
                    if allocatable != self.allocatable:
                        self.allocatable = allocatable
                        self.mark_changed("PodResources allocatable changed")
                self.podresources_ok = True
                if self.restart.answered(time.time(), self.socket_id()):
                    logger.warning("the kubelet restarted (its PodResources socket is new); %s", HOLDING)
                delay = max(0.1, self.settings.list_interval)  # at most 10 calls per second
                digest = hash(tuple(pods))
                if digest != self.pods_digest:
                    now = time.monotonic()
                    if self.pods_digest is None or (  # the first List: publish from it at once
                        self.unconfirmed is not None
                        and (self.unconfirmed[0] == digest or now - self.unconfirmed[1] >= CONFIRM_WITHIN)
                    ):
                        released = self.pods is not None and set(pods) < set(self.pods)
                        self.pods, self.pods_digest, self.unconfirmed = pods, digest, None
                        self.mark_changed("PodResources List changed", release=released)
                    else:
                        if self.unconfirmed is None or self.unconfirmed[0] != digest:
                            self.unconfirmed = (digest, self.unconfirmed[1] if self.unconfirmed else now)
                        delay = CONFIRM_POLL
                else:
                    self.unconfirmed = None
            except PodResourcesError as exc:
                API_FAILURES.labels("podresources").inc()
                if self.podresources_ok:
                    logger.warning("%s; keeping the last data", exc)
                if exc.unreachable and self.restart.down():
                    logger.warning("the kubelet is unreachable; %s", HOLDING)
                self.podresources_ok = False
                # Backing off spares a busy kubelet; one that is away is only a socket to try again.
                delay = exc.retry_after if exc.unreachable else min(30.0, max(exc.retry_after, delay * 2))
            holding = self.restart.holding(time.time())
            if holding != self.holding:
                self.holding = holding
                self.mark_changed(f"restart hold {'on' if holding else 'over'}")
            self.first_poll.set()
            await asyncio.sleep(delay)

    async def periodic(self) -> None:
        while True:
            await asyncio.sleep(self.settings.period)
            self.allocatable_stale = True  # a plugin gone writes no checkpoint: look at least this often
            self.mark_changed("period")

    def watch_own_nrt(self, api: KubeAPI) -> threading.Event:
        """Publish again at once when this node's NRT is deleted (by hand, or by the garbage
        collector with a recreated Node), not a period later: the scheduler side is blind to the
        node meanwhile. A watch of that one object, in a daemon thread; set the event to stop it."""
        loop = asyncio.get_running_loop()
        stop = threading.Event()

        def seen(kind: str) -> None:
            if kind in ("DELETED", "START"):
                loop.call_soon_threadsafe(self.mark_changed, f"NRT watch: {kind}")

        threading.Thread(
            target=api.watch_object, args=(NRTS, self.settings.node, seen, stop), name="nrt-watch", daemon=True
        ).start()
        return stop

    async def run(self) -> None:
        if self.settings.metrics_port:
            prometheus_client.start_http_server(self.settings.metrics_port, self.settings.metrics_address)
        health = None
        if self.settings.health_port:
            health = await asyncio.start_server(self._health, self.settings.health_address, self.settings.health_port)
        async with KubeAPI.from_environment() as api:
            podresources = PodResourcesClient(
                self.settings.podresources, observe=lambda m, t: PODRESOURCES_SECONDS.labels(m).observe(t)
            )
            publisher = Publisher(api, self.settings.node)
            tasks = [
                asyncio.create_task(self.poll_pods(podresources)),
                asyncio.create_task(self.watch_state_files()),
                asyncio.create_task(self.periodic()),
            ]
            stop_watch = self.watch_own_nrt(api)
            # Publish first from the kubelet's answer rather than from estimates that flip a moment later.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.first_poll.wait(), 5)
            self.mark_changed("start")
            backoff = RETRY_FIRST
            outage = Outage(logger, "publishing")
            try:
                while True:
                    await self.changed.wait()
                    wait = self.last_write + self.write_interval() - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)  # coalesce: at most one write per interval
                    self.changed.clear()
                    seen = self.change_seen
                    self.last_loop = time.monotonic()
                    try:
                        if await self.publication.publish(publisher, self.allocatable, self.pods, self.restart):
                            self.last_write = time.monotonic()
                            if seen is not None:
                                UPDATE_LATENCY.observe(self.last_write - seen)
                        self.last_success = time.time()
                        LAST_SUCCESS.set(self.last_success)
                        outage.ok()
                        backoff = RETRY_FIRST
                    except NodeGoneError as exc:
                        logger.warning("%s; not publishing", exc)
                    except (SysfsError, KubeletConfigError) as exc:
                        API_FAILURES.labels("local").inc()
                        logger.error("cannot build the NRT: %s", exc)
                    except Exception as exc:  # the apiserver may be restarting: retry soon, say it once
                        API_FAILURES.labels("kubernetes").inc()
                        outage.failed(exc, f"retrying every {RETRY_MAX:.0f}s at most")
                        await asyncio.sleep(backoff)
                        backoff = min(RETRY_MAX, backoff * 2)
                        self.mark_changed("retry")
            finally:
                stop_watch.set()
                for task in tasks:
                    task.cancel()
                await podresources.close()
                if health is not None:
                    health.close()

    def healthy(self) -> bool:
        """Alive: the main loop turned recently (it turns at least every period)."""
        return time.monotonic() - self.last_loop < 3 * self.settings.period + 5

    def ready(self) -> bool:
        """Ready: the NRT was confirmed current recently and PodResources answers."""
        return self.podresources_ok and time.time() - self.last_success < 3 * self.settings.period + 5

    async def _health(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readline()).decode(errors="replace").split()
        path = request[1] if len(request) > 1 else "/"
        ok = {"/healthz": self.healthy, "/readyz": self.ready}.get(path)
        status = "404 Not Found" if ok is None else ("200 OK" if ok() else "503 Service Unavailable")
        body = status.split(" ", 1)[1].encode()
        writer.write(f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        await writer.drain()
        writer.close()
