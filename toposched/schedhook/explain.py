"""``toposched explain``: why each node would or would not take a pod, offline.

Prints per node the verdict and reason, the NUMA zone(s) the kubelet is predicted to use, each
score and the total, computed by the same pure modules as the extender.
"""

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toposched.apis.constants import WEIGHT_NETPERF
from toposched.localfiles import InputError, manifests

if TYPE_CHECKING:
    from toposched.schedhook.placement.dra import Alignment
    from toposched.schedhook.placement.evaluate import NodeResult, PlacementConfig
    from toposched.schedhook.placement.snapshot import Snapshot


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pod", required=True, type=Path, help="the pod to place (YAML)")
    parser.add_argument("--nrt", required=True, type=Path, help="NodeResourceTopology objects (YAML, list or stream)")
    parser.add_argument("--nodes", type=Path, help="Node objects: candidates, zone/region labels, allocatable")
    parser.add_argument("--pods", type=Path, help="pods already bound (for AppGroup neighbours and exclusivity)")
    parser.add_argument("--appgroup", type=Path, help="the pod's AppGroup")
    parser.add_argument("--networktopology", type=Path, help="a NetworkTopology with the costs")
    parser.add_argument("--weights-name", default=WEIGHT_NETPERF, help="weight entry to read costs from")
    parser.add_argument("--strategy", default="MostAllocated", help="NUMA scoring strategy")
    parser.add_argument(
        "--dra",
        type=Path,
        help="ResourceSlices, DeviceClasses and ResourceClaims: the DRA devices the pod's claims get",
    )
    parser.add_argument(
        "--dra-alignment",
        choices=("auto", "strict", "prefer", "off"),
        default="auto",
        help="as the extender's flag: DRA devices off the pod's CPU zones fail the node (strict) or score lowest",
    )
    parser.add_argument("--dra-allocator", default="", help="the DRA allocator helper (default: on PATH)")
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")


def documents(path: Path | None) -> list[dict[str, Any]]:
    return [] if path is None else manifests(path)


def run(args: argparse.Namespace) -> int:
    from toposched.schedhook.placement.evaluate import PlacementConfig, evaluate_pod
    from toposched.schedhook.placement.parse import parse_pod
    from toposched.schedhook.placement.score import STRATEGIES
    from toposched.schedhook.placement.snapshot import object_name, snapshot

    if args.strategy not in STRATEGIES:
        print(f"toposched explain: --strategy must be one of {', '.join(STRATEGIES)}", file=sys.stderr)
        return 1
    try:
        pods = documents(args.pod)
        if len(pods) != 1:
            raise InputError(f"{args.pod}: expected one pod, found {len(pods)}")
        try:
            parse_pod(pods[0])
        except ValueError as exc:
            raise InputError(f"{args.pod}: {exc}") from None
        nodes = documents(args.nodes)
        snap = snapshot(
            nodes=nodes,
            nrts=documents(args.nrt),
            appgroups=documents(args.appgroup),
            networktopologies=documents(args.networktopology),
            pods=documents(args.pods),
            weights_name=args.weights_name,
        )
    except InputError as exc:
        print(f"toposched explain: {exc}", file=sys.stderr)
        return 1
    files = {"Node": args.nodes, "NodeResourceTopology": args.nrt, "AppGroup": args.appgroup}
    for kind, message in snap.skipped:
        where = files.get(kind, args.networktopology)
        print(f"toposched explain: warning: {where}: skipped {kind} {message}", file=sys.stderr)
    named = [name for n in nodes if (name := object_name(n)) is not None]
    candidates = named or sorted({*snap.nrts, *snap.invalid})
    config = PlacementConfig(numa_strategy=args.strategy)
    if args.dra is not None:
        try:
            dra = documents(args.dra)
        except InputError as exc:
            print(f"toposched explain: {exc}", file=sys.stderr)
            return 1
        results = asyncio.run(with_devices(pods[0], candidates, snap, config, dra, args))
    else:
        results = evaluate_pod(pods[0], candidates, snap, config)
    if args.output == "json":
        print(json.dumps([r.to_dict() for r in results], indent=2))
        return 0
    rows = [("NODE", "FIT", "NUMA", "SCORES", "SCORE", "REASON")]
    for r in sorted(results, key=lambda r: (not r.fit, -r.score, r.node)):
        scores = ",".join(f"{k}={v}" for k, v in r.scores.items()) or "-"
        reason = r.reason or (_devices(r.devices) if r.devices is not None else "")
        rows.append((r.node, "yes" if r.fit else "no", ",".join(r.numa_zones) or "-", scores, str(r.score), reason))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:5])) + "  " + row[5])
    return 0


DRA_KINDS = {"ResourceSlice": "resourceslices", "DeviceClass": "deviceclasses", "ResourceClaim": "resourceclaims"}


async def with_devices(
    pod: dict[str, Any],
    candidates: Sequence[str],
    snap: "Snapshot",
    config: "PlacementConfig",
    dra: list[dict[str, Any]],
    args: argparse.Namespace,
) -> list["NodeResult"]:
    """The pod evaluated as the extender's filter does it, its DRA devices judged too: the allocator
    helper fed the files' slices, classes and claims."""
    from toposched.schedhook.extender.allocatorproc import AllocatorProcess
    from toposched.schedhook.extender.devices import Devices
    from toposched.schedhook.extender.eventsink import EventSink
    from toposched.schedhook.extender.store import ObjectStore
    from toposched.schedhook.placement.evaluate import evaluate

    store = ObjectStore()
    for kind, plural in DRA_KINDS.items():
        store.listed(plural, [d for d in dra if d.get("kind") == kind and isinstance(d.get("metadata"), dict)])
        store.mark_synced(plural)
    allocator = AllocatorProcess([args.dra_allocator] if args.dra_allocator else None)
    devices = Devices(store, None, EventSink(None), args.dra_alignment, allocator)
    results = evaluate(pod, candidates, snap, config)
    try:
        await devices.align(pod, "", results, snap.nrts)
    finally:
        await devices.close()
    return results.all()


def _devices(found: "Alignment") -> str:
    said = {"aligned": "DRA devices beside the CPUs", "unpinned": "DRA devices (no pinned CPUs to align with)"}
    return said.get(found.verdict) or f"DRA devices {found.verdict}: {found.reason}"
