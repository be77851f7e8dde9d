"""``toposched exporter`` (the node daemon) and ``toposched nrt`` (print the NRT, no cluster needed).

Every flag defaults to an environment variable with the TOPOSCHED_ prefix (shown in --help).
"""

import argparse
import asyncio
import json
import logging
import os
import sys
from pathlib import Path

DEFAULTS = {
    "sysfs": "/sys",
    "kubelet_config": "/var/lib/kubelet/config.yaml",
    "podresources": "/var/lib/kubelet/pod-resources/kubelet.sock",
    "kubelet_state_dir": "/var/lib/kubelet",
    "period": "10",
    "list_interval": "0.2",
    "fingerprint_method": "with-exclusive-resources",
    "metrics_port": "9091",
    "health_port": "8081",
    # Loopback unless told: the exporter may run on the host network, where every interface is the
    # node's. The chart passes the pod's IP (on the host network, the node's own).
    "metrics_address": "127.0.0.1",
    "health_address": "127.0.0.1",
}


def _env(name: str) -> str:
    return os.environ.get(f"TOPOSCHED_{name.upper()}", DEFAULTS.get(name, ""))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``toposched exporter``."""
    parser.add_argument("--node", default=os.environ.get("NODE_NAME") or _env("node"), help="node name ($NODE_NAME)")
    parser.add_argument(
        "--sysfs", type=Path, default=Path(_env("sysfs")), help="what stands for /sys ($TOPOSCHED_SYSFS)"
    )
    parser.add_argument("--kubelet-config", type=Path, default=Path(_env("kubelet_config")), help="kubelet config file")
    parser.add_argument("--podresources", type=Path, default=Path(_env("podresources")), help="PodResources socket")
    parser.add_argument(
        "--kubelet-state-dir", type=Path, default=Path(_env("kubelet_state_dir")), help="kubelet state dir"
    )
    parser.add_argument("--period", type=float, default=float(_env("period")), help="seconds between full refreshes")
    parser.add_argument(
        "--list-interval", type=float, default=float(_env("list_interval")), help="seconds between List polls (>= 0.1)"
    )
    parser.add_argument(
        "--fingerprint-method", choices=["all", "with-exclusive-resources"], default=_env("fingerprint_method")
    )
    parser.add_argument(
        "--advertise-bandwidth",
        action="store_true",
        default=_env("advertise_bandwidth") == "true",
        help="publish the NICs' speed as the node's network.aware.com/bandwidth",
    )
    parser.add_argument("--metrics-port", type=int, default=int(_env("metrics_port")), help="0 turns metrics off")
    parser.add_argument("--metrics-address", default=_env("metrics_address"), help="metrics listen address")
    parser.add_argument("--health-port", type=int, default=int(_env("health_port")), help="/healthz and /readyz")
    parser.add_argument("--health-address", default=_env("health_address"), help="health listen address")


def run(args: argparse.Namespace) -> int:
    from toposched.exporter.daemon import Exporter, ExporterSettings

    if not args.node:
        print("toposched exporter: --node or $NODE_NAME is required", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = ExporterSettings(
        node=args.node,
        sysfs=args.sysfs,
        kubelet_config=args.kubelet_config if args.kubelet_config.exists() else None,
        podresources=args.podresources,
        kubelet_state_dir=args.kubelet_state_dir,
        period=args.period,
        list_interval=max(0.1, args.list_interval),
        fingerprint_method=args.fingerprint_method,
        advertise_bandwidth=args.advertise_bandwidth,
        metrics_port=args.metrics_port,
        health_port=args.health_port,
        metrics_address=args.metrics_address,
        health_address=args.health_address,
    )
    asyncio.run(Exporter(settings).run())
    return 0


def add_nrt_arguments(parser: argparse.ArgumentParser) -> None:
    """``toposched nrt``."""
    parser.add_argument("--sysfs", type=Path, default=Path("/sys"), help="the directory that stands for /sys")
    parser.add_argument("--node", required=True, help="node name (the NRT's name)")
    parser.add_argument("--podresources", type=Path, help="kubelet PodResources socket (else: estimates)")
    parser.add_argument("--kubelet-config", type=Path, help="kubelet configuration file (else: kubelet defaults)")
    parser.add_argument(
        "--kubelet-state-dir",
        type=Path,
        help="the kubelet's root dir, for its CPU and Memory Manager checkpoints (what init containers hold)",
    )
    parser.add_argument(
        "--fingerprint-method", choices=["all", "with-exclusive-resources"], default="with-exclusive-resources"
    )
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
