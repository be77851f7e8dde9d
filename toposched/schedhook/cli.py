"""``toposched schedhook``: the scheduler extender (filter, prioritize, bind) for the toposched profile."""

import argparse
import asyncio
import gc
import logging
import ssl
import sys
from datetime import timedelta
from typing import TYPE_CHECKING

from toposched.logs import configure
from toposched.schedhook.settings import SchedhookSettings

if TYPE_CHECKING:  # imported where used: the other commands start without them
    from aiohttp import web

    from toposched.kube import rest
    from toposched.schedhook.extender.acting import Acting
    from toposched.schedhook.extender.coordinator import Coordinator
    from toposched.schedhook.extender.store import ObjectStore

log = logging.getLogger(__name__)
BLIND_EVERY = 5.0
"""Seconds between two judgements of the blind nodes when no filter call asks (the alerts read them)."""
GC_PAUSE = 300.0
"""At most this long (seconds) the collector waits for the first lists. They build millions of
objects that hold no cycles, and each full collection while they grow walks all of them: with it
on, parsing them takes two to three times as long. A start that takes longer (the apiserver away)
collects as usual from then on."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    SchedhookSettings.add_arguments(parser)


async def _serve(settings: SchedhookSettings) -> None:
    import prometheus_client

    from toposched.kube.rest import connect
    from toposched.schedhook.extender.coordinator import Coordinator, ExtenderConfig
    from toposched.schedhook.extender.feed import feed
    from toposched.schedhook.extender.startup import StartUp
    from toposched.schedhook.extender.store import ObjectStore

    # Five watches hold connections for good; binds and patches must not queue behind them.
    async with await connect(pool_size=64) as api:
        store = ObjectStore()
        coordinator = Coordinator(store, api, ExtenderConfig.of(settings))
        start = StartUp()
        gc.disable()  # until Ready (``_synced``)
        ahead = coordinator.view.snapshots.ahead.arrived  # NRTs validated while the lists stream in
        feeding = asyncio.create_task(feed(store, api, lambda: coordinator.warm(start), start, ahead))
        tasks = [] if settings.no_controllers else _controllers(settings, api, store)
        acting = _acting(settings, api, tasks)
        tasks.append(_waking(coordinator, api, acting))
        runners = [await _extender_listener(settings, coordinator, acting)]
        if settings.loopback_port:
            runners.append(await _loopback_listener(settings.loopback_port, coordinator, acting))
        if settings.metrics_port:
            prometheus_client.start_http_server(settings.metrics_port, settings.metrics_address)
        hooks = await _webhooks_listener(settings, coordinator, api)
        if hooks is not None:
            runners.append(hooks)
        try:
            await _synced(store)
            # The synced cluster lives as long as the process: keep the collector from rescanning
            # it during requests (a full collection of thousands of NRTs is a p99 spike).
            gc.collect()
            gc.freeze()
            gc.enable()
            while True:  # the blind-node gauge follows the cluster between filter calls too
                coordinator.view.knowledge.blind_nodes()
                await asyncio.sleep(BLIND_EVERY)
        finally:
            for task in tasks:
                task.cancel()
            for r in runners:
                await r.cleanup()
            feeding.cancel()
            await asyncio.gather(feeding, return_exceptions=True)
            await coordinator.devices.close()


async def _synced(store: "ObjectStore") -> None:
    """Until every kind is listed, with the collector off for at most ``GC_PAUSE`` seconds of it."""
    try:
        await asyncio.wait_for(store.synced.wait(), GC_PAUSE)
    except TimeoutError:
        gc.enable()
        await store.synced.wait()


def _acting(settings: SchedhookSettings, api: "rest.Kube", tasks: list[asyncio.Task[None]]) -> "Acting | None":
    """With --scheduler-lease, who acts: followed from the Lease in a task added to ``tasks``."""
    from toposched.schedhook.extender.acting import Acting, default_identity, follow_lease

    if not settings.scheduler_lease:
        return None
    namespace, _, name = settings.scheduler_lease.rpartition("/")
    acting = Acting(settings.scheduler_identity or default_identity())
    tasks.append(asyncio.create_task(follow_lease(api, namespace or "kube-system", name, acting)))
    log.info("acting only while kube-scheduler %s holds Lease %s/%s", acting.identity, namespace or "kube-system", name)
    return acting


def _waking(coordinator: "Coordinator", api: "rest.Kube", acting: "Acting | None") -> asyncio.Task[None]:
    """The task that wakes the pods the filter refused once room may have freed (only while acting)."""
    from toposched.schedhook.extender.requeue import Requeue, wake_forever
    from toposched.schedhook.extender.roomwatch import RoomWatch

    watch = RoomWatch(coordinator.view)
    return asyncio.create_task(wake_forever(Requeue(coordinator.wakeups, watch, coordinator.view.store, api, acting)))


async def _extender_listener(
    settings: SchedhookSettings, coordinator: "Coordinator", acting: "Acting | None" = None
) -> "web.AppRunner":
    """kube-scheduler's extender calls, over HTTPS from its client certificate only (and, with a
    Lease to follow, only while its own kube-scheduler holds it)."""
    from aiohttp import web

    from toposched.schedhook.extender.acting import acting_only
    from toposched.schedhook.extender.clientauth import require_client, server_context
    from toposched.schedhook.extender.server import Extender

    clients = list(settings.extender_client_names)
    middlewares = [require_client(clients)] + ([acting_only(acting)] if acting is not None else [])
    runner = web.AppRunner(Extender(coordinator).app(middlewares), access_log=None)
    await runner.setup()
    cert, key, ca = settings.extender_tls_cert, settings.extender_tls_key, settings.extender_client_ca
    tls = server_context(str(cert), str(key), str(ca))  # all three checked by run()
    await web.TCPSite(runner, settings.address, settings.port, ssl_context=tls).start()
    log.info("extender listening on %s:%d (HTTPS, clients: %s)", settings.address, settings.port, ", ".join(clients))
    return runner


LOOPBACK = "127.0.0.1"
"""The plain listener's only address: inside a pod, only the pod's own containers reach it."""


async def _loopback_listener(port: int, coordinator: "Coordinator", acting: "Acting | None") -> "web.AppRunner":
    """The extender's calls over plain HTTP on loopback, for the kube-scheduler beside it in its pod.

    kube-scheduler keeps at most two idle connections to an extender, and binds hold connections
    for as long as the apiserver takes: under load nearly every filter and prioritize opened a
    new TLS connection, a handshake per call. A pod's loopback needs no TLS: no other pod, and
    no process of its node, reaches it. Never bound to another address; the acting guard applies."""
    from aiohttp import web

    from toposched.schedhook.extender.acting import acting_only
    from toposched.schedhook.extender.server import Extender

    runner = web.AppRunner(Extender(coordinator).app([acting_only(acting)] if acting else []), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, LOOPBACK, port).start()
    log.info("extender listening on %s:%d (HTTP, loopback only: kube-scheduler in this pod)", LOOPBACK, port)
    return runner


def _controllers(settings: SchedhookSettings, api: "rest.Kube", store: "ObjectStore") -> list[asyncio.Task[None]]:
    """The background work: releasing AppGroup members' scheduling gates in order, and remediation."""
    from toposched.schedhook.controllers.gate_release import release_gates_forever
    from toposched.schedhook.controllers.remediation import remediate_forever

    order_wait = timedelta(seconds=settings.order_wait)
    tasks = [asyncio.create_task(release_gates_forever(api, store.topology_order, order_wait))]
    if not settings.no_remediation:
        tasks.append(asyncio.create_task(remediate_forever(api)))
    return tasks


