"""``make bench``: run the benchmarks and write bench/results/ (a JSON of every figure and a report).

Needs the local control plane for the cluster scenarios; start it with ``make cluster``.
"""

import argparse
import json
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import appgroup_latency, appgroup_sort, exporter, networktopology, schedhook, throughput
from toposched import __version__

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"


def machine() -> dict[str, Any]:
    import os

    import psutil

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
    }


def cluster_kubeconfig() -> Path:
    status = subprocess.run([str(REPO / "hack" / "cluster.sh"), "status"], capture_output=True, text=True)
    if status.returncode != 0:
        sys.exit("bench: the local control plane is not up; run `make cluster` first")
    return REPO / ".cluster" / "kubeconfig"


def report(results: dict[str, Any]) -> str:
    lines = [f"# toposched benchmarks ({results['when']})", ""]
    lines += [f"toposched {results['version']}, {results['machine']}", ""]
    sort = results["appgroup_sort"]
    lines += [
        f"## AppGroup sort: {sort['workloads']} workloads, {sort['edges']} dependencies (pure, no cluster)",
        "",
        "| step | median ms | min | max |",
        "| --- | ---: | ---: | ---: |",
        "| build graph (validation included) | {median:.2f} | {min:.2f} | {max:.2f} |".format(**sort["build_graph_ms"]),
    ]
    lines += [
        f"| sort {name} | {s['median']:.2f} | {s['min']:.2f} | {s['max']:.2f} |" for name, s in sort["sort_ms"].items()
    ]
    lat = results["appgroup_latency"]["spec_to_status_ms"]
    lines += [
        "",
        f"## AppGroup spec change -> status visible via watch ({results['appgroup_latency']['workloads']} workloads)",
        "",
        "| samples | median ms | p99 ms | min | max |",
        "| ---: | ---: | ---: | ---: | ---: |",
        f"| {lat['n']} | {lat['median']:.1f} | {lat['p99']:.1f} | {lat['min']:.1f} | {lat['max']:.1f} |",
        "",
    ]
    pure = results["networktopology_recompute"]
    r = pure["recompute_ms"]
    lines += [
        f"## NetworkTopology recompute: {pure['nodes']} nodes, {pure['zones']} zones, {pure['keys']} keys (pure)",
        "",
        "| published pairs | median ms | min | max |",
        "| ---: | ---: | ---: | ---: |",
        f"| {pure['published_pairs']} | {r['median']:.1f} | {r['min']:.1f} | {r['max']:.1f} |",
        "",
    ]
    nt = results["networktopology_latency"]
    c = nt["configmap_to_cr_ms"]
    lines += [
        f"## NetworkTopology ConfigMap change -> CR via watch ({nt['nodes']} kwok nodes, {nt['keys']} keys)",
        "",
        "| samples | median ms | p99 ms | min | max | writes when nothing changed |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {c['n']} | {c['median']:.1f} | {c['p99']:.1f} | {c['min']:.1f} | {c['max']:.1f} "
        f"| {nt['writes_when_nothing_changed']} |",
        "",
    ]
    sh = results["schedhook"]
    lines += [
        f"## schedhook: one pod against {sh['nodes']} two-NUMA nodes ({sh['fitting']} fit)",
        "",
        "| path | median ms | p99 ms | min | max |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, key in (("pure evaluation", "evaluate_ms"), ("extender (cached snapshot + evaluation)", "extender_ms")):
        v = sh[key]
        lines.append(f"| {label} | {v['median']:.1f} | {v['p99']:.1f} | {v['min']:.1f} | {v['max']:.1f} |")
    lines.append("")
    tp = results["throughput"]
    lines += [
        f"## Scheduling throughput: {tp['pods']} pods on {tp['nodes']} kwok nodes (same kube-scheduler, same limits)",
        "",
        "| kube-scheduler alone | with the toposched extender | ratio |",
        "| ---: | ---: | ---: |",
        f"| {tp['pods_per_second_alone']} pods/s | {tp['pods_per_second_with_extender']} pods/s | {tp['ratio']} |",
        "",
    ]
    scan = results["exporter_scan"]["scan_and_build_ms"]
    daemon = results["exporter_daemon"]
    a = daemon["allocation_to_nrt_ms"]
    lines += [
        "## Exporter",
        "",
        "| figure | value |",
        "| --- | ---: |",
        f"| full scan + build, 8 NUMA nodes / 256 CPUs (median, min-max) | {scan['median']:.2f} ms "
        f"({scan['min']:.2f}-{scan['max']:.2f}) |",
        f"| allocation change -> NRT via watch, median / p99 ({a['n']} samples) "
        f"| {a['median']:.0f} / {a['p99']:.0f} ms |",
        f"| RSS after the samples | {daemon['rss_mib']} MiB |",
        f"| CPU while idle at a 10 s period ({daemon['idle_seconds']:.0f} s) "
        f"| {daemon['cpu_millicores_idle']} millicores |",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--full", action="store_true", help="more repetitions (slower)")
    args = parser.parse_args()
    kubeconfig = cluster_kubeconfig()
    RESULTS.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "version": __version__,
        "machine": machine(),
        "appgroup_sort": appgroup_sort.run(repeats=41 if args.full else 15),
        "appgroup_latency": appgroup_latency.run(
            kubeconfig, RESULTS / "operator.log", samples=200 if args.full else 60
        ),
        "networktopology_recompute": networktopology.run_pure(repeats=21 if args.full else 9),
        "networktopology_latency": networktopology.run_cluster(
            kubeconfig,
            RESULTS / "operator-nt.log",
            nodes=300 if args.full else 100,
            samples=100 if args.full else 30,
        ),
        "schedhook": schedhook.run(repeats=31 if args.full else 11),
        "throughput": throughput.run(kubeconfig, nodes=300 if args.full else 100, pods=500 if args.full else 200),
        "exporter_scan": exporter.run_scan(),
        "exporter_daemon": exporter.run_daemon(
            kubeconfig, samples=100 if args.full else 30, idle_seconds=60 if args.full else 30
        ),
    }
    (RESULTS / "results.json").write_text(json.dumps(results, indent=2))
    text = report(results)
    (RESULTS / "report.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
