"""``toposched schedhook``: the scheduler extender (filter, prioritize, bind) for the toposched profile."""

import argparse
import asyncio
import gc
import logging
import os
import ssl
import sys
from datetime import timedelta

from toposched.apis.constants import WEIGHT_NETPERF
from toposched.kube.listen import default_address

DEFAULT_CLIENT = "toposched-scheduler"
"""The common name of kube-scheduler's client certificate in the chart (of a release named toposched)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--address",
        default=env("TOPOSCHED_ADDRESS") or default_address(),
        help="listen address of the extender and the webhooks (default: all interfaces in a pod, else 127.0.0.1)",
    )
    parser.add_argument("--port", type=int, default=int(env("TOPOSCHED_PORT", "8888")), help="extender port (HTTPS)")
    parser.add_argument("--metrics-port", type=int, default=int(env("TOPOSCHED_METRICS_PORT", "9092")))
    parser.add_argument(
        "--metrics-address",
        default=env("TOPOSCHED_METRICS_ADDRESS"),
        help="metrics listen address (default: --address)",
    )
    parser.add_argument(
        "--webhook-address",
        default=env("TOPOSCHED_WEBHOOK_ADDRESS"),
        help="webhooks listen address (default: --address); on the host network the extender may stay "
        "on loopback while the apiserver reaches the webhooks at the node's address",
    )
    parser.add_argument("--weights-name", default=env("TOPOSCHED_WEIGHTS_NAME", WEIGHT_NETPERF))
    parser.add_argument("--strategy", default=env("TOPOSCHED_NUMA_STRATEGY", "MostAllocated"))
    parser.add_argument(
        "--reservation-timeout",
        type=float,
        default=float(env("TOPOSCHED_RESERVATION_TIMEOUT", "60")),
        help="seconds a bound pod's request stays reserved if its node's NRT does not change",
    )
    parser.add_argument("--webhook-port", type=int, default=int(env("TOPOSCHED_WEBHOOK_PORT", "9443")))
    parser.add_argument("--tls-cert", default=env("TOPOSCHED_TLS_CERT"), help="webhook serving certificate (PEM)")
    parser.add_argument("--tls-key", default=env("TOPOSCHED_TLS_KEY"), help="webhook serving key (PEM)")
    parser.add_argument(
        "--extender-tls-cert",
        default=env("TOPOSCHED_EXTENDER_TLS_CERT"),
        help="extender serving certificate (PEM; default: --tls-cert)",
    )
    parser.add_argument(
        "--extender-tls-key",
        default=env("TOPOSCHED_EXTENDER_TLS_KEY"),
        help="extender serving key (default: --tls-key)",
    )
    parser.add_argument(
        "--extender-client-ca",
        default=env("TOPOSCHED_EXTENDER_CLIENT_CA"),
        help="CA of kube-scheduler's client certificate (PEM); the extender answers no one else",
    )
    parser.add_argument(
        "--extender-client-name",
        action="append",
        default=[],
        help="name (common name or DNS name) of an allowed client certificate; repeatable "
        f"(default: $TOPOSCHED_EXTENDER_CLIENT_NAME, else {DEFAULT_CLIENT})",
    )
    parser.add_argument(
        "--route-namespace", action="append", default=[], help="send pods of this namespace to toposched (repeatable)"
    )
    parser.add_argument(
        "--route-label", action="append", default=[], metavar="KEY=VALUE", help="send pods with this label to toposched"
    )
    parser.add_argument(
        "--order-wait",
        type=float,
        default=float(env("TOPOSCHED_ORDER_WAIT", "30")),
        help="seconds a gated AppGroup pod waits for earlier workloads before it is released anyway",
    )
    parser.add_argument(
        "--bind-wait",
        type=float,
        default=float(env("TOPOSCHED_BIND_WAIT", "0.25")),
        help="seconds a filter waits for the binds of earlier pods, so it sees their NUMA reservations",
    )
    parser.add_argument(
        "--no-remediation", action="store_true", help="leave pods that failed with TopologyAffinityError alone"
    )
    parser.add_argument(
        "--missing-nrt",
        choices=["pass", "fail"],
        default=env("TOPOSCHED_MISSING_NRT", "pass"),
        help="nodes without a NodeResourceTopology: pass with the lowest score, or fail",
    )


async def _serve(args: argparse.Namespace) -> None:
    import prometheus_client
    from aiohttp import web

    from toposched.kube.rest import connect
    from toposched.schedhook.controllers.gate_release import release_gates_forever
    from toposched.schedhook.controllers.remediation import remediate_forever
    from toposched.schedhook.extender.cache import ClusterCache
    from toposched.schedhook.extender.clientauth import require_client, server_context
    from toposched.schedhook.extender.feed import feed
    from toposched.schedhook.extender.server import Extender
    from toposched.schedhook.placement.evaluate import PlacementConfig
    from toposched.schedhook.webhooks.admission import Rules
    from toposched.schedhook.webhooks.server import Webhooks

    # Five watches hold connections for good; binds and patches must not queue behind them.
    async with await connect(pool_size=64) as api:
        cache = ClusterCache(args.weights_name, args.reservation_timeout)
        feeding = asyncio.create_task(feed(cache, api))
        placement = PlacementConfig(numa_strategy=args.strategy, missing_nrt_fits=args.missing_nrt == "pass")
        extender = Extender(cache, api, placement, args.bind_wait)
        clients = allowed_clients(args)
        runner = web.AppRunner(extender.app([require_client(clients)]), access_log=None)
        await runner.setup()
        cert, key = extender_keypair(args)
        tls = server_context(str(cert), str(key), args.extender_client_ca)  # all three checked by run()
        await web.TCPSite(runner, args.address, args.port, ssl_context=tls).start()
        if args.metrics_port:
            prometheus_client.start_http_server(args.metrics_port, args.metrics_address or args.address)
        log = logging.getLogger(__name__)
        log.info("extender listening on %s:%d (HTTPS, clients: %s)", args.address, args.port, ", ".join(clients))
        runners = [runner]
        tasks = [
            asyncio.create_task(release_gates_forever(api, cache.topology_order, timedelta(seconds=args.order_wait)))
        ]
        if not args.no_remediation:
            tasks.append(asyncio.create_task(remediate_forever(api)))
        if args.tls_cert and args.tls_key:
            webhook_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            webhook_tls.load_cert_chain(args.tls_cert, args.tls_key)
            labels = dict(item.split("=", 1) for item in args.route_label)
            rules = Rules(namespaces=args.route_namespace, match_labels=labels)
            hooks = web.AppRunner(Webhooks(rules).app(), access_log=None)
            await hooks.setup()
            webhook_address = args.webhook_address or args.address
            await web.TCPSite(hooks, webhook_address, args.webhook_port, ssl_context=webhook_tls).start()
            runners.append(hooks)
            log.info("admission webhooks listening on %s:%d (TLS)", webhook_address, args.webhook_port)
        else:
            log.warning("no --tls-cert/--tls-key: admission webhooks are off")
        try:
            await cache.synced.wait()
            # The synced cluster lives as long as the process: keep the collector from rescanning
            # it during requests (a full collection of thousands of NRTs is a p99 spike).
            gc.collect()
            gc.freeze()
            await asyncio.Event().wait()
        finally:
            for task in tasks:
                task.cancel()
            for r in runners:
                await r.cleanup()
            feeding.cancel()
            await asyncio.gather(feeding, return_exceptions=True)


def extender_keypair(args: argparse.Namespace) -> tuple[str | None, str | None]:
    return args.extender_tls_cert or args.tls_cert, args.extender_tls_key or args.tls_key


def allowed_clients(args: argparse.Namespace) -> list[str]:
    return list(args.extender_client_name) or [os.environ.get("TOPOSCHED_EXTENDER_CLIENT_NAME") or DEFAULT_CLIENT]


def run(args: argparse.Namespace) -> int:
    cert, key = extender_keypair(args)
    if not (cert and key and args.extender_client_ca):
        print(
            "toposched schedhook: the extender serves HTTPS to kube-scheduler only: give it a serving certificate "
            "(--tls-cert and --tls-key, or --extender-tls-cert and --extender-tls-key) and the CA of "
            "kube-scheduler's client certificate (--extender-client-ca)",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_serve(args))
    return 0
