"""``make bench``: every benchmark, then bench/results/ (results.json, report.md and PNG plots).

The quick run (default) takes about 16 minutes on two cores, 7 of them on real kubelet nodes
(``--real-nodes 0``: simulated kubelets only); ``--full`` runs the larger sizes
and more repetitions. Needs the local control plane (``make cluster``) and its binaries.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import (
    appgroup_latency,
    appgroup_sort,
    capacity,
    devices,
    dra,
    exporter,
    harness,
    networktopology,
    placement,
    realnodes,
    report,
    scale,
    schedhook,
    schedhook_dra,
    smt,
)
from testkit.realnode import RealNodeError
from toposched import __version__

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
SECTIONS = ("components", "extender", "numa", "devices", "dra", "smt", "network", "scale")


def machine() -> dict[str, Any]:
    import psutil

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
    }


def versions() -> dict[str, str]:
    out = {}
    for line in (REPO / "hack" / "versions.env").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            out[key.removesuffix("_VERSION").lower()] = value.strip()
    return out


def cluster_kubeconfig() -> Path:
    status = subprocess.run([str(REPO / "hack" / "cluster.sh"), "status"], capture_output=True, text=True)
    if status.returncode != 0:
        sys.exit("bench: the local control plane is not up; run `make cluster` first")
    return REPO / ".cluster" / "kubeconfig"


def install_crds(kubeconfig: Path, bin_dir: Path) -> None:
    """The project's CRDs: a fresh cluster has none (applying them again changes nothing)."""
    kubectl = [str(bin_dir / "kubectl"), "--kubeconfig", str(kubeconfig)]
    crds = str(REPO / "crds")
    for args in (["apply", "--server-side", "-f", crds], ["wait", "--for=condition=Established", "-f", crds]):
        done = subprocess.run([*kubectl, *args, "--timeout=60s"], capture_output=True, text=True)
        if done.returncode != 0:
            raise harness.SetupError(f"installing the CRDs: {done.stderr.strip()}")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--full", action="store_true", help="larger sizes and more repetitions (about an hour)")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    parser.add_argument("--render", action="store_true", help="only render the report from bench/results/results.json")
    parser.add_argument(
        "--real-nodes",
        type=int,
        default=8,
        help="real kubelet nodes for the NUMA and device scenarios (default 8; 0: simulated kubelets only)",
    )
    args = parser.parse_args()
    if args.render:
        text = report.render(json.loads((RESULTS / "results.json").read_text()), RESULTS)
        (RESULTS / "report.md").write_text(text)
        print(text)
        return 0
    only = set(args.only.split(","))
    if only - set(SECTIONS):
        parser.error(f"unknown sections: {', '.join(sorted(only - set(SECTIONS)))}")
    kubeconfig = cluster_kubeconfig()
    if only & {"numa", "devices", "dra", "smt"} and args.real_nodes:
        try:
            realnodes.require_real_nodes()
        except harness.SetupError as exc:
            sys.exit(f"bench: {exc}")
    try:
        install_crds(kubeconfig, Path(harness.bin_dir()))
    except harness.SetupError as exc:
        sys.exit(f"bench: {exc}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="toposched-bench-"))
    full = args.full
    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "full": full,
        "version": __version__,
        "versions": versions(),
        "machine": machine(),
        "seconds": {},
    }

    def step(name: str, call: Callable[[], Any]) -> None:
        started = time.monotonic()
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        try:
            results[name] = call()
        except (harness.SetupError, RealNodeError) as exc:  # a dead kubelet says so, with its log
            sys.exit(f"bench: {name}: {exc}")
        results["seconds"][name] = round(time.monotonic() - started, 1)

    if "extender" in only:  # first: a latency tail measured after the cluster steps is their load
        step("schedhook", lambda: schedhook.run(nodes=5000, repeats=200))
        step("schedhook_dra", lambda: schedhook_dra.run(nodes=1000, repeats=200))
        step("capacity", lambda: capacity.run(nodes=5000, repeats=3))
    if "components" in only:
        step("appgroup_sort", lambda: appgroup_sort.run(repeats=41 if full else 15))
        step(
            "appgroup_latency",
            lambda: appgroup_latency.run(kubeconfig, work / "operator.log", samples=200 if full else 60),
        )
        step("networktopology_recompute", lambda: networktopology.run_pure(repeats=21 if full else 9))
        step(
            "networktopology_latency",
            lambda: networktopology.run_cluster(
                kubeconfig, work / "operator-nt.log", nodes=300 if full else 100, samples=100 if full else 30
            ),
        )
        step("exporter_scan", exporter.run_scan)
        step(
            "exporter_daemon",
            lambda: exporter.run_daemon(kubeconfig, samples=100 if full else 30, idle_seconds=60 if full else 20),
        )
    if "numa" in only or "network" in only:

        def quality() -> dict[str, Any]:
            return placement.run(
                kubeconfig, work, full, numa="numa" in only, network="network" in only, real_nodes=args.real_nodes
            )

        step("placement", quality)
        results.update(results.pop("placement"))
    if "devices" in only and args.real_nodes:
        step("devices", lambda: devices.run(kubeconfig, work, full, args.real_nodes))
    if "dra" in only and args.real_nodes:
        step("dra", lambda: dra.run(kubeconfig, work, full, args.real_nodes))
    if "smt" in only and args.real_nodes:
        step("smt", lambda: smt.run(kubeconfig, work, full, args.real_nodes))
    if "scale" in only:

        def partial(curve: dict[str, Any]) -> None:
            (RESULTS / "scale.partial.json").write_text(json.dumps(curve, indent=2))

        step("scale", lambda: scale.run(kubeconfig, work, full, measured_so_far=partial))
    (RESULTS / "results.json").write_text(json.dumps(results, indent=2))
    text = report.render(results, RESULTS)
    (RESULTS / "report.md").write_text(text)
    print(text)
    print(f"bench: wrote {RESULTS}/ (logs of the processes under test in {work})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
