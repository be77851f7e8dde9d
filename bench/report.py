"""The benchmark report: markdown tables per scenario and PNG plots of the distributions."""

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

LABELS = {
    "plain": "kube-scheduler alone",
    "toposched": "+ toposched (default: MostAllocated)",
    "toposched-spread": "+ toposched (LeastAllocated)",
    "toposched-balanced": "+ toposched (BalancedAllocation)",
    "toposched-least-numa": "+ toposched (LeastNUMANodes)",
    "toposched-strict": "+ toposched, DRA alignment strict",
    "toposched-prefer": "+ toposched, DRA alignment prefer",
    "toposched-off": "+ toposched, DRA alignment off",
    "toposched-strict-pinned": "+ toposched, DRA alignment strict, claims pinned",
    "sp-numa": "scheduler-plugins (NodeResourceTopologyMatch)",
    "sp-network": "scheduler-plugins (TopologicalSort + NetworkOverhead)",
}
COLORS = {
    "plain": "#9e9e9e",
    "toposched": "#1f77b4",
    "toposched-spread": "#2ca02c",
    "toposched-balanced": "#9467bd",
    "toposched-least-numa": "#8c564b",
    "toposched-strict": "#1f77b4",
    "toposched-prefer": "#17becf",
    "toposched-off": "#bcbd22",
    "sp-numa": "#d62728",
    "sp-network": "#d62728",
}
NUMA_SCENARIOS = {
    "fragmentation_single_numa_node": "fragmentation, single-numa-node",
    "fragmentation_restricted": "fragmentation, restricted",
    "stale_burst": "stale NRTs, bursts",
}


def _range(v: dict[str, float], fmt: str = "{:g}") -> str:
    return f"{fmt.format(v['median'])} ({fmt.format(v['min'])}-{fmt.format(v['max'])})"


def _three(sc: dict[str, Any], metric: str, fmt: str = "{:g}") -> str:
    """kube-scheduler alone / toposched / scheduler-plugins: the medians of ``metric``."""
    alone, tp, sp = (fmt.format(sc[name][metric]["median"]) for name in ("plain", "toposched", "sp-numa"))
    return f"{alone} alone / {tp} toposched / {sp} scheduler-plugins"


def headline(results: dict[str, Any]) -> list[str]:
    """The figures a reader wants first, each a ratio or a count from the same run."""
    lines = ["## Headline", ""]
    real = (results.get("real_nodes") or {}).get("fragmentation_single_numa_node")
    if real:
        lines.append(
            f"- NUMA fragmentation judged by real kubelets ({real['nodes']} real nodes, {real['pods']} pods, "
            f"median of {real['repeats']} run(s)): TopologyAffinityErrors "
            f"{real['plain']['topology_affinity_errors']['median']:g} with kube-scheduler alone, "
            f"{real['toposched']['topology_affinity_errors']['median']:g} with toposched; pods admitted "
            f"{real['plain']['placed']['median']:g} vs {real['toposched']['placed']['median']:g} "
            f"({real['toposched-spread']['placed']['median']:g} with LeastAllocated)."
        )
    gpus = results.get("devices")
    if gpus:
        lines.append(
            f"- GPUs judged by real kubelets ({gpus['nodes']} real nodes with {gpus['devices_per_node']} GPUs each, "
            f"{gpus['pods']} pods asking for 1-2, median of {gpus['repeats']} runs): TopologyAffinityErrors "
            f"{_three(gpus, 'topology_affinity_errors')}; pods admitted {_three(gpus, 'placed')}; GPUs in use at "
            f"the end {_three(gpus, 'devices_in_use_share', '{:.0%}')}."
        )
    dra = results.get("dra")
    if dra:

        def each(metric: str) -> str:
            short = {"plain": "alone", "sp-numa": "scheduler-plugins"}
            names = [short.get(n, n.replace("-", " ")) for n in dra["schedulers"]]
            return ", ".join(
                f"{dra[n][metric]['median']:g} {name}" for n, name in zip(dra["schedulers"], names, strict=True)
            )

        lines.append(
            f"- DRA GPUs beside pinned CPUs ({dra['nodes']} real nodes with {dra['devices_per_node']} DRA GPUs each, "
            f"{dra['pods']} pods, median of {dra['repeats']} runs): misaligned pods {each('misaligned_pods')}; "
            f"pods admitted {each('placed')}; GPUs in use {each('gpus_in_use')}."
        )
    smt_nodes = results.get("smt")
    if smt_nodes:
        lines.append(
            f"- full-pcpus-only SMT nodes judged by real kubelets ({smt_nodes['nodes']} real nodes, "
            f"{smt_nodes['pods']} pods, median of {smt_nodes['repeats']} runs): kubelet rejections "
            f"{_three(smt_nodes, 'topology_affinity_errors')}; pods admitted {_three(smt_nodes, 'placed')}."
        )
    frag = results.get("fragmentation_single_numa_node")
    if frag:
        lines.append(
            f"- NUMA fragmentation, simulated kubelets ({frag['nodes']} kwok nodes, {frag['pods']} pods, "
            f"median of {frag['repeats']} runs): "
            f"TopologyAffinityErrors {frag['plain']['topology_affinity_errors']['median']:g} with kube-scheduler "
            f"alone, {frag['toposched']['topology_affinity_errors']['median']:g} with toposched; pods running "
            f"{frag['plain']['placed']['median']:g} vs {frag['toposched']['placed']['median']:g} "
            f"({frag['toposched-spread']['placed']['median']:g} with LeastAllocated)."
        )
    net = results.get("network")
    if net:
        ratio = net["toposched"]["total_cost"]["median"] / net["plain"]["total_cost"]["median"]
        lines.append(
            f"- Network cost over {net['edges']} dependency edges: {net['toposched']['total_cost']['median']:.0f} "
            f"with toposched vs {net['plain']['total_cost']['median']:.0f} alone (ratio {ratio:.2f})."
        )
    for size, sc in (results.get("scale") or {}).items():
        tp, alone, sp = sc.get("toposched") or {}, sc.get("plain") or {}, sc.get("sp-numa")
        if not {"throughput_ratio", "stream_p99_ms"} <= tp.keys() or "stream_p99_ms" not in alone:
            continue  # skipped, stopped early, or a results file from before the repeated runs
        sp = sp if sp and {"pods_per_second", "stream_p99_ms"} <= sp.keys() else None
        lines.append(
            f"- {size} nodes, median of {sc['repeats']} runs: {tp['pods_per_second']['median']:g} pods/s with "
            f"toposched vs {alone['pods_per_second']['median']:g} alone (ratio {_range(tp['throughput_ratio'])})"
            + (f", {sp['pods_per_second']['median']:g} with scheduler-plugins" if sp else "")
            + f"; creation -> bound p99 {tp['stream_p99_ms']['median']:.0f} vs "
            + f"{alone['stream_p99_ms']['median']:.0f} ms"
            + (f" ({sp['stream_p99_ms']['median']:.0f} ms with scheduler-plugins)." if sp else ".")
        )
    sh = results.get("schedhook")
    if sh:
        fp = sh["filter_and_prioritize_ms"]
        new = sh.get("filter_and_prioritize_new_shape_ms")
        lines.append(
            f"- Extender at {sh['nodes']} nodes: filter + prioritize over HTTPS median {fp['median']:.1f} ms, "
            f"p99 {fp['p99']:.1f} ms (a workload's repeated pod)"
            + (f", {new['median']:.1f} / {new['p99']:.1f} ms (a new pod shape every call)" if new else "")
            + f"; the evaluation alone median {sh['evaluate_ms']['median']:.1f} ms."
        )
    claimed = results.get("schedhook_dra")
    if claimed:
        plain, with_claim = claimed["filter_and_prioritize_ms"], claimed["filter_and_prioritize_dra_ms"]
        lines.append(
            f"- With DRA pods, {claimed['nodes']} nodes of {claimed['gpus_per_node']} GPUs in "
            f"{claimed['pools_per_node']} pools, side by side: a pod with a GPU claim median "
            f"{with_claim['median']:.1f} ms, p99 {with_claim['p99']:.1f} ms, against {plain['median']:.1f} / "
            f"{plain['p99']:.1f} ms without (p99 {claimed['p99_added_ms']:+.1f} ms)."
        )
    return [*lines, ""]


