"""The goals the scale curve is judged by: each with its figure, met or missed, and by how much.

Throughput, paced latency and CPU per pod are judged on the runs with raised client limits
(``bench.harness.RAISED_LIMITS``): with kube-scheduler's defaults a backlog of kube-scheduler alone
measures its client's limit, while the extender binds through a client of its own. A goal that is
missed stays where it is; the row says by how much and where the CPU per pod went.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from bench.cpu import PATH
from bench.harness import RAISED_LIMITS
from bench.stats import fit_line

RAISED = RAISED_LIMITS.name
"""The key of the runs with raised client limits in a size's figures (``bench.scale``)."""
TWO_NUMA = "two-numa"
GOAL_SIZES = (1000, 5000)
"""The two-NUMA sizes the goals against kube-scheduler alone name."""


@dataclass(frozen=True)
class Verdict:
    goal: str
    target: float
    at_most: bool
    """The goal is ``value <= target`` (else ``value >= target``)."""
    value: float | None = None
    """The judged figure; None: not measured."""
    measured: str = "-"
    shows: str = ""
    """For a miss: what the figures beside it show."""

    @property
    def met(self) -> bool | None:
        if self.value is None:
            return None
        return self.value <= self.target if self.at_most else self.value >= self.target

    @property
    def margin(self) -> str:
        """How far from the target, as a share of it."""
        if self.value is None:
            return "not measured"
        off = abs(self.value / self.target - 1) if self.target else 0.0
        return f"{off:.0%} to spare" if self.met else f"missed by {off:.0%}"

    def row(self) -> str:
        met = {True: "yes", False: "no", None: "-"}[self.met]
        return f"| {self.goal} | {self.measured} | {met} | {self.margin} | {self.shows} |"


def points(sizes: dict[str, Any], get: Callable[[dict[str, Any]], Any]) -> list[tuple[float, float]]:
    """(nodes, figure) over the two-NUMA sizes where ``get`` finds the figure."""
    out = []
    for sc in sizes.values():
        if sc.get("shape", TWO_NUMA) != TWO_NUMA:
            continue
        try:
            value = get(sc)
        except (KeyError, TypeError, IndexError):
            continue
        if value is not None:
            out.append((float(sc["nodes"]), float(value)))
    return sorted(out)


def _median(figures: dict[str, Any], scheduler: str, figure: str) -> float | None:
    found = (figures.get(scheduler) or {}).get(figure)
    return float(found["median"]) if found else None


def cpu_text(figures: dict[str, Any], scheduler: str) -> str:
    """A scheduler run's CPU-milliseconds per pod by process, and their sum."""
    cpu = (figures.get(scheduler) or {}).get("cpu_ms_per_pod") or {}
    shown = [(p, cpu[p]["median"]) for p in PATH if p in cpu]
    if not shown:
        return ""
    parts = ", ".join(f"{p} {v:.2f}" for p, v in shown)
    return f"{parts} (sum {sum(v for _, v in shown):.2f})"


def requests_text(sc: dict[str, Any]) -> str:
    """The extender's mean time per request by verb, in the last backlog with raised limits."""
    requests = sc.get("extender_requests") or {}
    verbs = [f"{verb} {v['mean_ms']:g} ms" for verb, v in sorted(requests.items()) if isinstance(v, dict)]
    return f"the extender's mean time per request (last backlog): {', '.join(verbs)}" if verbs else ""


def _throughput(size: str, sc: dict[str, Any], raised: dict[str, Any]) -> Iterable[Verdict]:
    tp, alone, sp = (_median(raised, s, "pods_per_second") for s in ("toposched", "plain", "sp-numa"))
    ratio = _median(raised, "toposched", "throughput_ratio")
    runs = (sc.get("client_limits") or {}).get(RAISED, {}).get("repeats", "?")
    if sc["nodes"] in GOAL_SIZES and sc.get("shape", TWO_NUMA) == TWO_NUMA:
        measured = f"{ratio:g} x: {tp:g} vs {alone:g} pods/s (median of {runs})" if ratio and tp and alone else "-"
        why = f"CPU ms per pod, alone: {cpu_text(raised, 'plain')}; with toposched: {cpu_text(raised, 'toposched')}"
        why = "; ".join(filter(None, (why, requests_text(sc))))
        short = ratio is not None and ratio < 0.8
        goal = f"{size}: toposched >= 0.8 x kube-scheduler alone's throughput"
        yield Verdict(goal, 0.8, False, ratio, measured, why if short else "")
    versus = tp / sp if tp and sp else None
    measured = f"{versus:.2f} x: {tp:g} vs {sp:g} pods/s" if versus and tp and sp else "-"
    yield Verdict(f"{size}: toposched >= 3 x scheduler-plugins' throughput", 3.0, False, versus, measured)


