"""``make bench``: the benchmarks, then the reference report.

The run's figures go to bench/results/results.json; merged into docs/benchmarks/results.json
(``bench.reference``: the sections run replace theirs, the others stay), they make
docs/benchmarks/report.md and its PNG plots, the latest run of every section. ``--only`` runs a
subset of the sections, ``--full`` the larger sizes and more repetitions, ``--render`` only
renders the report again. Needs the local control plane (``make cluster``) and its binaries.
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
    flame,
    harness,
    networktopology,
    placement,
    realnodes,
    reference,
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
"""This run's figures (raw, not committed)."""
DOCS = REPO / "docs" / "benchmarks"
"""The reference: results.json, report.md and the plots."""
SECTIONS = reference.SECTIONS


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


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--full", action="store_true", help="larger sizes and more repetitions (hours)")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    parser.add_argument(
        "--render", action="store_true", help="only render docs/benchmarks/report.md from docs/benchmarks/results.json"
    )
    parser.add_argument(
        "--real-nodes",
        type=int,
        default=8,
        help="real kubelet nodes for the NUMA and device scenarios (default 8; 0: simulated kubelets only)",
    )
    args = parser.parse_args()
    args.only = set(args.only.split(","))
    if args.only - set(SECTIONS):
        parser.error(f"unknown sections: {', '.join(sorted(args.only - set(SECTIONS)))}")
    return args


def render(results: dict[str, Any]) -> None:
    """The reference report and its plots from ``results`` (the merged reference)."""
    text = report.render(results, DOCS)
    (DOCS / "report.md").write_text(text)
    print(text)


def main() -> int:
    args = arguments()
    if args.render:
        render(reference.load(DOCS / "results.json"))
        return 0
    kubeconfig = cluster_kubeconfig()
    if args.only & {"numa", "devices", "dra", "smt"} and args.real_nodes:
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
    run = measure(kubeconfig, work, args.only, args.full, args.real_nodes)
    (RESULTS / "results.json").write_text(reference.dump(run))
    merged = reference.merge(reference.load(DOCS / "results.json"), run)
    (DOCS / "results.json").write_text(reference.dump(merged))
    render(merged)
    print(f"bench: wrote {DOCS}/ (this run alone in {RESULTS}/results.json; logs in {work})", file=sys.stderr)
    return 0


class Run:
    """The figures of one run, by section, each section with when and how it ran."""

    def __init__(self, full: bool, real_nodes: int) -> None:
        self.info = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "full": full,
            "real_nodes": real_nodes,
            "version": __version__,
            "versions": versions(),
            "machine": machine(),
        }
        self.sections: dict[str, dict[str, Any]] = {}

    def step(self, section: str, name: str, call: Callable[[], Any]) -> None:
        """``call``'s figures as ``name`` of ``section``, with the seconds it took (None: it measured
        nothing, and the section keeps its last figures)."""
        self.steps(section, name, lambda: None if (figures := call()) is None else {name: figures})

    def steps(self, section: str, name: str, call: Callable[[], dict[str, Any] | None]) -> None:
        """The figures ``call`` returns by name, into ``section``; the seconds it took as ``name``'s."""
        started = time.monotonic()
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        try:
            figures = call()
        except (harness.SetupError, RealNodeError) as exc:  # a dead kubelet says so, with its log
            sys.exit(f"bench: {name}: {exc}")
        if figures is None:
            print(f"bench: {name} measured nothing; the reference keeps its {section} section", file=sys.stderr)
            return
        entry = self.sections.setdefault(section, {"run": {**self.info, "seconds": {}}, "figures": {}})
        entry["figures"].update(figures)
        entry["run"]["seconds"][name] = round(time.monotonic() - started, 1)

    def results(self) -> dict[str, Any]:
        return {"sections": self.sections}


def measure(kubeconfig: Path, work: Path, only: set[str], full: bool, real_nodes: int) -> dict[str, Any]:
    """The sections in ``only``; a section that measured nothing here (real nodes left out) is not in the run."""
    run = Run(full, real_nodes)
    if "extender" in only:  # first: a latency tail measured after the cluster steps is their load
        run.step("extender", "schedhook", lambda: schedhook.run(nodes=5000, repeats=200))
        run.step("extender", "schedhook_dra", lambda: schedhook_dra.run(nodes=1000, repeats=200))
        run.step("extender", "capacity", lambda: capacity.run(nodes=5000, repeats=3))
        run.step("extender", "flame", lambda: flame.run(kubeconfig, 1000, 1000, DOCS))
    if "components" in only:
        components(run, kubeconfig, work, full)
    if "numa" in only:  # the scenarios on real nodes (real_nodes), then the simulated ones
        run.steps(
            "numa", "placement", lambda: placement.run(kubeconfig, work, full, network=False, real_nodes=real_nodes)
        )
    if "network" in only:
        run.steps("network", "placement", lambda: placement.run(kubeconfig, work, full, numa=False, real_nodes=0))
    if "devices" in only and real_nodes:
        run.step("devices", "devices", lambda: devices.run(kubeconfig, work, full, real_nodes))
    if "dra" in only and real_nodes:
        run.step("dra", "dra", lambda: dra.run(kubeconfig, work, full, real_nodes))
    if "smt" in only and real_nodes:
        run.step("smt", "smt", lambda: smt.run(kubeconfig, work, full, real_nodes))
    if "scale" in only:

        def partial(curve: dict[str, Any]) -> None:
            (RESULTS / "scale.partial.json").write_text(json.dumps(curve, indent=2))

        run.step("scale", "scale", lambda: scale.measured(scale.run(kubeconfig, work, full, measured_so_far=partial)))
    return run.results()


def components(run: Run, kubeconfig: Path, work: Path, full: bool) -> None:
    run.step("components", "appgroup_sort", lambda: appgroup_sort.run(repeats=41 if full else 15))
    run.step(
        "components",
        "appgroup_latency",
        lambda: appgroup_latency.run(kubeconfig, work / "operator.log", samples=200 if full else 60),
    )
    run.step("components", "networktopology_recompute", lambda: networktopology.run_pure(repeats=21 if full else 9))
    run.step(
        "components",
        "networktopology_latency",
        lambda: networktopology.run_cluster(
            kubeconfig, work / "operator-nt.log", nodes=300 if full else 100, samples=100 if full else 30
        ),
    )
    run.step("components", "exporter_scan", exporter.run_scan)
    run.step(
        "components",
        "exporter_daemon",
        lambda: exporter.run_daemon(kubeconfig, samples=100 if full else 30, idle_seconds=60 if full else 20),
    )


if __name__ == "__main__":
    raise SystemExit(main())