def numa(results: dict[str, Any], plots: Path) -> list[str]:
    lines: list[str] = []
    real = results.get("real_nodes") or {}
    if any(k in real for k in NUMA_SCENARIOS):
        lines += [
            "## NUMA placement judged by real kubelets (kubernetes#84869)",
            "",
            f"{real['fragmentation_single_numa_node']['nodes']} real kubelet nodes (testkit.realnode: "
            f"{real['fragmentation_single_numa_node']['node_shape']}), each with the real exporter",
            "publishing its NRT from the kubelet's PodResources. Guaranteed pods with 1-6 integral CPUs",
            "(4 GiB each). TopologyAffinityErrors (status.reason TopologyAffinityError or",
            "UnexpectedAdmissionError) and admitted pods (running, or their containers being started) are what",
            "the kubelets reported. Zone mismatches: admitted pods whose CPUs the kubelet put on other NUMA",
            "zones than the extender annotated. Simulator disagrees: pods for which the admission simulator of",
            "the kwok scenarios, replaying the same binds in bind order, decides otherwise than the kubelet.",
            "",
        ]
        lines += _numa_tables(real, judged="kubelet")
        lines += _numa_plot(real, plots, "numa-real.png", "NUMA placement judged by real kubelets", "pods admitted")
        lines += _footprint(real.get("footprint"))
    simulated = [k for k in NUMA_SCENARIOS if k in results]
    if simulated:
        lines += [
            "## NUMA placement, simulated kubelets (kwok nodes; cross-check at a larger size)",
            "",
            "Two-NUMA kwok nodes (16 CPUs, 64 GiB, 2 devices per zone), a stream of Guaranteed pods with",
            "2-12 integral CPUs (a third with a device). kwok runs no kubelet: the Topology Manager's",
            "decisions are simulated in binding order (`testkit/simulated_kubelet.py`, the extender's own",
            "predictor); NRTs are republished after changes every `refresh` seconds. Figures: median",
            "(min-max) over the runs.",
            "",
        ]
        lines += _numa_tables(results, judged="simulator")
        lines += _numa_plot(results, plots, "numa.png", "NUMA placement, simulated kubelets", "pods running")
    return lines


