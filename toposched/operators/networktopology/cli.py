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

from toposched.apis.netperf import PERCENTILES, parse
from toposched.apis.networktopology import NetworkTopology
from toposched.operators.networktopology.costs import NodeInfo, compute, node_info


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--networktopology", required=True, metavar="NT.yaml", help="the NetworkTopology manifest")
    parser.add_argument("--configmap", required=True, metavar="CM.yaml", help="the measurement ConfigMap")
    parser.add_argument(
        "--nodes", required=True, metavar="NODES.yaml", help="nodes, e.g. what `kubectl get nodes -o yaml` prints"
    )
    parser.add_argument("--percentile", choices=PERCENTILES, default="p90", help="which measurement drives costs")
    parser.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")


def _documents(path: str) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(Path(path).read_text()):
        if isinstance(doc, dict) and doc.get("kind", "").endswith("List"):
            docs.extend(doc.get("items") or [])
        elif isinstance(doc, dict):
            docs.append(doc)
    return docs


def _one(path: str, kind: str) -> dict[str, Any]:
    found = [d for d in _documents(path) if d.get("kind") == kind]
    if len(found) != 1:
        raise ValueError(f"expected exactly one {kind} in {path}, found {len(found)}")
    return found[0]


def run(args: argparse.Namespace) -> int:
    try:
        nt = NetworkTopology.from_dict(_one(args.networktopology, "NetworkTopology"))
        data = _one(args.configmap, "ConfigMap").get("data") or {}
        nodes: list[NodeInfo] = []
        for node in _documents(args.nodes):
            if node.get("kind") == "Node":
                meta = node.get("metadata") or {}
                capacity = (node.get("status") or {}).get("capacity") or {}
                nodes.append(node_info(meta["name"], meta.get("labels") or {}, capacity))
    except (OSError, yaml.YAMLError, ValueError, KeyError, ValidationError) as exc:
        print(f"toposched netcost: {exc}", file=sys.stderr)
        return 1
    measurements = parse({str(k): str(v) for k, v in data.items()}, args.percentile, [n.name for n in nodes])
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
