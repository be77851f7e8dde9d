"""``toposched netperf``: measure latency from this node to its peers and record it in the ConfigMap.

Runs next to ``netserver`` in a DaemonSet pod on every node (host network). Each prober
measures only the pairs that start at its own node (see exporter.netperf.plan), so probers
need no coordination and never overwrite each other's keys.
"""

import argparse
import asyncio
import logging
import sys

from toposched.netperf.settings import ProberSettings

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    ProberSettings.add_arguments(parser)


async def _main(settings: ProberSettings) -> int:
    from toposched.kube.nodeclient import KubeAPI
    from toposched.netperf.plan import plan
    from toposched.netperf.prober import list_nodes, probe_round

    async with KubeAPI.from_environment() as api:
        while True:
            nodes = await list_nodes(api, settings.selector)
            probes = plan(nodes, settings.node, all_pairs=settings.all_pairs)
            logger.info("round: %d probes from %s", len(probes), settings.node)
            done = await probe_round(
                api,
                probes,
                settings.namespace,
                settings.configmap,
                settings.duration,
                settings.control_port,
                settings.data_port,
            )
            if settings.once:
                return 0 if done == len(probes) else 1
            await asyncio.sleep(settings.interval)


def run(args: argparse.Namespace) -> int:
    settings = ProberSettings.from_args(args)
    if not settings.node:
        print("toposched netperf: --node or $NODE_NAME is required", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return asyncio.run(_main(settings))
