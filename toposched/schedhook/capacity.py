"""``toposched capacity``: how many more pods of each shape the cluster takes, where, and why no more.

Against the live cluster (Nodes, NodeResourceTopologies and pods listed once), or offline from
files like ``explain`` (``--nrt``, with ``--nodes`` and ``--pods``). The count is
``placement.capacity``'s: copies admitted one after another by the extender's kubelet prediction.
Bad input -- an unreadable file, a malformed shape, a zero or negative request, a resource no
node has, a shape no node could take even empty -- is one line and exit 2.
"""

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toposched.localfiles import InputError, manifests
from toposched.schedhook.capacityreport import CapacityInputError, Objects

EXIT_BAD_INPUT = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=RESOURCE:AMOUNT,...",
        help="a pod shape, one Guaranteed container (e.g. gpu-train=cpu:8,memory:16Gi,example.com/gpu:1); repeatable",
    )
    parser.add_argument("--pod", action="append", default=[], type=Path, help="pod manifest(s) whose shape to count")
    parser.add_argument("--nrt", type=Path, help="offline: NodeResourceTopology objects (YAML, list or stream)")
    parser.add_argument("--nodes", type=Path, help="offline: Node objects (allocatable, labels, cordons)")
    parser.add_argument("--pods", type=Path, help="offline: the pods bound to the nodes")
    parser.add_argument(
        "--stale-after", type=float, default=30.0, help="seconds an NRT may leave out bound pods before it is stale"
    )
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="also draw nodes x NUMA zones to this PNG")
    parser.add_argument(
        "--serve", type=int, metavar="PORT", help="count the live cluster every --every seconds, as metrics on PORT"
    )
    parser.add_argument("--every", type=float, default=60.0, help="seconds between two counts with --serve")


def run(args: argparse.Namespace) -> int:
    from toposched.schedhook import capacityreport as report

    try:
        shapes = read_shapes(args.shape, args.pod)
        if args.serve is not None:
            return serve(shapes, args)
        objects = read_offline(args) if args.nrt is not None else asyncio.run(read_live())
        result = report.count(objects, shapes, args.stale_after, time.time())
        if args.plot is not None:
            from toposched.schedhook.capacityplot import plot

            plot(result, args.plot)
    except (InputError, CapacityInputError) as exc:
        print(f"toposched capacity: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for warning in result.warnings:
        print(f"toposched capacity: warning: {warning}", file=sys.stderr)
    print(report.render(result, args.output))
    return 0


def read_shapes(inline: Sequence[str], pods: Sequence[Path]) -> list[Any]:
    from toposched.schedhook.placement.shapes import ShapeError, inline_shape, pod_shape

    try:
        shapes = [inline_shape(text) for text in inline]
        for path in pods:
            shapes.extend(pod_shape(body, str(path)) for body in manifests(path))
    except ShapeError as exc:
        raise CapacityInputError(str(exc)) from None
    if not shapes:
        raise CapacityInputError("no shape to count: give --shape NAME=cpu:8,memory:16Gi,... or --pod FILE")
    names = [s.name for s in shapes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CapacityInputError(f"shape {twice[0]} is given twice: each shape needs its own name")
    return shapes


def read_offline(args: argparse.Namespace) -> Objects:
    def read(path: Path | None) -> list[dict[str, Any]]:
        return [] if path is None else manifests(path)

    return Objects(
        read(args.nodes),
        read(args.nrt),
        read(args.pods),
        {"Node": args.nodes, "NodeResourceTopology": args.nrt, "Pod": args.pods},
    )


async def read_live() -> Objects:
    """Nodes, NRTs and the pods that hold resources, listed once (page by page)."""
    from toposched.apis.constants import NRT_GROUP, NRT_PLURAL, NRT_VERSION
    from toposched.kube import rest
    from toposched.kube.watch import ListError, list_objects

    async with await rest.connect() as api:
        try:
            nodes, _ = await list_objects(api.lister(rest.path("", "v1", "nodes")))
            nrts, _ = await list_objects(api.lister(rest.path(NRT_GROUP, NRT_VERSION, NRT_PLURAL)))
            pods, _ = await list_objects(
                api.lister(rest.path("", "v1", "pods")),
                field_selector="spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed",
            )
        except (ListError, rest.ApiError) as exc:
            raise CapacityInputError(f"cannot list the cluster's objects: {exc}") from None
    return Objects(nodes, nrts, pods, dict.fromkeys(("Node", "NodeResourceTopology", "Pod")))


def serve(shapes: Sequence[Any], args: argparse.Namespace) -> int:
    """Count the live cluster again and again, publishing the gauges of ``capacitymetrics``; a
    failed count is logged and tried again at the next turn (the last-success gauge stops)."""
    import logging

    import prometheus_client

    from toposched.schedhook import capacitymetrics
    from toposched.schedhook import capacityreport as report

    logger = logging.getLogger("toposched.capacity")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    prometheus_client.start_http_server(args.serve)
    while True:
        started = time.monotonic()
        try:
            objects = asyncio.run(read_live())
            result = report.count(objects, shapes, args.stale_after, time.time())
            capacitymetrics.publish(result, time.monotonic() - started, time.time())
        except CapacityInputError as exc:
            logger.warning("capacity not counted: %s", exc)
        time.sleep(max(1.0, args.every - (time.monotonic() - started)))