async def _webhooks_listener(
    settings: SchedhookSettings, coordinator: "Coordinator", api: "rest.Kube"
) -> "web.AppRunner | None":
    """The admission webhooks, over TLS; None without their certificate (they are off)."""
    from aiohttp import web

    from toposched.schedhook.extender.pinning import Pinner
    from toposched.schedhook.webhooks.admission import Rules
    from toposched.schedhook.webhooks.server import Webhooks

    if not (settings.tls_cert and settings.tls_key):
        log.warning("no --tls-cert/--tls-key: admission webhooks are off")
        return None
    webhook_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    webhook_tls.load_cert_chain(settings.tls_cert, settings.tls_key)
    rules = Rules(namespaces=settings.route_namespaces, match_labels=dict(settings.route_labels))
    pinner = Pinner(coordinator, api, settings.dra_pin == "all") if settings.dra_pin != "off" else None
    hooks = web.AppRunner(Webhooks(rules, pinner.patch if pinner else None).app(), access_log=None)
    await hooks.setup()
    address, port = settings.webhook_address, settings.webhook_port
    await web.TCPSite(hooks, address, port, ssl_context=webhook_tls).start()
    log.info("admission webhooks listening on %s:%d (TLS)", address, port)
    return hooks


def run(args: argparse.Namespace) -> int:
    settings = SchedhookSettings.from_args(args)
    if not (settings.extender_tls_cert and settings.extender_tls_key and settings.extender_client_ca):
        print(
            "toposched schedhook: the extender serves HTTPS to kube-scheduler only: give it a serving certificate "
            "(--tls-cert and --tls-key, or --extender-tls-cert and --extender-tls-key) and the CA of "
            "kube-scheduler's client certificate (--extender-client-ca)",
            file=sys.stderr,
        )
        return 2
    configure(settings.log_level)
    asyncio.run(_serve(settings))
    return 0