def _numa_tables(results: dict[str, Any], judged: str) -> list[str]:
    lines: list[str] = []
    for key in [k for k in NUMA_SCENARIOS if k in results]:
        sc = results[key]
        refresh = "NRTs from the exporter" if judged == "kubelet" else "NRT refresh"
        placed = "admitted" if judged == "kubelet" else "running"
        lines += [
            f"### {NUMA_SCENARIOS[key]}: {sc['nodes']} nodes, {sc['pods']} pods, {sc['repeats']} run(s), "
            f"{refresh} {sc['nrt_refresh_seconds']:g} s, {sc['burst']} pods every {sc['burst_interval_seconds']:g} s"
            + (f" ({sc['wall_seconds']:.0f} s in all)" if "wall_seconds" in sc else ""),
            "",
            f"| scheduler | TopologyAffinityErrors ({judged}) | pods {placed} ({judged}) | pods pending "
            "| seconds to place |" + (" zone mismatches | simulator disagrees |" if judged == "kubelet" else ""),
            "| --- | ---: | ---: | ---: | ---: |" + (" ---: | ---: |" if judged == "kubelet" else ""),
        ]
        for name in sc["schedulers"]:
            r = sc[name]
            row = (
                f"| {LABELS[name]} | {_range(r['topology_affinity_errors'])} | {_range(r['placed'])} "
                f"| {_range(r['pending'])} | {_range(r['seconds'], '{:.1f}')} |"
            )
            if judged == "kubelet":
                row += f" {r['zone_mismatches']} | {r.get('simulator_disagreements', 0)} |"
            lines.append(row)
        if "bound" in sc:
            bound = sc["bound"]["median"]
            lines += [
                "",
                f"At most {bound:g} pods can run however placed (per resource, the most pods whose requests fit in "
                f"the cluster's total); an offline best-fit-decreasing packing with every pod known runs "
                f"{sc['offline_packing']['median']:g}. Share of the bound: "
                + ", ".join(f"{LABELS[n]} {sc[n]['placed']['median'] / bound:.0%}" for n in sc["schedulers"])
                + ".",
            ]
        if judged == "kubelet":
            lines += _kubelet_notes(sc)
        lines.append("")
    return lines


def _kubelet_notes(sc: dict[str, Any]) -> list[str]:
    """The kubelets' rejection reasons and the pods they had not decided on, where there are any."""
    lines: list[str] = []
    reasons = {n: sc[n].get("rejection_reasons") for n in sc["schedulers"] if sc[n].get("rejection_reasons")}
    undecided = {n: sc[n]["undecided"]["max"] for n in sc["schedulers"] if sc[n]["undecided"]["max"]}
    if reasons:
        lines += ["", "Rejections by reason: " + "; ".join(f"{LABELS[n]}: {r}" for n, r in reasons.items())]
    if undecided:
        lines += ["", f"Bound but neither running nor rejected at the end (max per run): {undecided}"]
    return lines


def _numa_plot(results: dict[str, Any], plots: Path, name: str, title: str, placed: str) -> list[str]:
    present = [k for k in NUMA_SCENARIOS if k in results]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    schedulers = results[present[0]]["schedulers"]
    width = 0.8 / len(schedulers)
    for j, scheduler in enumerate(schedulers):
        for ax, metric in zip(axes, ("topology_affinity_errors", "placed"), strict=True):
            xs = [i + (j - (len(schedulers) - 1) / 2) * width for i in range(len(present))]
            _bars(ax, xs, [results[k][scheduler][metric] for k in present], width, scheduler)
    for ax, what in zip(
        axes, ("TopologyAffinityErrors (lower is better)", f"{placed} (higher is better)"), strict=True
    ):
        ax.set_xticks(range(len(present)), [NUMA_SCENARIOS[k].replace(", ", "\n") for k in present], fontsize=8)
        ax.set_title(what)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(plots / name, dpi=110)
    plt.close(fig)
    return [f"![{title}]({name})", ""]


def _bars(ax: Any, xs: Sequence[float], figures: Sequence[dict[str, float]], width: float, scheduler: str) -> None:
    """One scheduler's bars: the medians, with whiskers to the min and max."""
    med = [f["median"] for f in figures]
    low = [m - f["min"] for m, f in zip(med, figures, strict=True)]
    high = [f["max"] - m for m, f in zip(med, figures, strict=True)]
    ax.bar(xs, med, width, yerr=[low, high], capsize=3, color=COLORS[scheduler], label=LABELS[scheduler])


def smt(results: dict[str, Any]) -> list[str]:
    sc = results.get("smt")
    if not sc:
        return []
    lines = [
        "## Performance-tuned nodes judged by real kubelets: SMT and full-pcpus-only",
        "",
        f"{sc['nodes']} real kubelet nodes ({sc['node_shape']}, {sc['policy']}); Guaranteed pods with",
        f"{sc['pod_shape']}. The kubelet refuses a container whose CPUs are not whole cores, or more whole",
        "cores than are free, with SMTAlignmentError; rejections are counted by the kubelets' reasons.",
        "",
        *_run_heading(sc),
        "| scheduler | rejections (kubelet) | by reason, all runs | pods admitted (kubelet) | pods pending "
        "| seconds to place |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for name in sc["schedulers"]:
        r = sc[name]
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(r["rejection_reasons"].items())) or "none"
        lines.append(
            f"| {LABELS[name]} | {_range(r['topology_affinity_errors'])} | {reasons} | {_range(r['placed'])} "
            f"| {_range(r['pending'])} | {_range(r['seconds'], '{:.1f}')} |"
        )
    return [*lines, ""]


