"""The report's scale section: throughput, paced latency and CPU per pod per client limits, the
curves against nodes, the goals and the footprint (figures from ``bench.scale``)."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from bench import goals
from bench.cpu import PATH
from bench.harness import LIMITS as CLIENT_LIMITS
from bench.presentation import COLORS, LABELS, ranged, save
from bench.scale import SCHEDULERS
from bench.stats import fit_line

LIMITS = tuple(limits.name for limits in CLIENT_LIMITS)
"""The keys of a size's figures per client limits, raised first."""
RAISED = goals.RAISED


@dataclass(frozen=True)
class Line:
    """One line of a curve: its label, where its figure is in a size's results, how it is drawn."""

    label: str
    get: Callable[[dict[str, Any]], Any]
    color: str | None = None
    dashed: bool = False


def _limits_label(limits: str) -> str:
    return "" if limits == RAISED else ", default client limits"


def _median(limits: str, scheduler: str, figure: str) -> Callable[[dict[str, Any]], Any]:
    return lambda sc: sc[limits][scheduler][figure]["median"]


def _per_scheduler(figure: str) -> list[Line]:
    """A line per scheduler and client limits, those of the default limits dashed."""
    return [
        Line(LABELS[name] + _limits_label(lim), _median(lim, name, figure), COLORS[name], lim != RAISED)
        for lim in LIMITS
        for name in SCHEDULERS
    ]


def _cpu(scheduler: str, process: str, label: str, color: str) -> Line:
    return Line(label, lambda sc: sc[RAISED][scheduler]["cpu_ms_per_pod"][process]["median"], color)


CURVES: dict[str, tuple[str, list[Line]]] = {
    "throughput": ("backlog pods/s (median)", _per_scheduler("pods_per_second")),
    "stream_p99": ("paced stream creation -> bound p99 (ms)", _per_scheduler("stream_p99_ms")),
    "cpu": (
        "CPU ms per pod, raised limits (median)",
        [
            _cpu("plain", "kube-scheduler", "kube-scheduler alone", COLORS["plain"]),
            _cpu("toposched", "kube-scheduler", "kube-scheduler, toposched profile", "#aec7e8"),
            _cpu("toposched", "extender", "extender", COLORS["toposched"]),
            _cpu("toposched", "kube-apiserver", "kube-apiserver, toposched runs", "#ff7f0e"),
        ],
    ),
    "filter_p99": (
        "extender filter + prioritize p99 over HTTPS (ms)",
        [
            Line("workload pod", lambda sc: sc["extender_http"]["filter_and_prioritize_ms"]["p99"]),
            Line("new shape", lambda sc: sc["extender_http"]["filter_and_prioritize_new_shape_ms"]["p99"]),
        ],
    ),
    "rss": (
        "RSS (MiB)",
        [
            Line("extender", lambda sc: sc["footprint"]["extender"]["rss_mib"], COLORS["toposched"]),
            Line("operator, 1,000 AppGroups", lambda sc: sc["footprint"]["operator"]["rss_mib"]),
        ],
    ),
    "ready": (
        "extender cold start -> Ready (s)",
        [Line("extender", lambda sc: sc["footprint"]["extender"]["ready_seconds"], COLORS["toposched"])],
    ),
}


def sizes_of(results: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (results.get("scale") or {}).items() if isinstance(v, dict) and "nodes" in v}


def scale(results: dict[str, Any], plots: Path) -> list[str]:
    sizes = sizes_of(results)
    if not sizes:
        return []
    lines = [
        "## Scale",
        "",
        "A curve over cluster sizes on kwok nodes with static NRTs (two NUMA zones; one size with eight",
        "zones, GPUs and NICs). Throughput from a backlog (pods created before the scheduler starts) and",
        "creation -> bound latency of a paced stream. Every scheduler of a comparison has the same client",
        f"limits: {_limits_text(sizes)}. The schedulers take turns run after run; each figure is the median",
        "over the runs (min-max), each ratio is a run's against kube-scheduler alone's run just before it.",
        "Stalls: the stream's filters that waited for a bind that did not come, of all its filters.",
        "",
        *_throughput_table(sizes),
        "",
        *_notes(sizes),
        *_cpu_table(sizes),
        *_latency_plot(sizes, plots),
        *_scale_curves(sizes, plots),
        *_extender_goals(sizes),
        *_footprint(sizes),
    ]
    return [*lines, ""]


