"""``toposched order FILE``: the placement order of an AppGroup manifest, as the operator computes it.

Exit status: 0 for a valid spec, 1 for invalid input (message on stderr), 2 for a dependency
cycle (the cycle on stderr, the condensed order on stdout).
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toposched.apis.appgroup import AppGroup, SortingAlgorithm
from toposched.apis.errors import problems
from toposched.apis.limits import MAX_FILE_BYTES
from toposched.localfiles import InputError, manifests
from toposched.operators.appgroup.toposort import InvalidSpecError, build_graph, describe_cycles, sort_graph


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="AppGroup manifest (YAML or JSON); - reads standard input")
    parser.add_argument(
        "--algorithm",
        choices=[a.value for a in SortingAlgorithm],
        help="override spec.topologySortingAlgorithm",
    )
    parser.add_argument("-o", "--output", choices=["text", "json"], default="text", help="output format")


def _load(path: str) -> dict[str, Any]:
    if path == "-":  # bounded like a file: one character more than the limit says it is too large
        text = sys.stdin.read(MAX_FILE_BYTES + 1)
        if len(text) > MAX_FILE_BYTES:
            raise InputError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
        documents = manifests(Path(path), text)
    else:
        documents = manifests(Path(path))
    appgroups = [d for d in documents if d.get("kind") == "AppGroup"]
    if len(appgroups) != 1:
        raise InputError(f"expected exactly one AppGroup in {path}, found {len(appgroups)}")
    return appgroups[0]


def run(args: argparse.Namespace) -> int:
    try:
        appgroup = AppGroup.from_dict(_load(args.file))
        graph = build_graph(appgroup.spec)
    except ValidationError as exc:
        for problem in problems(exc):
            print(f"toposched order: {args.file}: {problem}", file=sys.stderr)
        return 1
    except (InputError, InvalidSpecError) as exc:
        print(f"toposched order: {args.file}: {exc}", file=sys.stderr)
        return 1
    algorithm = SortingAlgorithm(args.algorithm) if args.algorithm else appgroup.spec.topology_sorting_algorithm
    result = sort_graph(graph, algorithm)
    names = dict(zip(graph.selectors, graph.names, strict=True))
    if args.output == "json":
        document = {
            "name": appgroup.name,
            "algorithm": algorithm.value,
            "order": [{"index": i + 1, "name": names[s], "selector": s} for i, s in enumerate(result.order)],
            "cycles": result.cycles,
        }
        print(json.dumps(document, indent=2))
    else:
        print("\n".join(names[s] for s in result.order))
    if result.cycles:
        print(f"toposched order: {describe_cycles(result.cycles)}", file=sys.stderr)
        return 2
    return 0
