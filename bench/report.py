"""The benchmark report: markdown tables per scenario and PNG plots of the distributions, from the
reference results (``bench.reference``), every section dated with the run it comes from."""

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from bench import goals, reference
from bench.presentation import COLORS, LABELS, ranged, save
from bench.scale_report import scale, sizes_of

NUMA_SCENARIOS = {
    "fragmentation_single_numa_node": "fragmentation, single-numa-node",
    "fragmentation_restricted": "fragmentation, restricted",
    "stale_burst": "stale NRTs, bursts",
}


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
    lines += _scale_headline(results)
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


def _scale_headline(results: dict[str, Any]) -> list[str]:
    lines = []
    for size, sc in sizes_of(results).items():
        raised, defaults = sc.get(goals.RAISED) or {}, sc.get("defaults") or {}
        tp, alone, sp = raised.get("toposched") or {}, raised.get("plain") or {}, raised.get("sp-numa") or {}
        if not {"throughput_ratio", "stream_p99_ms"} <= tp.keys() or "stream_p99_ms" not in alone:
            continue  # skipped, or stopped early
        runs = sc["client_limits"][goals.RAISED]["repeats"]
        line = (
            f"- {size} nodes, raised client limits, median of {runs} run(s): {tp['pods_per_second']['median']:g} "
            f"pods/s with toposched vs {alone['pods_per_second']['median']:g} alone (ratio "
            f"{ranged(tp['throughput_ratio'])})"
            + (f", {sp['pods_per_second']['median']:g} with scheduler-plugins" if "pods_per_second" in sp else "")
            + f"; creation -> bound p99 {tp['stream_p99_ms']['median']:.0f} vs "
            + f"{alone['stream_p99_ms']['median']:.0f} ms"
        )
        cpu_tp, cpu_alone = tp.get("cpu_ms_per_pod") or {}, alone.get("cpu_ms_per_pod") or {}
        if "extender" in cpu_tp and "kube-scheduler" in cpu_alone:
            line += (
                f"; CPU per pod: extender {cpu_tp['extender']['median']:.2f} ms vs kube-scheduler alone "
                f"{cpu_alone['kube-scheduler']['median']:.2f} ms"
            )
        dtp, dalone = defaults.get("toposched") or {}, defaults.get("plain") or {}
        if "pods_per_second" in dtp and "pods_per_second" in dalone:
            line += (
                f". With kube-scheduler's default limits: {dtp['pods_per_second']['median']:g} vs "
                f"{dalone['pods_per_second']['median']:g} pods/s"
            )
        lines.append(line + ".")
    return lines


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
                f"| {LABELS[name]} | {ranged(r['topology_affinity_errors'])} | {ranged(r['placed'])} "
                f"| {ranged(r['pending'])} | {ranged(r['seconds'], '{:.1f}')} |"
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
            f"| {LABELS[name]} | {ranged(r['topology_affinity_errors'])} | {reasons} | {ranged(r['placed'])} "
            f"| {ranged(r['pending'])} | {ranged(r['seconds'], '{:.1f}')} |"
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
            f"| {LABELS[name]} | {ranged(r['topology_affinity_errors'])} | {ranged(r['placed'])} "
            f"| {ranged(r['pending'])} | {ranged(r['devices_in_use_share'], '{:.0%}')} "
            f"| {ranged(r['stranded_devices'])} | {ranged(r['seconds'], '{:.1f}')} | {r['zone_mismatches']} "
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
        shown = [ranged(r[f]) for f in figures]
        shown[2] += f" of {r['gpus']['median']:g}"
        return [*shown, ranged(r["seconds"], "{:.1f}")]

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
            ranged(node["rss_mib"], "{:.0f}"),
            ranged(node["pss_mib"], "{:.0f}"),
            ranged(node["cpu_millicores"], "{:.0f}"),
            ranged(exporter["rss_mib"], "{:.0f}"),
            ranged(exporter["pss_mib"], "{:.0f}"),
            ranged(exporter["cpu_millicores"], "{:.0f}"),
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
        pending = ranged(r["pending"]) if "pending" in r else "0"
        row = f"| {LABELS[name]} | {ranged(r['total_cost'], '{:.1f}')} | {ranged(r['max_pair_cost'])} | {pending} |"
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
    xlabel = "network cost between dependent pods (symlog)"
    save(fig, ax, plots / "network.png", xlabel, "share of pod pairs at or below", "symlog", linthresh=1)
    plt.close(fig)
    return [*lines, "![CDF of the network cost per pod pair](network.png)", ""]


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