def _limits_text(sizes: dict[str, Any]) -> str:
    limits: dict[str, Any] = next((sc["client_limits"] for sc in sizes.values() if "client_limits" in sc), {})
    described = {
        RAISED: "raised ({qps} requests/s, burst {burst}, as scheduler_perf runs; the goals are judged on these)",
        CLIENT_LIMITS[1].name: "kube-scheduler's defaults ({qps} requests/s, burst {burst})",
    }
    return ", then ".join(described[k].format(**v) for k, v in limits.items() if k in described) or "not recorded"


def _throughput_table(sizes: dict[str, Any]) -> list[str]:
    lines = [
        "| nodes | client limits | runs | scheduler | pods/s | ratio to alone | stream median ms | stream p99 ms "
        "| stalls |",
        "| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size, sc in sizes.items():
        for limits in LIMITS:
            runs = (sc.get("client_limits") or {}).get(limits, {}).get("repeats", "?")
            for name in sc.get("schedulers", []):
                r = (sc.get(limits) or {}).get(name) or {}
                if "pods_per_second" not in r:
                    continue
                ratio = ranged(r["throughput_ratio"]) if "throughput_ratio" in r else "1"
                stream = (
                    f"{ranged(r['stream_median_ms'], '{:.0f}')} | {ranged(r['stream_p99_ms'], '{:.0f}')}"
                    if "stream_p99_ms" in r
                    else "- | -"
                )
                stalls = f"{sum(r['stream_stalls'])} of {sum(r['stream_filters'])}" if "stream_stalls" in r else "-"
                lines.append(
                    f"| {size} | {limits} | {runs} | {LABELS[name]} | {ranged(r['pods_per_second'])} | {ratio} "
                    f"| {stream} | {stalls} |"
                )
    return lines


def _notes(sizes: dict[str, Any]) -> list[str]:
    notes = []
    for size, sc in sizes.items():
        if "skipped" in sc:
            notes.append(f"- {size} nodes ({sc['shape']}): not attempted: {sc['skipped']}.")
        elif "stopped" in sc:
            notes.append(
                f"- {size} nodes ({sc['shape']}): stopped at {sc['stopped']['step']}: {sc['stopped']['reason']}."
            )
    return [*notes, ""] if notes else []


def _cpu_table(sizes: dict[str, Any]) -> list[str]:
    rows = []
    for size, sc in sizes.items():
        for limits in LIMITS:
            for name in sc.get("schedulers", []):
                r = (sc.get(limits) or {}).get(name) or {}
                cpu = r.get("cpu_ms_per_pod")
                if not cpu:
                    continue
                cells = [ranged(cpu[p], "{:.2f}") if p in cpu else "-" for p in PATH]
                ratio = ranged(r["extender_cpu_ratio"]) if "extender_cpu_ratio" in r else "-"
                rows.append(f"| {size} | {limits} | {LABELS[name]} | {' | '.join(cells)} | {ratio} |")
    if not rows:
        return []
    return [
        "### CPU per scheduled pod",
        "",
        "CPU-milliseconds (user + system, from /proc) of each process on the path over a backlog, from",
        "its first bind to its last, per pod bound, less the process's own rate while nothing is",
        "scheduled (kwok's heartbeats). For a scheduler-plugins run, kube-scheduler is its scheduler.",
        "The last column is the extender's figure against kube-scheduler alone's, run by run.",
        "",
        "| nodes | client limits | scheduler | kube-scheduler | extender | kube-apiserver | etcd "
        "| extender / kube-scheduler alone |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |",
        *rows,
        "",
    ]


def _latency_plot(sizes: dict[str, Any], plots: Path) -> list[str]:
    """The creation -> bound CDF of each scheduler's median-p99 stream with raised limits."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    drawn = False
    for size, sc in sizes.items():
        for name in sc.get("schedulers", []):
            values = ((sc.get(RAISED) or {}).get(name) or {}).get("latencies_ms")
            if not values:
                continue
            ys = [(i + 1) / len(values) for i in range(len(values))]
            style = "-" if size == next(iter(sizes)) else "--"
            ax.plot(values, ys, style, color=COLORS[name], label=f"{LABELS[name]}, {size} nodes")
            drawn = True
    if not drawn:
        plt.close(fig)
        return []
    xlabel = "creation -> bound (ms), raised limits, the run with the median p99"
    save(fig, ax, plots / "latency.png", xlabel, "fraction of pods", "log")
    plt.close(fig)
    return ["![creation to bound latency](latency.png)", ""]


def three_digits(value: float) -> str:
    """Three significant digits without an exponent: 37,900, 27.2, 0.735."""
    rounded = float(f"{value:.3g}")
    return f"{rounded:,.0f}" if abs(rounded) >= 1000 else f"{rounded:g}"


def _growth(title: str, label: str, found: list[tuple[float, float]]) -> str | None:
    fitted = fit_line(found)
    if fitted is None:
        return None
    slope, intercept = fitted
    xs, ys = [x for x, _ in found], [y for _, y in found]
    return (
        f"- {title}, {label}: {'+' if slope >= 0 else '-'}{three_digits(abs(slope) * 1000)} per 1,000 nodes "
        f"(fitted line: {three_digits(intercept)} at 0 nodes; {', '.join(three_digits(y) for y in ys)} "
        f"at {', '.join(f'{x:,.0f}' for x in xs)})"
    )


def _scale_curves(sizes: dict[str, Any], plots: Path) -> list[str]:
    """A plot per figure against nodes (log scale), and the fitted slope of each line."""
    found = {title: [(line, goals.points(sizes, line.get)) for line in lines] for title, lines in CURVES.values()}
    found = {title: curves for title, curves in found.items() if any(found for _, found in curves)}
    if not found:
        return []
    fig, axes = plt.subplots(1, len(found), figsize=(3.4 * len(found), 3.2))
    axes = axes if len(found) > 1 else [axes]
    grows = []
    for ax, (title, curves) in zip(axes, found.items(), strict=True):
        for line, pts in curves:
            if not pts:
                continue
            xs, ys = [x for x, _ in pts], [y for _, y in pts]
            ax.plot(xs, ys, "o--" if line.dashed else "o-", color=line.color, label=line.label)
            grows.append(_growth(title, line.label, pts))
        ax.set_xscale("log")
        ys_all = [y for _, pts in curves for _, y in pts]
        if ys_all and min(ys_all) > 0 and max(ys_all) / min(ys_all) > 50:  # a tail's seconds would hide its ms
            ax.set_yscale("log")
        ax.set_xlabel("nodes")
        ax.set_title(title, fontsize=8)
        ax.legend(fontsize=5)
    fig.tight_layout()
    fig.savefig(plots / "scale-curve.png", dpi=110)
    plt.close(fig)
    return [
        "### How it grows",
        "",
        "Each figure against nodes (two-NUMA sizes), with a least-squares line through the sizes: its",
        "slope is the cost per 1,000 nodes, its value at 0 nodes the fixed part.",
        "",
        *(g for g in grows if g),
        "",
        "![figures against nodes](scale-curve.png)",
        "",
    ]


def _extender_goals(sizes: dict[str, Any]) -> list[str]:
    """The extender's own goals (those against the other schedulers open the report)."""
    verdicts = goals.extender_goals(sizes)
    return ["### The extender's goals", "", *goals.table(verdicts)] if verdicts else []


def _footprint(sizes: dict[str, Any]) -> list[str]:
    lines = ["### Footprint", "", "| process | figure |", "| --- | ---: |"]
    for size, sc in sizes.items():
        fp = sc.get("footprint") or {}
        op, ex = fp.get("operator"), fp.get("extender")
        if op:
            lines.append(
                f"| operator, {op['appgroups']} AppGroups ({op['with_status']} with a status after 5 min), "
                f"{size} nodes | {op['rss_mib']} MiB RSS |"
            )
        if ex:
            lines.append(
                f"| extender, {size} nodes with NRTs | {ex['rss_mib']} MiB RSS, Ready {ex.get('ready_seconds', '?')} s "
                "after a cold start |"
            )
        for verb, v in sorted(sc.get("extender_requests", {}).items()):
            if isinstance(v, dict):
                p99 = "above the last bucket" if v["p99_le_ms"] is None else f"<= {v['p99_le_ms']} ms"
                lines.append(
                    f"| extender {verb} during the last backlog with raised limits at {size} nodes, mean (p99 bucket) "
                    f"| {v['mean_ms']} ms ({p99}) |"
                )
    return lines
