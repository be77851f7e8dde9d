"""``toposched exporter`` (the node daemon) and ``toposched nrt`` (print the NRT, no cluster needed).

Every flag of the daemon defaults to an environment variable (``exporter.settings``; named in --help).
"""

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

from toposched.exporter.settings import ExporterSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``toposched exporter``."""
    ExporterSettings.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    settings = ExporterSettings.from_args(args)
    if not settings.node:
        print("toposched exporter: --node or $NODE_NAME is required", file=sys.stderr)
        return 1
    from toposched.exporter.daemon import Exporter

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(Exporter(settings).run())
    return 0


def add_nrt_arguments(parser: argparse.ArgumentParser) -> None:
    """``toposched nrt``: the daemon's flags for what it reads, but neither its variables nor the
    kubelet's paths as defaults: the machine at hand is not a node unless told so."""
    ExporterSettings.add_flag(parser, "sysfs", default=ExporterSettings.sysfs)
    ExporterSettings.add_flag(parser, "node", required=True, note="the NRT's name")
    ExporterSettings.add_flag(parser, "podresources", note="else: estimates")
    ExporterSettings.add_flag(parser, "kubelet_config", note="else: kubelet defaults")
    ExporterSettings.add_flag(
        parser, "kubelet_state_dir", note="its CPU, Memory and device manager checkpoints: what init containers hold"
    )
    ExporterSettings.add_flag(parser, "fingerprint_method", default=ExporterSettings.fingerprint_method)
    parser.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")


async def _podresources(socket: Path) -> tuple[object, object]:
    from toposched.exporter.podresources.client import PodResourcesClient

    client = PodResourcesClient(socket, timeout=5)
    try:
        return await client.allocatable(), await client.list_pods()
    finally:
        await client.close()


def run_nrt(args: argparse.Namespace) -> int:
    import yaml

    from toposched.apis.errors import describe
    from toposched.exporter import checkpoints
    from toposched.exporter.kubeletconfig import KubeletConfigError, load
    from toposched.exporter.podresources.client import PodResourcesError
    from toposched.exporter.sysfs import SysfsError, read_machine
    from toposched.exporter.topology import Inputs, build

    try:
        machine = read_machine(args.sysfs)
        kubelet = load(args.kubelet_config)
        allocatable = pods = None
        if args.podresources is not None:
            allocatable, pods = asyncio.run(_podresources(args.podresources))
    except (SysfsError, KubeletConfigError, PodResourcesError) as exc:
        print(f"toposched nrt: {exc}", file=sys.stderr)
        return 1
    for warning in machine.warnings:
        print(f"toposched nrt: warning: {warning}", file=sys.stderr)
    found = checkpoints.read(args.kubelet_state_dir) if args.kubelet_state_dir is not None else None
    for problem in found.problems if found is not None else ():
        print(f"toposched nrt: warning: ignoring a kubelet checkpoint: {problem}", file=sys.stderr)
    try:
        nrt = build(
            Inputs(
                node=args.node,
                machine=machine,
                kubelet=kubelet,
                allocatable=allocatable,  # type: ignore[arg-type]
                pods=pods,  # type: ignore[arg-type]
                fingerprint_method=args.fingerprint_method,
                checkpoints=found,
            )
        )
    except ValueError as exc:  # e.g. the kubelet reports more memory than a machine has
        for problem in describe(exc).split("; "):
            print(f"toposched nrt: not a NodeResourceTopology: {problem}", file=sys.stderr)
        return 1
    document = nrt.to_dict()
    print(
        json.dumps(document, indent=2) if args.output == "json" else yaml.safe_dump(document, sort_keys=False),
        end="\n" if args.output == "json" else "",
    )
    return 0