def devices(results: dict[str, Any], plots: Path) -> list[str]:
    sc = results.get("devices")
    if not sc:
        return []
    lines = [
        "## Devices judged by real kubelets: GPU-style nodes",
        "",
        f"{sc['nodes']} real kubelet nodes ({sc['node_shape']}, {sc['policy']}); a real device plugin serves the",
        "GPUs to each kubelet, whose device manager aligns and allocates them, and the real exporter publishes",
        f"them per zone. Guaranteed pods with {sc['pod_shape']}. TopologyAffinityErrors and admitted pods as the",
        "kubelets reported them; GPUs in use: the share of the healthy GPUs a running pod holds when the run",
        "ends (the kubelets' device checkpoints); stranded: free GPUs none of whose zones has the",
        f"{sc['stranded_below_cpus']} free CPUs the smallest pod asks for (no pod of the stream can use them).",
        "",
        *_run_heading(sc),
        "| scheduler | TopologyAffinityErrors (kubelet) | pods admitted (kubelet) | pods pending | GPUs in use "
        "| stranded GPUs | seconds to place | zone mismatches | simulator disagrees |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in sc["schedulers"]:
        r = sc[name]
        lines.append(
            f"| {LABELS[name]} | {_range(r['topology_affinity_errors'])} | {_range(r['placed'])} "
            f"| {_range(r['pending'])} | {_range(r['devices_in_use_share'], '{:.0%}')} "
            f"| {_range(r['stranded_devices'])} | {_range(r['seconds'], '{:.1f}')} | {r['zone_mismatches']} "
            f"| {r['simulator_disagreements']} |"
        )
    lines += _kubelet_notes(sc)
    metrics = {
        "topology_affinity_errors": "TopologyAffinityErrors\n(lower is better)",
        "placed": "pods admitted\n(higher is better)",
        "devices_in_use_share": "share of GPUs in use\n(higher is better)",
        "stranded_devices": "stranded GPUs\n(lower is better)",
    }
    fig, axes = plt.subplots(1, len(metrics), figsize=(12, 3.8))
    for ax, (metric, title) in zip(axes, metrics.items(), strict=True):
        for j, scheduler in enumerate(sc["schedulers"]):
            _bars(ax, [j], [sc[scheduler][metric]], 0.8, scheduler)
        ax.set_xticks([])
        ax.set_title(title, fontsize=9)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8)
    title = "GPUs judged by real kubelets"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    fig.savefig(plots / "devices-real.png", dpi=110)
    plt.close(fig)
    return [*lines, "", f"![{title}](devices-real.png)", ""]


def _run_heading(sc: dict[str, Any]) -> list[str]:
    """A real-node scenario's size and pace."""
    return [
        f"### {sc['nodes']} nodes, {sc['pods']} pods, {sc['repeats']} run(s), {sc['burst']} pods every "
        f"{sc['burst_interval_seconds']:g} s ({sc['wall_seconds']:.0f} s in all)",
        "",
    ]


def dra_devices(results: dict[str, Any]) -> list[str]:
    sc = results.get("dra")
    if not sc:
        return []
    lines = [
        "## DRA GPUs beside pinned CPUs",
        "",
        f"{sc['nodes']} real kubelet nodes ({sc['node_shape']}; {sc['policy']}); a real DRA driver publishes the",
        "GPUs as ResourceSlices, the real kube-scheduler's allocator picks them (first fit), the kubelet pins the",
        f"CPUs without seeing them. Guaranteed pods with {sc['pod_shape']}; toposched's columns differ by the",
        "pods' toposched.io/dra-alignment. Misaligned: admitted pods with a GPU (PodResources, its slice's",
        "numaNode) off the zones of their CPUs (the CPU Manager's checkpoint); GPUs in use: listed by PodResources",
        f"for admitted pods; stranded: free GPUs whose zone has fewer than {sc['stranded_below_cpus']} free CPUs.",
        "",
        *_run_heading(sc),
    ]
    columns = ["pods admitted", "misaligned pods", "GPUs in use", "stranded GPUs", "pods pending"]
    columns += ["TopologyAffinityErrors", "seconds to place"]

    def cells(r: dict[str, Any]) -> list[str]:
        figures = ("placed", "misaligned_pods", "gpus_in_use", "stranded_gpus", "pending", "topology_affinity_errors")
        shown = [_range(r[f]) for f in figures]
        shown[2] += f" of {r['gpus']['median']:g}"
        return [*shown, _range(r["seconds"], "{:.1f}")]

    unlisted = {n: sc[n]["gpus_unlisted"]["max"] for n in sc["schedulers"] if sc[n]["gpus_unlisted"]["max"]}
    note = [f"Admitted pods PodResources listed no GPU for (at most, per run): {unlisted}.", ""] if unlisted else []
    return [*lines, *_scheduler_table(sc, columns, cells), "", *note]


def _scheduler_table(
    sc: dict[str, Any], columns: Sequence[str], cells: Callable[[dict[str, Any]], Sequence[str]]
) -> list[str]:
    """A table with a row per scheduler of the scenario: its name, then ``cells`` of its figures."""
    lines = ["| scheduler | " + " | ".join(columns) + " |", "| --- |" + " ---: |" * len(columns)]
    return lines + [f"| {LABELS[name]} | " + " | ".join(cells(sc[name])) + " |" for name in sc["schedulers"]]