def flames(results: dict[str, Any]) -> list[str]:
    """Where the extender's time went in a backlog (``bench/flame.py``)."""
    fl = results.get("flame")
    if not fl:
        return []
    lines = [
        f"## Where the extender's time goes: a {fl['pods']}-pod backlog at {fl['nodes']} kwok nodes",
        "",
        f"Raised client limits, the extender called as the chart's sidecar is (loopback); {fl['pods_per_second']:g}",
        f"pods/s, py-spy sampling it at {fl.get('rate', 250)} Hz: {fl['samples']} samples, on average",
        f"{fl['cores_busy']:g} of a core busy. Share of the samples by where they were (a sample may count twice):",
        "",
        "| where | share |",
        "| --- | ---: |",
        *(f"| {where} | {share:.1%} |" for where, share in fl["shares"].items()),
        "",
        "py-spy samples every thread that is not idle, on a core or waiting for one: with both cores busy,",
        "a thread preempted inside a call (a `send()` that woke kube-scheduler, say) counts there, so these",
        "are shares of wall time, not of CPU (docs/benchmarks.md compares them with `perf`).",
        "",
        *(f"- {name}: [{file}]({file})" for name, file in fl["files"].items()),
        "",
    ]
    return lines


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


SECTIONS: dict[str, Callable[[dict[str, Any], Path], list[str]]] = {
    "numa": lambda results, plots: numa(results, plots),
    "devices": lambda results, plots: devices(results, plots),
    "dra": lambda results, plots: dra_devices(results),
    "smt": lambda results, plots: smt(results),
    "network": lambda results, plots: network(results, plots),
    "scale": lambda results, plots: scale(results, plots),
    "extender": lambda results, plots: extender(results, plots) + flames(results) + capacity(results),
    "components": lambda results, plots: components(results) if "appgroup_sort" in results else [],
}
"""Each section's part of the report, in the report's order."""
HOW = {
    "numa": "real kubelet nodes (root, `make test-tools`) and kwok nodes",
    "devices": "real kubelet nodes",
    "dra": "real kubelet nodes",
    "smt": "real kubelet nodes",
}


def when(run: dict[str, Any]) -> str:
    """A run's date and kind: ``2026-11-28 14:03 UTC, quick run``."""
    stamp = run["when"].replace("T", " ")[:16]
    return f"{stamp} UTC, {'full' if run.get('full') else 'quick'} run"


def runs_table(results: dict[str, Any]) -> list[str]:
    """Which run each section comes from: the report is the latest run of every section."""
    lines = [
        "| section | run | toposched | Kubernetes | machine | minutes |",
        "| --- | --- | --- | --- | --- | ---: |",
    ]
    for name in reference.SECTIONS:
        run = reference.run_of(results, name)
        if run is None:
            lines.append(f"| {name} | not run yet (`python -m bench --only {name}`) | | | | |")
            continue
        m = run["machine"]
        minutes = sum(run.get("seconds", {}).values()) / 60
        lines.append(
            f"| {name} | {when(run)} | {run['version']} | {run['versions'].get('kubernetes', '?')} "
            f"| {m['cpus']} CPUs, {m['memory_gib']} GiB | {minutes:.0f} |"
        )
    return [*lines, ""]


def dated(name: str, run: dict[str, Any] | None) -> list[str]:
    """The line that opens a section's part: the run it comes from, or that there is none."""
    if run is None:
        where = f" on {HOW[name]}" if name in HOW else ""
        return [f"*Section {name}: not run yet; `python -m bench --only {name}` measures it{where}.*", ""]
    real = f", {run['real_nodes']} real nodes" if name in HOW and "real_nodes" in run else ""
    return [f"*Section {name}: {when(run)}{real}.*", ""]


def render(results: dict[str, Any], plots: Path) -> str:
    """The report of ``results`` (the reference: sections, each with its run); plots into ``plots``."""
    figures = reference.figures(results)
    runs = [run for name in reference.SECTIONS if (run := reference.run_of(results, name))]
    first = runs[0] if runs else {"versions": {}, "machine": {}}
    lines = [
        "# toposched benchmarks",
        "",
        "The latest run of each section (`make bench` runs them all, `python -m bench --only SECTION` one;",
        "docs/benchmarks.md says how each figure is judged). The whole control plane runs on the same",
        f"machine ({first['machine'].get('platform', '?')}, Python {first['machine'].get('python', '?')}); "
        f"kwok {first['versions'].get('kwok', '?')}, scheduler-plugins "
        f"{first['versions'].get('scheduler_plugins', '?')} (built with the Kubernetes v1.34.7 libraries).",
        "",
        *runs_table(results),
        *headline(figures),
        *_goals(figures),
    ]
    for name, part in SECTIONS.items():
        shown = part(figures, plots)
        lines += [*dated(name, reference.run_of(results, name)), *shown]
    return "\n".join(lines)


def _goals(figures: dict[str, Any]) -> list[str]:
    verdicts = goals.issue_goals(sizes_of(figures))
    if not verdicts:
        return []
    return [
        "## Goals against kube-scheduler and scheduler-plugins (scale section, raised client limits)",
        "",
        *goals.table(verdicts),
    ]


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
