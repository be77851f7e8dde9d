"""``toposched schedhook``: the scheduler extender (filter, prioritize, bind) for the toposched profile."""

import argparse
import asyncio
import logging
import os

from apis.constants import WEIGHT_NETPERF


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument("--address", default=env("TOPOSCHED_ADDRESS", "0.0.0.0"), help="listen address")
    parser.add_argument("--port", type=int, default=int(env("TOPOSCHED_PORT", "8888")), help="extender port")
    parser.add_argument("--metrics-port", type=int, default=int(env("TOPOSCHED_METRICS_PORT", "9092")))
    parser.add_argument("--weights-name", default=env("TOPOSCHED_WEIGHTS_NAME", WEIGHT_NETPERF))
    parser.add_argument("--strategy", default=env("TOPOSCHED_NUMA_STRATEGY", "LeastAllocated"))
    parser.add_argument(
        "--reservation-timeout",
        type=float,
        default=float(env("TOPOSCHED_RESERVATION_TIMEOUT", "60")),
        help="seconds a bound pod's request stays reserved if its node's NRT does not change",
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
    from kubernetes_asyncio import client, config
    from kubernetes_asyncio.config.config_exception import ConfigException

    from schedhook.cache import ClusterCache
    from schedhook.placement.evaluate import Config
    from schedhook.server import Extender

    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)
    except ConfigException:
        await config.load_kube_config(client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        cache = ClusterCache(api, args.weights_name, args.reservation_timeout)
        cache.start()
        placement = Config(numa_strategy=args.strategy, missing_nrt_fits=args.missing_nrt == "pass")
        runner = web.AppRunner(Extender(cache, api, placement).app(), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, args.address, args.port).start()
        if args.metrics_port:
            prometheus_client.start_http_server(args.metrics_port)
        logging.getLogger(__name__).info("extender listening on %s:%d", args.address, args.port)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()
            await cache.close()


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_serve(args))
    return 0
