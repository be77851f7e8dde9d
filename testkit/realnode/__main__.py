"""``python -m testkit.realnode``: real kubelet nodes of the local cluster from the shell.

    add NAME... [topology/settings options]   start nodes (default: 2 NUMA zones x 4 CPUs)
    ensure COUNT [--prefix P]                 add P0..P<COUNT-1> where missing (make cluster)
    reset NAME [topology/settings options]    restart a node from a clean state, maybe reshaped
    remove NAME...                            stop nodes and delete everything they had
    list [--json]                             the real nodes and their state
    usage [--seconds S]                       RSS and CPU of each node's processes
    down                                      remove every real node (make cluster-down)
    check                                     root, tools and binaries present? (exit 1 if not)

Topology: ``--topology FILE`` (YAML as Topology.to_dict writes it) or ``--zones``,
``--cores-per-zone``, ``--memory-per-zone``, ``--smt``, ``--hugepages-2mi``, ``--hugepages-1gi``.
Settings: ``--settings FILE`` (YAML as KubeletSettings.to_dict writes it) plus overrides.
Devices: ``--device NAME[:OPTION...]=DEVICE,...``, one per resource (see ``add --help``).
DRA devices: ``--dra DRIVER[:POOL[/SLICE]]=DEVICE,...``, one per ResourceSlice (see ``add --help``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from testkit.realnode.cluster import LocalCluster
from testkit.realnode.devices import NodeDevices
from testkit.realnode.dra import NodeDRA
from testkit.realnode.errors import RealNodeError
from testkit.realnode.node import (
    RealNode,
    add_node,
    default_topology,
    down,
    get_node,
    list_nodes,
    missing_tools,
    remove_node,
    reset_node,
)
from testkit.realnode.settings import KubeletSettings
from testkit.realnode.topology import Topology, format_bytes


def _load_yaml(path: str) -> Any:
    import yaml

    return yaml.safe_load(Path(path).read_text())


def _shape_options(parser: argparse.ArgumentParser) -> None:
    shape = parser.add_argument_group("topology")
    shape.add_argument("--topology", metavar="FILE", help="YAML topology (zones, threadsPerCore, distances)")
    shape.add_argument("--zones", type=int, help="number of NUMA zones (uniform topology)")
    shape.add_argument("--cores-per-zone", type=int, help="physical cores per zone")
    shape.add_argument("--memory-per-zone", help="memory per zone, e.g. 4Gi")
    shape.add_argument("--smt", action="store_true", help="2 threads per core")
    shape.add_argument("--hugepages-2mi", type=int, default=0, help="2Mi hugepages per zone")
    shape.add_argument("--hugepages-1gi", type=int, default=0, help="1Gi hugepages per zone")
    kubelet = parser.add_argument_group("kubelet settings")
    kubelet.add_argument("--settings", metavar="FILE", help="YAML kubelet settings (KubeletSettings.to_dict)")
    kubelet.add_argument("--cpu-manager-policy", choices=["none", "static"])
    kubelet.add_argument("--reserved-cpus", help="reservedSystemCPUs, e.g. 0 or 0,4")
    kubelet.add_argument("--memory-manager-policy", choices=["None", "Static"])
    kubelet.add_argument("--topology-manager-policy", choices=["none", "best-effort", "restricted", "single-numa-node"])
    kubelet.add_argument("--topology-manager-scope", choices=["container", "pod"])
    kubelet.add_argument(
        "--topology-manager-option",
        action="append",
        default=[],
        metavar="K=V",
        help="e.g. prefer-closest-numa-nodes=true",
    )
    kubelet.add_argument(
        "--cpu-manager-option", action="append", default=[], metavar="K=V", help="e.g. full-pcpus-only=true"
    )
    devices = parser.add_argument_group(
        "devices (served to the kubelet by the node's device plugin)",
        "--device NAME[:OPTION...]=DEVICE,DEVICE,... -- one extended resource and its devices; repeatable.\n"
        "OPTION: preferred (the plugin offers GetPreferredAllocation), prestart (it asks for\n"
        "PreStartContainer). DEVICE: [ID@]ZONES[!] -- ZONES a NUMA zone (0), zones joined by +\n"
        "(0+1: between two zones) or - (no topology reported); ! an unhealthy device; ID defaults\n"
        "to gpu-0, gpu-1... after the resource name. Nothing after =: a resource without devices.\n"
        "Examples: example.com/gpu=0,0,1,1 (two GPUs per zone), example.com/nic=0+1,0+1,\n"
        "example.com/gpu:preferred=0,1! (zone 1's GPU unhealthy), example.com/fpga=-",
    )
    devices.add_argument("--device", action="append", default=[], metavar="SPEC", help="a resource and its devices")
    dra = parser.add_argument_group(
        "DRA devices (published as ResourceSlices by the node's DRA driver)",
        "--dra DRIVER[:POOL[/SLICE]]=DEVICE,DEVICE,... -- one ResourceSlice and its devices; repeatable.\n"
        "POOL defaults to the node's name, SLICE to s0, s1... DEVICE: [NAME@]NUMA[&NUMA...][#PCIEROOT]\n"
        "-- NUMA an int (resource.kubernetes.io/numaNode, -1 too), ATTRIBUTE=INT (dra.net/numaNode=1,\n"
        "gpu.nvidia.com/numa=0) or - (none); PCIEROOT resource.kubernetes.io/pcieRoot; NAME defaults to\n"
        "gpu-0, gpu-1... after the driver's first label. Examples: gpu.example.com=0,0,1,1,\n"
        "nic.example.com:nics=dra.net/numaNode=0#pci0000:00,dra.net/numaNode=-1",
    )
    dra.add_argument("--dra", action="append", default=[], metavar="SPEC", help="a ResourceSlice and its devices")
    parser.add_argument("--timeout", type=float, default=90, help="seconds to wait for each node (default 90)")


def _topology(args: argparse.Namespace, current: Topology | None) -> Topology | None:
    if args.topology:
        return Topology.from_dict(_load_yaml(args.topology))
    shaped = any(v is not None for v in (args.zones, args.cores_per_zone, args.memory_per_zone))
    if not shaped and not args.smt and not args.hugepages_2mi and not args.hugepages_1gi:
        return current
    base = default_topology()
    return Topology.uniform(
        zones=args.zones or len(base.zones),
        cores_per_zone=args.cores_per_zone or base.zones[0].cores,
        memory_per_zone=args.memory_per_zone or format_bytes(base.zones[0].memory),
        threads_per_core=2 if args.smt else 1,
        hugepages_2mi=args.hugepages_2mi,
        hugepages_1gi=args.hugepages_1gi,
    )


def _devices(args: argparse.Namespace) -> NodeDevices | None:
    """The ``--device`` specs (None: none given, keep what there is)."""
    if getattr(args, "no_devices", False):
        return NodeDevices()
    return NodeDevices.parse(args.device) if args.device else None


def _dra(args: argparse.Namespace) -> NodeDRA | None:
    """The ``--dra`` specs (None: none given, keep what there is)."""
    if getattr(args, "no_dra", False):
        return NodeDRA()
    return NodeDRA.parse(args.dra) if args.dra else None


def _pairs(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep:
            raise SystemExit(f"expected KEY=VALUE, got {value!r}")
        out[key] = val
    return out


def _settings(args: argparse.Namespace, current: KubeletSettings | None) -> KubeletSettings | None:
    data: dict[str, Any] = current.to_dict() if current else {}
    if args.settings:
        data.update(_load_yaml(args.settings) or {})
    overrides = {
        "cpuManagerPolicy": args.cpu_manager_policy,
        "reservedSystemCPUs": args.reserved_cpus,
        "memoryManagerPolicy": args.memory_manager_policy,
        "topologyManagerPolicy": args.topology_manager_policy,
        "topologyManagerScope": args.topology_manager_scope,
    }
    data.update({k: v for k, v in overrides.items() if v is not None})
    if args.topology_manager_option:
        data["topologyManagerPolicyOptions"] = _pairs(args.topology_manager_option)
    if args.cpu_manager_option:
        data["cpuManagerPolicyOptions"] = _pairs(args.cpu_manager_option)
    if not data and current is None:
        return None
    return KubeletSettings.from_dict(data)


def _summary(node: RealNode) -> dict[str, Any]:
    ready = "?"
    obj = None
    try:
        obj = node.cluster.get_json("node", node.name)
    except Exception:  # the status must print even when the apiserver is down
        obj = None
    if obj is not None:
        for condition in obj["status"].get("conditions", []):
            if condition["type"] == "Ready":
                ready = "Ready" if condition["status"] == "True" else "NotReady"
    s = node.settings
    plugin, driver = node.device_plugin, node.dra_driver
    return {
        "name": node.name,
        "kubelet": "running" if node.kubelet_running() else "stopped",
        "ready": ready if obj is not None else "no Node object",
        "nodeIP": node.record.node_ip,
        "topology": node.topology.describe(),
        "policies": f"cpu={s.cpu_manager_policy}(reserved {s.reserved_system_cpus or '-'}) "
        f"memory={s.memory_manager_policy} topology={s.topology_manager_policy}/{s.topology_manager_scope}",
        "devices": plugin.devices().specs(),
        "devicePlugin": "running" if plugin.running() else "stopped" if plugin.devices().resources else "none",
        "dra": driver.devices().specs(),
        "draDriver": "running" if driver.running() else "stopped" if driver.devices().slices else "none",
        "dir": str(node.layout.root),
    }


def _print_list(rows: list[dict[str, Any]], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    for row in rows:
        print(f"{row['name']}: {row['ready']}, kubelet {row['kubelet']}, IP {row['nodeIP']}")
        print(f"  {row['topology']}\n  {row['policies']}")
        if row["devices"]:
            print(f"  devices ({row['devicePlugin']} plugin): {' '.join(row['devices'])}")
        if row["dra"]:
            print(f"  DRA devices ({row['draDriver']} driver): {' '.join(row['dra'])}")


def _shape(node: RealNode) -> str:
    devices = f"; devices {node.devices.describe()}" if node.devices.resources else ""
    dra = f"; DRA {node.dra.describe()}" if node.dra.slices else ""
    return node.topology.describe() + devices + dra


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testkit.realnode", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    raw = argparse.RawDescriptionHelpFormatter  # keeps the lines of the --device help
    add = sub.add_parser("add", help="start real nodes", formatter_class=raw)
    add.add_argument("names", nargs="+")
    _shape_options(add)
    ensure = sub.add_parser(
        "ensure", help="have PREFIX0..PREFIX<COUNT-1> running (adds what is missing)", formatter_class=raw
    )
    ensure.add_argument("count", type=int)
    ensure.add_argument("--prefix", default="realnode-")
    _shape_options(ensure)
    reset = sub.add_parser("reset", help="restart a node from a clean state, optionally reshaped", formatter_class=raw)
    reset.add_argument("name")
    reset.add_argument("--keep-pods", action="store_true", help="do not force-delete the node's pods first")
    reset.add_argument("--no-devices", action="store_true", help="drop the node's devices (and its device plugin)")
    reset.add_argument("--no-dra", action="store_true", help="drop the node's DRA devices (and its DRA driver)")
    _shape_options(reset)
    remove = sub.add_parser("remove", help="stop nodes and delete everything they had")
    remove.add_argument("names", nargs="+")
    listing = sub.add_parser("list", help="the real nodes")
    listing.add_argument("--json", action="store_true")
    usage = sub.add_parser("usage", help="memory and CPU of each real node's processes")
    usage.add_argument("--seconds", type=float, default=30, help="CPU sampling window (default 30)")
    sub.add_parser("down", help="remove every real node")
    sub.add_parser("check", help="are root, the tools and the binaries there?")
    args = parser.parse_args(argv)

    try:
        if args.command in ("add", "ensure"):
            names = args.names if args.command == "add" else [f"{args.prefix}{i}" for i in range(args.count)]
            existing = {n.name for n in list_nodes()} if args.command == "ensure" else set()
            topology, settings, devices, dra = _topology(args, None), _settings(args, None), _devices(args), _dra(args)
            for name in names:
                if name in existing:
                    node = get_node(name)
                    if not node.kubelet_running():
                        print(f"{name}: not running; restarting it", file=sys.stderr)
                        reset_node(name, timeout=args.timeout)
                    continue
                started = time.monotonic()
                node = add_node(name, topology, settings, devices=devices, dra=dra, timeout=args.timeout)
                print(f"{name}: Ready in {time.monotonic() - started:.1f} s - {_shape(node)}")
        elif args.command == "reset":
            current = get_node(args.name)
            started = time.monotonic()
            node = reset_node(
                args.name,
                _topology(args, current.topology),
                _settings(args, current.settings),
                devices=_devices(args),
                dra=_dra(args),
                drain=not args.keep_pods,
                timeout=args.timeout,
            )
            print(f"{node.name}: reset, Ready in {time.monotonic() - started:.1f} s - {_shape(node)}")
        elif args.command == "remove":
            for name in args.names:
                remove_node(name)
                print(f"{name}: removed")
        elif args.command == "list":
            _print_list([_summary(n) for n in list_nodes()], as_json=args.json)
        elif args.command == "usage":
            nodes = list_nodes()
            first = {n.name: n.usage() for n in nodes}
            time.sleep(args.seconds)
            for n in nodes:
                rss, cpu = n.usage()
                share = 100 * (cpu - first[n.name][1]) / args.seconds
                print(f"{n.name}: {len(n.pids())} processes, RSS {rss / 2**20:.0f} MiB, CPU {share:.1f}% of one core")
        elif args.command == "down":
            removed = down()
            print(f"removed real nodes: {', '.join(removed)}" if removed else "no real node")
        elif args.command == "check":
            problems = [str(m) for m in missing_tools()]
            if os.geteuid() != 0:
                problems.insert(0, "real nodes need root")
            try:
                LocalCluster().bin_dir()
            except RealNodeError as exc:
                problems.append(str(exc))
            for problem in problems:
                print(problem, file=sys.stderr)
            return 1 if problems else 0
    except (RealNodeError, ValueError) as exc:
        print(f"realnode: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