def _footprint(fp: dict[str, Any] | None) -> list[str]:
    if not fp:
        return []
    lines = [
        "### Footprint per real node",
        "",
        "Kubelet, containerd, shims and containers of one node (its cgroups), and its exporter apart;",
        "median (min-max) over the nodes, CPU averaged over the sampling window.",
        "",
        "| state | node RSS MiB | node PSS MiB | node CPU millicores | exporter RSS MiB | exporter PSS MiB "
        "| exporter CPU millicores |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for state in ("idle", "loaded"):
        f = fp.get(state)
        if not f:
            continue
        label = state if state == "idle" else f"loaded ({f['pods_with_exclusive_cpus']} pods on {f['nodes']} nodes)"
        node, exporter = f["node"], f["exporter"]
        cells = [
            _range(node["rss_mib"], "{:.0f}"),
            _range(node["pss_mib"], "{:.0f}"),
            _range(node["cpu_millicores"], "{:.0f}"),
            _range(exporter["rss_mib"], "{:.0f}"),
            _range(exporter["pss_mib"], "{:.0f}"),
            _range(exporter["cpu_millicores"], "{:.0f}"),
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    cap = fp.get("capacity")
    if cap:
        lines += [
            "",
            f"How many fit: an idle node with its exporter takes {cap['per_node_pss_mib']} MiB (PSS) and "
            f"{cap['per_node_idle_millicores']} millicores. Leaving half of this machine's "
            f"{cap['memory_available_mib']} MiB available memory and {cap['cores']} cores to the control plane "
            f"and the schedulers, memory would hold {cap['by_memory']} such nodes and CPU {cap['by_cpu']}: "
            f"about {cap['fit']} idle real nodes (pods and admissions cost more: see the loaded row).",
        ]
    return [*lines, ""]


def network(results: dict[str, Any], plots: Path) -> list[str]:
    net = results.get("network")
    if not net:
        return []
    lines = [
        f"## Network placement: {net['regions']} regions x {net['zones_per_region']} zones, {net['nodes']} nodes",
        "",
        f"Online Boutique and a Redis cluster as AppGroups, {net['replicas_per_workload']} replicas per workload,",
        "created workload by workload in topology order (a workload's pods once the one before is bound or",
        "unschedulable). Cost of a pod pair: 0 same node, 1 same zone,",
        "else the NetworkTopology's zone or region pair cost; per edge the mean over its pod pairs.",
        "",
        f"| scheduler | sum over {net['edges']} edges | largest pair cost | pods pending |",
        "| --- | ---: | ---: | ---: |",
    ]
    names = [n for n in LABELS if n in net]
    optimum = net.get("optimum")
    if optimum:
        lines[-2] = lines[-2].rstrip("|") + "| ratio to the optimum |"
        lines[-1] += " ---: |"
    for name in names:
        r = net[name]
        pending = _range(r["pending"]) if "pending" in r else "0"
        row = f"| {LABELS[name]} | {_range(r['total_cost'], '{:.1f}')} | {_range(r['max_pair_cost'])} | {pending} |"
        if optimum:
            row += f" {r['total_cost']['median'] / optimum['total_cost']:.2f} |"
        lines.append(row)
    if optimum:
        lines.append(
            f"| optimum ({optimum['solver']}, {optimum['status']}) | {optimum['total_cost']:.1f} "
            f"| {optimum['max_pair_cost']} | 0 | 1.00 |"
        )
        check = optimum.get("exhaustive_check")
        lines += ["", optimum["method"] + (f" Check: {check}." if isinstance(check, str) else "")]
    lines.append("")
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for name in names:
        costs = sorted(net[name]["pair_costs"])
        ys = [(i + 1) / len(costs) for i in range(len(costs))]
        ax.step(costs, ys, where="post", color=COLORS[name], label=LABELS[name])
    if optimum:
        costs = sorted(optimum["pair_costs"])
        ys = [(i + 1) / len(costs) for i in range(len(costs))]
        ax.step(costs, ys, where="post", color="black", linestyle="--", label="optimum")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("network cost between dependent pods (symlog)")
    ax.set_ylabel("share of pod pairs at or below")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(plots / "network.png", dpi=110)
    plt.close(fig)
    return [*lines, "![CDF of the network cost per pod pair](network.png)", ""]


def _fit(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares line through ``points`` (x, y): (slope, intercept); None below two sizes."""
    if len({x for x, _ in points}) < 2:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return slope, my - slope * mx


def _curve(sizes: dict[str, Any], get: Any) -> list[tuple[float, float]]:
    """(nodes, figure) over the two-NUMA sizes where ``get`` finds the figure."""
    out = []
    for sc in sizes.values():
        if sc.get("shape", "two-numa") != "two-numa":
            continue
        try:
            value = get(sc)
        except (KeyError, TypeError, IndexError):
            continue
        if value is not None:
            out.append((float(sc["nodes"]), float(value)))
    return sorted(out)


CURVES: dict[str, tuple[str, dict[str, Any]]] = {
    "throughput": (
        "backlog pods/s (median)",
        {name: (lambda sc, n=name: sc[n]["pods_per_second"]["median"]) for name in ("plain", "toposched", "sp-numa")},
    ),
    "stream_p99": (
        "paced stream creation -> bound p99 (ms)",
        {name: (lambda sc, n=name: sc[n]["stream_p99_ms"]["median"]) for name in ("plain", "toposched", "sp-numa")},
    ),
    "filter_p99": (
        "extender filter + prioritize p99 over HTTPS (ms)",
        {
            "workload pod": lambda sc: sc["extender_http"]["filter_and_prioritize_ms"]["p99"],
            "new shape": lambda sc: sc["extender_http"]["filter_and_prioritize_new_shape_ms"]["p99"],
        },
    ),
    "rss": (
        "RSS (MiB)",
        {
            "extender": lambda sc: sc["footprint"]["extender"]["rss_mib"],
            "operator, 1,000 AppGroups": lambda sc: sc["footprint"]["operator"]["rss_mib"],
        },
    ),
    "ready": (
        "extender cold start -> Ready (s)",
        {"extender": lambda sc: sc["footprint"]["extender"]["ready_seconds"]},
    ),
}


def scale(results: dict[str, Any], plots: Path) -> list[str]:
    sizes = {k: v for k, v in (results.get("scale") or {}).items() if isinstance(v, dict) and "nodes" in v}
    if not sizes:
        return []
    lines = [
        "## Scale",
        "",
        "A curve over cluster sizes on kwok nodes with static NRTs (two NUMA zones; one size with eight",
        "zones, GPUs and NICs). Throughput from a backlog (pods created before the scheduler starts) and",
        "creation -> bound latency of a paced stream. The schedulers take turns run after run; each",
        "figure is the median over the runs (min-max), each ratio is a run's rate against kube-scheduler",
        "alone's run just before it. Stalls: the stream's filters that waited for a bind that did not",
        "come, of all its filters.",
        "",
        "| nodes | backlog pods | stream pods/s | runs | scheduler | pods/s | ratio to alone | stream median ms "
        "| stream p99 ms | stalls |",
        "| ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    notes = []
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for size, sc in sizes.items():
        if "skipped" in sc:
            notes.append(f"- {size} nodes ({sc['shape']}): not attempted: {sc['skipped']}.")
            continue
        if "stopped" in sc:
            notes.append(
                f"- {size} nodes ({sc['shape']}): stopped at {sc['stopped']['step']}: {sc['stopped']['reason']}."
            )
        for name in sc.get("schedulers", []):
            r = sc.get(name) or {}
            if "pods_per_second" not in r:
                continue
            ratio = _range(r["throughput_ratio"]) if "throughput_ratio" in r else "1"
            stream = (
                f"| {_range(r['stream_median_ms'], '{:.0f}')} | {_range(r['stream_p99_ms'], '{:.0f}')} "
                if "stream_p99_ms" in r
                else "| - | - "
            )
            stalls = f"{sum(r['stream_stalls'])} of {sum(r['stream_filters'])}" if "stream_stalls" in r else "-"
            lines.append(
                f"| {size} | {sc['backlog_pods']} | {sc['stream_rate_per_second']:g} | {sc['repeats']} "
                f"| {LABELS[name]} | {_range(r['pods_per_second'])} | {ratio} {stream}| {stalls} |"
            )
            if "latencies_ms" in r:
                values = r["latencies_ms"]
                ys = [(i + 1) / len(values) for i in range(len(values))]
                style = "-" if size == next(iter(sizes)) else "--"
                ax.plot(values, ys, style, color=COLORS[name], label=f"{LABELS[name]}, {size} nodes")
    ax.set_xlabel("creation -> bound (ms), the run with the median p99")
    ax.set_ylabel("fraction of pods")
    ax.set_xscale("log")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(plots / "latency.png", dpi=110)
    plt.close(fig)
    lines += ["", *notes, "", "![creation to bound latency](latency.png)", ""]
    lines += _scale_curves(sizes, plots)
    lines += _scale_goals(sizes)
    lines += ["### Footprint", "", "| process | figure |", "| --- | ---: |"]
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
                lines.append(
                    f"| extender {verb} during the last backlog at {size} nodes, mean (p99 bucket) "
                    f"| {v['mean_ms']} ms (<= {v['p99_le_ms']} ms) |"
                )
    return [*lines, ""]


def _three_digits(value: float) -> str:
    """Three significant digits without an exponent: 37,900, 27.2, 0.735."""
    rounded = float(f"{value:.3g}")
    return f"{rounded:,.0f}" if abs(rounded) >= 1000 else f"{rounded:g}"


def _scale_curves(sizes: dict[str, Any], plots: Path) -> list[str]:
    """A plot per figure against nodes (log scale), and the fitted slope of each line."""
    found = {
        key: (title, {label: _curve(sizes, get) for label, get in lines.items()})
        for key, (title, lines) in CURVES.items()
    }
    found = {k: v for k, v in found.items() if any(len(points) for points in v[1].values())}
    if not found:
        return []
    fig, axes = plt.subplots(1, len(found), figsize=(3.4 * len(found), 3.2))
    axes = axes if len(found) > 1 else [axes]
    grows = []
    for ax, (title, curves) in zip(axes, found.values(), strict=True):
        for label, points in curves.items():
            if not points:
                continue
            xs, ys = [x for x, _ in points], [y for _, y in points]
            ax.plot(xs, ys, "o-", color=COLORS.get(label), label=LABELS.get(label, label))
            fitted = _fit(points)
            if fitted is not None:
                slope, intercept = fitted
                grows.append(
                    f"- {title}, {LABELS.get(label, label)}: {'+' if slope >= 0 else '-'}"
                    f"{_three_digits(abs(slope) * 1000)} per 1,000 nodes "
                    f"(fitted line: {_three_digits(intercept)} at 0 nodes; {', '.join(_three_digits(y) for y in ys)} "
                    f"at {', '.join(f'{x:,.0f}' for x in xs)})"
                )
        ax.set_xscale("log")
        ys_all = [y for points in curves.values() for _, y in points]
        if ys_all and min(ys_all) > 0 and max(ys_all) / min(ys_all) > 50:  # a tail's seconds would hide its ms
            ax.set_yscale("log")
        ax.set_xlabel("nodes")
        ax.set_title(title, fontsize=8)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(plots / "scale-curve.png", dpi=110)
    plt.close(fig)
    return [
        "### How it grows",
        "",
        "Each figure against nodes (two-NUMA sizes), with a least-squares line through the sizes: its",
        "slope is the cost per 1,000 nodes, its value at 0 nodes the fixed part.",
        "",
        *grows,
        "",
        "![figures against nodes](scale-curve.png)",
        "",
    ]


def _scale_goals(sizes: dict[str, Any]) -> list[str]:
    """The scale goals, each with its figure from this run and whether it is met."""
    rows = []

    def row(goal: str, figure: str, met: bool | None) -> None:
        rows.append(f"| {goal} | {figure} | {'yes' if met else 'no' if met is not None else 'not measured'} |")

    for size, sc in sizes.items():
        tp, alone, sp = sc.get("toposched") or {}, sc.get("plain") or {}, sc.get("sp-numa") or {}
        if "throughput_ratio" in tp:
            ratio = tp["throughput_ratio"]["median"]
            beats = "pods_per_second" not in sp or tp["pods_per_second"]["median"] >= sp["pods_per_second"]["median"]
            sp_figure = f", {sp['pods_per_second']['median']:g} pods/s for scheduler-plugins" if sp else ""
            row(
                f"{size}: throughput >= 1.0 x alone and >= scheduler-plugins",
                f"{ratio:g} x ({tp['pods_per_second']['median']:g} pods/s){sp_figure}",
                ratio >= 1.0 and beats,
            )
        if "stream_p99_ms" in tp and "stream_p99_ms" in alone:
            ratio = tp["stream_p99_ms"]["median"] / alone["stream_p99_ms"]["median"]
            row(f"{size}: stream p99 <= 1.3 x alone", f"{ratio:.2f} x", ratio <= 1.3)
        http = sc.get("extender_http")
        limit = {5000: 5.0, 20_000: 10.0}.get(sc["nodes"]) if sc.get("shape", "two-numa") == "two-numa" else None
        if http and limit:
            p99 = http["filter_and_prioritize_new_shape_ms"]["p99"]
            row(f"{size}: filter + prioritize p99, a new shape, <= {limit:g} ms", f"{p99:.1f} ms", p99 <= limit)
        ready = ((sc.get("footprint") or {}).get("extender") or {}).get("ready_seconds")
        if sc["nodes"] == 20_000 and sc.get("shape", "two-numa") == "two-numa":
            row("20000: Ready after a cold start <= 10 s", f"{ready} s" if ready is not None else "-",
                None if ready is None else ready <= 10)  # fmt: skip
    rss = _fit(_curve(sizes, CURVES["rss"][1]["extender"]))
    if rss is not None:
        per_node = rss[0] * 1024
        row("extender RSS <= 60 KiB per node with NRT", f"{per_node:.1f} KiB per node, {rss[1]:.0f} MiB fixed",
            per_node <= 60)  # fmt: skip
    if not rows:
        return []
    return ["### Goals", "", "| goal | measured | met |", "| --- | ---: | --- |", *rows, ""]


def extender(results: dict[str, Any], plots: Path) -> list[str]:
    sh = results.get("schedhook")
    if not sh:
        return []
    lines = [
        f"## Extender: one pod against {sh['nodes']} two-NUMA nodes ({sh['fitting']} fit)",
        "",
        "A workload's pod is the same pod shape call after call while the cluster changes (one NRT",
        "between two pure evaluations; over HTTPS NRT updates and bind reservations arriving at",
        f"{sh.get('churn_per_second', '?')}/s each); a new shape is a request no earlier call made.",
        "",
        "| path | median ms | p99 ms | min | max |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, key in (
        ("evaluation (pure, columnar), a workload's pod", "evaluate_ms"),
        ("evaluation (pure, columnar), a new shape every call", "evaluate_new_shape_ms"),
        ("filter over HTTPS", "filter_ms"),
        ("prioritize over HTTPS", "prioritize_ms"),
        ("filter + prioritize over HTTPS, a workload's pod", "filter_and_prioritize_ms"),
        ("filter + prioritize over HTTPS, a new shape every call", "filter_and_prioritize_new_shape_ms"),
        (
            f"filter + prioritize, {sh.get('default_candidates')} candidates (kube-scheduler's default sample)",
            "filter_and_prioritize_default_candidates_ms",
        ),
        (
            f"filter + prioritize, {sh.get('default_candidates')} candidates, across a network hop",
            "filter_and_prioritize_default_candidates_hop_ms",
        ),
        ("a new connection: TCP + TLS handshake (kube-scheduler keeps its connections)", "tls_handshake_ms"),
        ("one round trip over loopback (kube-scheduler to its sidecar)", "round_trip_loopback_ms"),
        ("one round trip across a network hop (to another pod on the node)", "round_trip_hop_ms"),
    ):
        if key not in sh:
            continue
        v = sh[key]
        lines.append(f"| {label} | {v['median']:.2f} | {v['p99']:.2f} | {v['min']:.2f} | {v['max']:.2f} |")
    if "hop_per_pod_ms" in sh:
        lines += ["", f"The network hop costs {sh['hop_per_pod_ms']:.2f} ms per pod (three calls: filter, prioritize,"]
        lines += ["bind) more than loopback, before a Service's translation and the wire between nodes."]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.hist(sh["samples_ms"]["filter_and_prioritize"], bins=30, color=COLORS["toposched"], alpha=0.8, label="HTTPS")
    if "filter_and_prioritize_new_shape" in sh["samples_ms"]:
        new = sh["samples_ms"]["filter_and_prioritize_new_shape"]
        ax.hist(new, bins=30, color=COLORS["plain"], alpha=0.6, label="HTTPS, new shapes")
    ax.hist(sh["samples_ms"]["evaluate"], bins=30, color=COLORS["toposched-spread"], alpha=0.8, label="evaluation")
    ax.set_xlabel("ms per pod")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(plots / "extender.png", dpi=110)
    plt.close(fig)
    return [*lines, "", "![extender latency](extender.png)", ""]


def capacity(results: dict[str, Any]) -> list[str]:
    cap = results.get("capacity")
    if not cap or "fleet" not in cap:
        return []
    lines = [
        f"## `toposched capacity`: {len(cap['shapes'])} shapes over {cap['nodes']} nodes (goal {cap['goal_s']:g} s)",
        "",
        "The count alone (NRTs parsed, nodes judged, copies counted); fleet: few distinct node states,",
        "random: every node distinct. CPU seconds are the process's own (the machine may be shared).",
        "",
        "| cluster | wall s (median) | CPU s (median) | max | copies per shape |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for label in ("fleet", "random"):
        r = cap[label]
        wall, cpu = r["count_s"], r.get("count_cpu_s", r["count_s"])
        fits = ", ".join(f"{name} {n}" for name, n in r["fits"].items())
        lines.append(f"| {label} | {wall['median']:.2f} | {cpu['median']:.2f} | {wall['max']:.2f} | {fits} |")
    return [*lines, ""]


def render(results: dict[str, Any], plots: Path) -> str:
    lines = [f"# toposched benchmarks ({results['when']}, {'full' if results.get('full') else 'quick'} run)", ""]
    m = results["machine"]
    lines += [
        f"toposched {results['version']}; Kubernetes {results['versions'].get('kubernetes', '?')}, "
        f"kwok {results['versions'].get('kwok', '?')}; {m['cpus']} CPUs, {m['memory_gib']} GiB, "
        f"Python {m['python']}, {m['platform']}. The whole control plane runs on the same machine.",
        "",
        f"scheduler-plugins {results['versions'].get('scheduler_plugins', '?')} (built with the Kubernetes v1.34.7 "
        "libraries) runs beside them; docs/benchmarks.md says how each figure is judged.",
        "",
    ]
    lines += headline(results)
    lines += numa(results, plots)
    lines += devices(results, plots)
    lines += dra_devices(results)
    lines += smt(results)
    lines += network(results, plots)
    lines += scale(results, plots)
    lines += extender(results, plots)
    lines += capacity(results)
    if "appgroup_sort" in results:
        lines += components(results)
    return "\n".join(lines)


def components(results: dict[str, Any]) -> list[str]:
    lines: list[str] = ["## Components", ""]
    sort = results["appgroup_sort"]
    lines += [
        f"### AppGroup sort: {sort['workloads']} workloads, {sort['edges']} dependencies (pure, no cluster)",
        "",
        "| step | median ms | min | max |",
        "| --- | ---: | ---: | ---: |",
        "| build graph (validation included) | {median:.2f} | {min:.2f} | {max:.2f} |".format(**sort["build_graph_ms"]),
    ]
    lines += [
        f"| sort {name} | {s['median']:.2f} | {s['min']:.2f} | {s['max']:.2f} |" for name, s in sort["sort_ms"].items()
    ]
    latency = results["appgroup_latency"]
    parts = [
        ("spec patch sent -> status seen", "spec_to_status_ms"),
        ("the spec patch's round trip (apiserver)", "spec_write_ms"),
        ("spec patch acknowledged -> status seen (operator + its status write)", "write_acknowledged_to_status_ms"),
    ]
    lines += [
        "",
        f"### AppGroup spec change -> status visible via watch ({latency['workloads']} workloads)",
        "",
        "| interval | samples | median ms | p99 ms | min | max |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, key in parts:
        if key in latency:  # results files from before the split have the total only
            s = latency[key]
            lines.append(
                f"| {label} | {s['n']} | {s['median']:.1f} | {s['p99']:.1f} | {s['min']:.1f} | {s['max']:.1f} |"
            )
    lines.append("")
    pure = results["networktopology_recompute"]
    r = pure["recompute_ms"]
    lines += [
        f"### NetworkTopology recompute: {pure['nodes']} nodes, {pure['zones']} zones, {pure['keys']} keys (pure)",
        "",
        "| published pairs | median ms | min | max |",
        "| ---: | ---: | ---: | ---: |",
        f"| {pure['published_pairs']} | {r['median']:.1f} | {r['min']:.1f} | {r['max']:.1f} |",
        "",
    ]
    nt = results["networktopology_latency"]
    c = nt["configmap_to_cr_ms"]
    lines += [
        f"### NetworkTopology ConfigMap change -> CR via watch ({nt['nodes']} kwok nodes, {nt['keys']} keys)",
        "",
        "| samples | median ms | p99 ms | min | max | writes when nothing changed |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {c['n']} | {c['median']:.1f} | {c['p99']:.1f} | {c['min']:.1f} | {c['max']:.1f} "
        f"| {nt['writes_when_nothing_changed']} |",
        "",
    ]
    scan = results["exporter_scan"]["scan_and_build_ms"]
    daemon = results["exporter_daemon"]
    a = daemon["allocation_to_nrt_ms"]
    lines += [
        "### Exporter",
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
    return lines
