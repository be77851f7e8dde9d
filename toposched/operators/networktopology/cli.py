"""``toposched netcost``: the NetperfCosts weight the operator would publish, from files.

Exit status: 0 when every pair has a cost, 1 for invalid input; unknown pairs are listed in
the output (``unknownPairs``) and do not change the exit status.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from toposched.apis.errors import problems
from toposched.apis.netperf import PERCENTILES, parse
from toposched.apis.networktopology import NetworkTopology
from toposched.localfiles import InputError, manifests
from toposched.operators.networktopology.costs import NodeInfo, compute, node_info


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--networktopology", required=True, metavar="NT.yaml", help="the NetworkTopology manifest")
    parser.add_argument("--configmap", required=True, metavar="CM.yaml", help="the measurement ConfigMap")
    parser.add_argument(
        "--nodes", required=True, metavar="NODES.yaml", help="nodes, e.g. what `kubectl get nodes -o yaml` prints"
    )
    parser.add_argument("--percentile", choices=PERCENTILES, default="p90", help="which measurement drives costs")
    parser.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")


def _one(path: str, kind: str) -> dict[str, Any]:
    found = [d for d in manifests(Path(path)) if d.get("kind") == kind]
    if len(found) != 1:
        raise InputError(f"expected exactly one {kind} in {path}, found {len(found)}")
    return found[0]


def _data(path: str, configmap: dict[str, Any]) -> dict[str, str]:
    """The ConfigMap's data; values as the apiserver would hold them (strings)."""
    data = configmap.get("data") or {}
    if not isinstance(data, dict):
        raise InputError(f"{path}: data: expected a map of keys to strings")
    out = {}
    for key, value in data.items():
        if isinstance(value, dict | list) or value is None:
            raise InputError(f"{path}: data.{key}: expected a string")
        out[str(key)] = str(value)
    return out


def _nodes(path: str) -> list[NodeInfo]:
    nodes: list[NodeInfo] = []
    for i, node in enumerate(manifests(Path(path))):
        if node.get("kind") != "Node":
            continue
        meta, status = node.get("metadata") or {}, node.get("status") or {}
        name = meta.get("name") if isinstance(meta, dict) else None
        labels = meta.get("labels") or {} if isinstance(meta, dict) else None
        capacity = status.get("capacity") or {} if isinstance(status, dict) else None
        where = f"{path}: Node {name if isinstance(name, str) else f'#{i + 1}'}"
        if not isinstance(name, str) or not name:
            raise InputError(f"{where}: metadata.name: expected a name")
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise InputError(f"{where}: metadata.labels: expected a map of strings")
        if not isinstance(capacity, dict):
            raise InputError(f"{where}: status.capacity: expected a map of quantities")
        nodes.append(node_info(name, labels, capacity, warn=lambda why: _warn(f"{path}: {why}")))
    return nodes


def _warn(message: str) -> None:
    print(f"toposched netcost: warning: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    try:
        try:
            nt = NetworkTopology.from_dict(_one(args.networktopology, "NetworkTopology"))
        except ValidationError as exc:
            raise InputError("\n".join(f"{args.networktopology}: {p}" for p in problems(exc))) from None
        data = _data(args.configmap, _one(args.configmap, "ConfigMap"))
        nodes = _nodes(args.nodes)
    except InputError as exc:
        for line in str(exc).splitlines():
            print(f"toposched netcost: {line}", file=sys.stderr)
        return 1
    measurements = parse(data, args.percentile, [n.name for n in nodes])
    computed = compute(nodes, measurements, nt.spec.weights)
    document: dict[str, Any] = {
        "weights": [computed.weight.to_dict()],
        "unknownPairs": [p.to_dict() for p in computed.unknown],
    }
    if measurements.malformed:
        document["ignoredKeys"] = dict(sorted(measurements.malformed.items()))
    if args.output == "json":
        print(json.dumps(document, indent=2))
    else:
        print(yaml.safe_dump(document, sort_keys=False), end="")
    return 0
