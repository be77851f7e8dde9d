"""The extender's cold start, step by step: process start -> Ready against N kwok nodes with NRTs
and N x k bound pods.

The cluster is filled once (nodes ``cs-00000`` on, each with its NRT, and ``k`` pods bound to it
directly, in namespace ``coldstart``); a later run with more nodes only adds the missing ones, so
one cluster serves 10,000 and then 20,000 nodes. Each start runs ``toposched schedhook`` alone
(no kube-scheduler: nothing calls it), waits for /readyz, reads its start-up breakdown from
/metrics (``toposched_extender_start_*``: per kind the list's wall time, bytes, objects, parse and
store time; the table fill; Ready) and stops it. Figures are medians of the starts.

    python -m bench.coldstart --nodes 10000 --starts 3     # needs `make cluster`
"""

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
from kubernetes_asyncio import client

from bench.harness import Harness, NodeSpec, SetupError
from testkit.builders import pod_body
from testkit.cluster import free_port
from testkit.extender import ready, schedhook_tls_args
from testkit.nrt import nrt
from testkit.paths import REPO

NAMESPACE = "coldstart"
TAG = "coldstart"
PREFIX = "cs-"
START = "toposched_extender_start_"


def node_name(i: int) -> str:
    return f"{PREFIX}{i:05d}"


async def _existing(h: Harness) -> set[str]:
    """The names of the bench's nodes already there (a page at a time)."""
    names: set[str] = set()
    token = None
    while True:  # raw JSON: the client's models of 20,000 nodes take minutes to build here
        answer = await h.core.list_node(
            label_selector=f"toposched-bench={TAG}", limit=2000, _continue=token, _preload_content=False
        )
        page = orjson.loads(await answer.read())
        names.update(n["metadata"]["name"] for n in page["items"])
        token = page["metadata"].get("continue")
        if not token:
            return names


async def populate(h: Harness, nodes: int, pods_per_node: int) -> dict[str, Any]:
    """Nodes ``cs-00000``..``cs-<nodes-1>`` with NRTs and ``pods_per_node`` pods bound to each,
    created where missing (nodes beyond ``nodes`` are left as they are)."""
    started = time.monotonic()
    have = await _existing(h)
    rng = random.Random(7)
    wanted = [node_name(i) for i in range(nodes)]
    shapes = {name: nrt("", rng) for name in wanted}  # drawn for every node: the same NRTs at any size
    missing = [n for n in wanted if n not in have]
    specs = [NodeSpec(n, {"cpu": "128", "memory": "512Gi", "pods": "250"}, nrt=shapes[n]) for n in missing]
    await h.create_nodes(specs, TAG)
    try:
        await h.namespace(NAMESPACE)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    bodies = [
        pod_body(f"{n}-{j}", cpu=1, memory="1Gi", node_name=n, container="c", image="example.invalid/c:1")
        for n in missing
        for j in range(pods_per_node)
    ]
    await h.create_pods(NAMESPACE, bodies)
    return {"created_nodes": len(missing), "created_pods": len(bodies), "seconds": round(time.monotonic() - started)}


def start_figures(text: str) -> dict[str, float]:
    """``toposched_extender_start_*`` samples of a /metrics page, keyed ``metric{labels}`` without
    the prefix (``seconds{step="list_nodes"}`` -> ``seconds.list_nodes``)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(START):
            continue
        name, value = line.rsplit(" ", 1)
        metric, _, labels = name.removeprefix(START).partition("{")
        label = labels.rstrip("}").partition('="')[2].rstrip('"')
        out[f"{metric}.{label}" if label else metric] = float(value)
    return out


async def start_once(h: Harness, within: float, log: str, source: Path = REPO) -> dict[str, float]:
    """One cold start of the extender alone (the code in ``source``): seconds from spawning it to
    /readyz, and its breakdown."""
    port, metrics = free_port(), free_port()
    args = [sys.executable, "-m", "toposched", "schedhook", "--address", "127.0.0.1", "--port", str(port)]
    args += ["--metrics-port", str(metrics), "--no-remediation", "--no-controllers", *schedhook_tls_args(h.pki)]
    started = time.monotonic()
    proc = _spawn(args, source, h.env, h.work / log)
    try:
        while not await asyncio.to_thread(ready, port, h.pki):
            if time.monotonic() - started > within or proc.poll() is not None:
                raise SetupError(f"the extender was not ready within {within:.0f} s; see {h.work / log}")
            await asyncio.sleep(0.05)
        spawned_to_ready = time.monotonic() - started
        page = await asyncio.to_thread(_get, f"http://127.0.0.1:{metrics}/metrics")
        return {"spawn_to_ready": round(spawned_to_ready, 2), **start_figures(page)}
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _spawn(args: list[str], source: Path, env: dict[str, str], log: Path) -> "subprocess.Popen[bytes]":
    """``args`` run from ``source``: its ``toposched`` is the one imported."""
    with log.open("wb") as out:
        return subprocess.Popen(args, cwd=source, env=env, stdout=out, stderr=subprocess.STDOUT)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read().decode())


def medians(starts: list[dict[str, float]]) -> dict[str, float]:
    """Per figure, the median over the starts that report it."""
    keys = sorted({k for s in starts for k in s})
    return {k: round(statistics.median(s[k] for s in starts if k in s), 3) for k in keys}


def run(
    kubeconfig: Path, work: Path, nodes: int, pods_per_node: int = 1, starts: int = 3, before: Path | None = None
) -> dict[str, Any]:
    """Fill the cluster to ``nodes`` nodes, then ``starts`` cold starts; every start and the medians.
    With ``before`` (a checkout of other code), as many starts of it, taking turns with this code's,
    so that a busy spell of the machine falls on both."""
    sources = {"after": REPO} if before is None else {"before": before, "after": REPO}

    async def main() -> dict[str, Any]:
        async with Harness(kubeconfig, work) as h:
            filled = await populate(h, nodes, pods_per_node)
            present = len(await _existing(h))
            runs: dict[str, list[dict[str, float]]] = {label: [] for label in sources}
            within = 120 + nodes * 0.02
            for i in range(starts):
                for label, source in sources.items():
                    try:
                        runs[label].append(await start_once(h, within, f"coldstart-{nodes}-{label}-{i}.log", source))
                    except SetupError:  # counted as not Ready within the time allowed
                        runs[label].append({"spawn_to_ready": within, "not_ready": 1.0})
                    await asyncio.sleep(5)  # the apiserver lets go of the last start's watches
            out: dict[str, Any] = {"nodes": present, "pods_per_node": pods_per_node, "filled": filled}
            return out | {label: {"starts": done, "median": medians(done)} for label, done in runs.items()}

    return asyncio.run(main())


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.coldstart", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods-per-node", type=int, default=1)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the figures here as JSON too")
    parser.add_argument("--before", type=Path, help="a checkout of other code, started in turns with this one")
    args = parser.parse_args()
    from bench.__main__ import cluster_kubeconfig, install_crds
    from bench.harness import bin_dir

    kubeconfig = cluster_kubeconfig()
    install_crds(kubeconfig, Path(bin_dir()))
    measured = run(
        kubeconfig,
        Path(tempfile.mkdtemp(prefix="toposched-coldstart-")),
        args.nodes,
        args.pods_per_node,
        args.starts,
        args.before,
    )
    text = json.dumps(measured, indent=2)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
