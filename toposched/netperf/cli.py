"""``toposched netperf``: measure latency from this node to its peers and record it in the ConfigMap.

Runs next to ``netserver`` in a DaemonSet pod on every node (host network). Each prober
measures only the pairs that start at its own node (see exporter.netperf.plan), so probers
need no coordination and never overwrite each other's keys.
"""

import argparse
import asyncio
import logging
import os
import sys

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node", default=os.environ.get("NODE_NAME"), help="this node's name (default: $NODE_NAME)")
    parser.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE", "default"), help="ConfigMap namespace")
    parser.add_argument("--configmap", default="netperf-metrics", help="ConfigMap to write (default: netperf-metrics)")
    parser.add_argument("--selector", default="", help="label selector of the nodes to measure (default: all)")
    parser.add_argument("--all-pairs", action="store_true", help="measure every node, not one node per zone pair")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per netperf run (default: 2)")
    parser.add_argument("--interval", type=float, default=300.0, help="seconds between rounds (default: 300)")
    parser.add_argument("--once", action="store_true", help="measure one round and exit")
    parser.add_argument("--control-port", type=int, default=12865, help="netserver's control port")
    parser.add_argument("--data-port", type=int, default=12866, help="netserver's data port (fixed for firewalls)")


async def _main(args: argparse.Namespace) -> int:
    from toposched.kube.nodeclient import KubeAPI
    from toposched.netperf.plan import plan
    from toposched.netperf.prober import list_nodes, probe_round

    async with KubeAPI.from_environment() as api:
        while True:
            nodes = await list_nodes(api, args.selector)
            probes = plan(nodes, args.node, all_pairs=args.all_pairs)
            logger.info("round: %d probes from %s", len(probes), args.node)
            done = await probe_round(
                api, probes, args.namespace, args.configmap, args.duration, args.control_port, args.data_port
            )
            if args.once:
                return 0 if done == len(probes) else 1
            await asyncio.sleep(args.interval)


def run(args: argparse.Namespace) -> int:
    if not args.node:
        print("toposched netperf: --node or $NODE_NAME is required", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return asyncio.run(_main(args))