def _cpu(size: str, raised: dict[str, Any]) -> Verdict:
    ratio = _median(raised, "toposched", "extender_cpu_ratio")
    cpu_tp = (raised.get("toposched") or {}).get("cpu_ms_per_pod") or {}
    cpu_alone = (raised.get("plain") or {}).get("cpu_ms_per_pod") or {}
    measured = "-"
    if ratio is not None and "extender" in cpu_tp and "kube-scheduler" in cpu_alone:
        measured = (
            f"{ratio:g} x: extender {cpu_tp['extender']['median']:.2f} vs kube-scheduler alone "
            f"{cpu_alone['kube-scheduler']['median']:.2f} CPU ms per pod"
        )
    shows = f"with toposched: {cpu_text(raised, 'toposched')}" if ratio is not None and ratio > 2 else ""
    return Verdict(f"{size}: extender CPU per pod <= 2 x kube-scheduler's", 2.0, True, ratio, measured, shows)


def _latency(size: str, sc: dict[str, Any], raised: dict[str, Any]) -> Verdict:
    tp, alone = _median(raised, "toposched", "stream_p99_ms"), _median(raised, "plain", "stream_p99_ms")
    ratio = tp / alone if tp is not None and alone else None
    shows = requests_text(sc)
    return Verdict(
        f"{size}: paced creation -> bound p99 <= 1.3 x alone's",
        1.3,
        at_most=True,
        value=ratio,
        measured=f"{ratio:.2f} x: {tp:.0f} vs {alone:.0f} ms" if ratio is not None and tp and alone else "-",
        shows=shows if ratio is not None and ratio > 1.3 else "",
    )


def issue_goals(sizes: dict[str, Any]) -> list[Verdict]:
    """Against kube-scheduler alone and scheduler-plugins, with raised client limits, medians of the runs."""
    verdicts: list[Verdict] = []
    named = {str(n): {"nodes": n} for n in GOAL_SIZES}  # judged even when the curve lacks them
    for size, sc in (named | sizes).items():
        if "nodes" not in sc:
            continue
        raised = sc.get(RAISED) or {}
        verdicts += _throughput(size, sc, raised)
        two_numa = sc.get("shape", TWO_NUMA) == TWO_NUMA
        if two_numa and sc["nodes"] == 5000:
            verdicts.append(_cpu(size, raised))
        if two_numa and sc["nodes"] in GOAL_SIZES:
            verdicts.append(_latency(size, sc, raised))
    return verdicts


def extender_goals(sizes: dict[str, Any]) -> list[Verdict]:
    """The extender's own: filter + prioritize p99, cold start, memory per node."""
    verdicts: list[Verdict] = []
    for size, sc in sizes.items():
        if sc.get("shape", TWO_NUMA) != TWO_NUMA or "nodes" not in sc:
            continue
        limit = {5000: 5.0, 20_000: 10.0}.get(sc["nodes"])
        http = sc.get("extender_http")
        if http and limit:
            p99 = http["filter_and_prioritize_new_shape_ms"]["p99"]
            goal = f"{size}: filter + prioritize p99, a new shape, <= {limit:g} ms"
            verdicts.append(Verdict(goal, limit, True, p99, f"{p99:.1f} ms"))
        if sc["nodes"] == 20_000:
            ready = ((sc.get("footprint") or {}).get("extender") or {}).get("ready_seconds")
            measured = f"{ready} s" if ready is not None else "-"
            verdicts.append(Verdict(f"{size}: Ready after a cold start <= 10 s", 10.0, True, ready, measured))
    rss = fit_line(points(sizes, lambda sc: sc["footprint"]["extender"]["rss_mib"]))
    if rss is not None:
        per_node = rss[0] * 1024
        measured = f"{per_node:.1f} KiB per node, {rss[1]:.0f} MiB fixed"
        verdicts.append(Verdict("extender RSS <= 60 KiB per node with NRT", 60.0, True, per_node, measured))
    return verdicts


def table(verdicts: list[Verdict]) -> list[str]:
    if not verdicts:
        return []
    head = [
        "| goal | measured | met | by how much | what the figures beside it show |",
        "| --- | --- | --- | --- | --- |",
    ]
    return [*head, *(v.row() for v in verdicts), ""]
