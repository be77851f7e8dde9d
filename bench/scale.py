"""Scale and footprint on kwok nodes with NRTs, as a curve over cluster sizes.

At each size (quick: 1,000 and 5,000 nodes with two-NUMA NRTs; ``--full``: also 10,000 and 20,000,
and 5,000 nodes with eight-zone NRTs with GPUs and NICs): kube-scheduler alone, with the toposched
extender (the same binary) and scheduler-plugins' NUMA profile, all three with the same client
limits: raised (the runs the goals are judged on), then kube-scheduler's defaults. Throughput from
a backlog (pods exist before the scheduler starts; (pods - 1) / (last bind - first bind)) with the
CPU per pod of each process on the path (``bench.cpu``), and creation -> bound latency of a paced
stream (the scheduler already running), with the filters that waited in vain for a bind (the
stall). The schedulers take turns, run after run, so a slow spell of the machine falls on each of
them; figures are medians with their ranges.

Then, on the same nodes: filter + prioritize over HTTPS (``bench.schedhook``, the same node
count), the operator's RSS once it has computed the status of 1,000 AppGroups (and watches every
node, as the NetworkTopology side does), the extender's RSS with every node and NRT cached, and
its cold start: process start -> Ready (every NRT, pod and node listed and parsed).

A size the machine cannot hold is not attempted: the control plane's memory per node, measured
at the sizes before it, says what it would take. A step that fails or does not finish in time
(kwok nodes that never turn Ready, a scheduler that never binds) ends its size with the step and
the reason; every figure measured before it is kept, and larger sizes are not attempted.
"""

import asyncio
import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psutil
from kubernetes_asyncio.client import ApiException

from bench import schedhook, scheduler_plugins
from bench.appgroup_sort import random_dag_spec
from bench.cpu import EXTENDER, PATH, SCHEDULER, control_plane_pids, settle
from bench.harness import (
    DEFAULT_LIMITS,
    LIMITS,
    RAISED_LIMITS,
    Bound,
    ClientLimits,
    Harness,
    NodeSpec,
    SetupError,
    scrape,
)
from bench.stats import percentile, spread
from bench.throughput import backlog, bench_pod, start
from testkit.builders import appgroup_body
from testkit.cluster import OperatorProcess
from testkit.nrt import nrt, nrt8
from toposched.apis.appgroup import AppGroup


async def stream(
    h: Harness,
    scheduler: str,
    pods: int,
    rate: float,
    tag: str,
    repeat: int = 0,
    limits: ClientLimits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """Pods created at ``rate`` per second with the scheduler running (onto the nodes labelled
    ``tag``): creation -> bound latencies."""
    namespace = f"lat-{scheduler}-{tag}-{limits.name[0]}{repeat}"
    await h.namespace(namespace)
    try:
        metrics = await start(h, scheduler, limits)
        await asyncio.sleep(3)
        bodies = [bench_pod(i, scheduler, tag) for i in range(pods)]
        binds: dict[str, Bound] = {}
        watcher = asyncio.create_task(h.watch_binds(namespace, pods, 600, binds))
        created: dict[str, float] = {}
        started = time.monotonic()
        for i, body in enumerate(bodies):
            await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
            created.update(await h.create_pods(namespace, [body]))
        await watcher
        latencies = sorted((binds[n].at - created[n]) * 1000 for n in created)
        out: dict[str, Any] = {}
        if metrics is not None:  # the filters that waited for a bind that did not come: the stall
            figures = scrape(metrics)
            out["extender"] = figures
            out["stalls"] = int(figures.get("bind_waits_in_vain", 0))
        return out | {
            "rate_per_second": rate,
            "latency_ms": {
                "median": statistics.median(latencies),
                "p99": percentile(latencies, 99),
                "min": latencies[0],
                "max": latencies[-1],
            },
            "latencies_ms": latencies,
        }
    finally:
        h.stop_all()
        await h.delete_namespace(namespace, gone_within=120)


def _rss_mib(pid: int) -> float:
    return round(float(psutil.Process(pid).memory_info().rss) / 2**20, 1)


async def operator_footprint(h: Harness, appgroups: int, log: Path) -> dict[str, Any]:
    """RSS of ``toposched operator`` after it has written the status of ``appgroups`` AppGroups."""
    namespace = f"fp-{uuid.uuid4().hex[:6]}"
    await h.namespace(namespace)
    operator = OperatorProcess(h.kubeconfig, namespace, log, identity="bench", lease="toposched-bench")
    operator.start()
    try:
        specs = [
            random_dag_spec(8, max_deps=2, seed=i).model_dump(mode="json", by_alias=True) for i in range(appgroups)
        ]
        calls = [
            h.custom.create_namespaced_custom_object(
                AppGroup.GROUP,
                AppGroup.VERSION,
                namespace,
                AppGroup.PLURAL,
                appgroup_body(f"ag-{i}", spec=s),
            )
            for i, s in enumerate(specs)
        ]
        for start in range(0, len(calls), 50):
            await asyncio.gather(*calls[start : start + 50])
        deadline = time.monotonic() + 300
        done = 0
        while time.monotonic() < deadline:
            listed = await h.custom.list_namespaced_custom_object(
                AppGroup.GROUP, AppGroup.VERSION, namespace, AppGroup.PLURAL
            )
            done = sum(1 for item in listed["items"] if (item.get("status") or {}).get("topologyOrder"))
            if done >= appgroups:
                break
            await asyncio.sleep(1)
        await asyncio.sleep(2)
        assert operator.proc is not None
        return {"appgroups": appgroups, "with_status": done, "rss_mib": _rss_mib(operator.proc.pid)}
    finally:
        operator.stop()
        await h.delete_namespace(namespace)


async def extender_footprint(h: Harness, ready_within: float) -> dict[str, Any]:
    """The extender's cold start (process start -> Ready, its cache synced) and its RSS then."""
    started = time.monotonic()
    await h.start_toposched(ready_within=ready_within)
    ready = time.monotonic() - started
    await asyncio.sleep(2)
    try:
        pids = [p.pid for p in h.processes if "schedhook" in " ".join(psutil.Process(p.pid).cmdline())]
        return {"rss_mib": _rss_mib(pids[0]), "ready_seconds": round(ready, 2)}
    finally:
        h.stop_all()


SCHEDULERS = ("plain", "toposched", scheduler_plugins.NUMA)
QUICK_SIZES = (1000, 5000)
FULL_SIZES = (1000, 5000, 10_000, 20_000)
EIGHT_ZONES = 5000
"""``--full``: one more size, with eight-zone NRTs with devices."""
HEADROOM = 0.8
"""The share of the machine's available memory a size's control plane may grow into."""
T = TypeVar("T")


@dataclass(frozen=True)
class Size:
    nodes: int
    shape: str = "two-numa"
    """two-numa or eight-zones (eight zones with GPUs and NICs)."""
    backlog_pods: int = 1000
    stream_pods: int = 200
    rate: float = 20.0
    appgroups: int = 1000
    repeats: int = 3
    """Runs per scheduler with raised client limits: the goals are judged on their medians."""
    default_repeats: int = 1
    """Runs per scheduler with kube-scheduler's default limits, shown beside them."""
    http_repeats: int = 50

    @property
    def key(self) -> str:
        return str(self.nodes) if self.shape == "two-numa" else f"{self.nodes}-{self.shape}"

    def runs(self, limits: ClientLimits) -> int:
        return self.repeats if limits == RAISED_LIMITS else self.default_repeats


def sizes(full: bool) -> list[Size]:
    """The quick sizes, or every size. The work per size is the same at every size (the curve is
    the cost of the same work as the cluster grows); ``--full`` times 200 HTTPS pairs, not 50,
    so that their p99 is not their slowest sample, and runs the default limits three times where
    the goals are set (1,000 and 5,000 nodes), once elsewhere."""
    if not full:
        return [Size(n) for n in QUICK_SIZES]
    return [
        *(Size(n, http_repeats=200, default_repeats=3 if n in QUICK_SIZES else 1) for n in FULL_SIZES),
        Size(EIGHT_ZONES, "eight-zones", http_repeats=200),
    ]


def control_plane_mib(kubeconfig: Path) -> float:
    """RSS of this cluster's apiserver and etcd."""
    total = 0
    for pid in control_plane_pids(kubeconfig).values():
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


class StepStoppedError(Exception):
    """A step of a size did not finish: which one, and why."""

    def __init__(self, step: str, reason: str) -> None:
        super().__init__(f"{step}: {reason}")
        self.step, self.reason = step, reason


async def _step(step: str, within: float, work: Awaitable[T]) -> T:
    """``work`` within ``within`` seconds, or :class:`StepStoppedError` naming the step and why."""
    try:
        return await asyncio.wait_for(work, within)
    except TimeoutError as exc:  # the step's own deadline (a watch's, with what it saw) or ours
        raise StepStoppedError(step, str(exc) or f"not done in {within:.0f} s") from None
    except StepStoppedError:
        raise
    except ApiException as exc:  # its text holds every response header
        raise StepStoppedError(step, f"the apiserver answered {exc.status} {exc.reason}") from None
    except (SetupError, OSError, RuntimeError, AssertionError, ValueError) as exc:
        raise StepStoppedError(step, f"{type(exc).__name__}: {exc}"[:400]) from None


async def ready_nodes(h: Harness, tag: str) -> int:
    """How many of the nodes labelled ``tag`` are Ready (listed a page at a time)."""
    ready, token = 0, None
    while True:
        page = await h.core.list_node(label_selector=f"toposched-bench={tag}", limit=2000, _continue=token)
        ready += sum(
            1 for n in page.items if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        )
        token = page.metadata._continue
        if not token:
            return ready


async def _all_ready(h: Harness, tag: str, nodes: int, within: float) -> None:
    deadline = time.monotonic() + within
    seen = 0
    while time.monotonic() < deadline:
        seen = await ready_nodes(h, tag)
        if seen >= nodes:
            return
        await asyncio.sleep(3)
    raise StepStoppedError("nodes", f"{seen} of {nodes} kwok nodes Ready after {within:.0f} s")


async def scale(h: Harness, size: Size, out: dict[str, Any]) -> None:
    """Measure one size into ``out`` step by step (what is measured stays there if a step stops)."""
    tag = uuid.uuid4().hex[:6]
    rng = random.Random(11)
    shape = nrt8 if size.shape == "eight-zones" else nrt
    specs = [
        NodeSpec(f"sc-{tag}-{i:05d}", {"cpu": "128", "memory": "512Gi", "pods": "250"}, nrt=shape("", rng))
        for i in range(size.nodes)
    ]
    out.update(
        nodes=size.nodes,
        shape=size.shape,
        backlog_pods=size.backlog_pods,
        stream_pods=size.stream_pods,
        stream_rate_per_second=size.rate,
        schedulers=list(SCHEDULERS),
        client_limits={
            limits.name: {"qps": limits.qps, "burst": limits.burst, "repeats": size.runs(limits)} for limits in LIMITS
        },
    )
    before = control_plane_mib(h.kubeconfig)
    started = time.monotonic()
    try:
        await _step("nodes", 120 + size.nodes * 0.1, h.create_nodes(specs, tag))
        out["nodes_created_seconds"] = round(time.monotonic() - started, 1)
        await _all_ready(h, tag, size.nodes, 120 + size.nodes * 0.06)  # kwok is slow on a busy machine
        out["control_plane_mib"] = {"before": round(before, 1), "with_nodes": round(control_plane_mib(h.kubeconfig), 1)}
        out["runs"] = {}
        for limits in LIMITS:
            out["runs"][limits.name] = {s: {"backlog": [], "stream": []} for s in SCHEDULERS}
            await _take_turns(h, size, tag, limits, out["runs"][limits.name])
        http = await _step("extender over HTTPS", 1800, asyncio.to_thread(_http, size))
        out["extender_http"] = http
        out["footprint"] = {
            "operator": await _step(
                "operator footprint", 600, operator_footprint(h, size.appgroups, h.work / "operator.log")
            ),
            "extender": await _step(
                "extender cold start", 300 + size.nodes * 0.01, extender_footprint(h, 120 + size.nodes * 0.01)
            ),
        }
    except StepStoppedError as stop:
        out["stopped"] = {"step": stop.step, "reason": stop.reason}
        h.stop_all()
    finally:
        await h.delete_nodes(s.name for s in specs)
    _summarise(out)


async def _take_turns(
    h: Harness, size: Size, tag: str, limits: ClientLimits, runs: dict[str, dict[str, list[dict[str, Any]]]]
) -> None:
    """The backlogs, then the paced streams, of every scheduler in turn, run after run, with
    ``limits``: into ``runs`` (scheduler -> backlog, stream) as each finishes."""
    for repeat in range(size.runs(limits)):
        for scheduler in SCHEDULERS:
            step = f"backlog, {scheduler}, {limits.name} limits, run {repeat + 1}"
            work = backlog(
                h, scheduler, size.backlog_pods, tag, within=600 + size.backlog_pods * 0.2, repeat=repeat, limits=limits
            )
            runs[scheduler]["backlog"].append(await _step(step, 900 + size.backlog_pods * 0.3, work))
    for repeat in range(size.runs(limits)):
        for scheduler in SCHEDULERS:
            step = f"stream, {scheduler}, {limits.name} limits, run {repeat + 1}"
            work = stream(h, scheduler, size.stream_pods, size.rate, tag, repeat, limits)
            runs[scheduler]["stream"].append(await _step(step, 700 + size.stream_pods / size.rate, work))


def _http(size: Size) -> dict[str, Any]:
    """Filter + prioritize over HTTPS for a workload's pod and for new shapes (``bench.schedhook``)."""
    measured = schedhook.run(size.nodes, size.http_repeats, shape=nrt8 if size.shape == "eight-zones" else nrt)
    measured.pop("samples_ms", None)
    return measured


def _summarise(out: dict[str, Any]) -> None:
    """Per client limits, medians with ranges per scheduler from the runs that finished; the
    extender's request figures of the last backlog with raised limits."""
    runs = out.get("runs") or {}
    settle(b for done in runs.values() for scheduler in done.values() for b in scheduler["backlog"])
    for limits, done in runs.items():
        out[limits] = _summary(done)
    raised = ((runs.get(RAISED_LIMITS.name) or {}).get("toposched") or {}).get("backlog")
    if raised:
        out["extender_requests"] = raised[-1].get("extender", {})
    for done in runs.values():  # the raw runs are summarised; the latencies of each are large
        for scheduler in done.values():
            for r in scheduler["stream"]:
                r.pop("latencies_ms", None)


def _summary(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """Each scheduler's figures; each run's ratios against kube-scheduler alone's run just before
    it (the same machine state): throughput, and the extender's CPU per pod to kube-scheduler's."""
    summary = {scheduler: _figures(done["backlog"], done["stream"]) for scheduler, done in runs.items()}
    alone = (runs.get("plain") or {}).get("backlog", [])
    for scheduler in SCHEDULERS[1:]:
        mine = (runs.get(scheduler) or {}).get("backlog", [])
        pairs = list(zip(mine, alone, strict=False))
        ratios = [b["pods_per_second"] / a["pods_per_second"] for b, a in pairs if a["pods_per_second"]]
        if ratios:
            summary[scheduler]["throughput_ratio"] = spread([round(r, 2) for r in ratios])
        cpu = [(b.get("cpu_ms_per_pod") or {}, a.get("cpu_ms_per_pod") or {}) for b, a in pairs]
        cpu_ratios = [b[EXTENDER] / a[SCHEDULER] for b, a in cpu if EXTENDER in b and a.get(SCHEDULER)]
        if cpu_ratios:
            summary[scheduler]["extender_cpu_ratio"] = spread([round(r, 2) for r in cpu_ratios])
    return summary


def _figures(backlogs: list[dict[str, Any]], streams: list[dict[str, Any]]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    if backlogs:
        figures["pods_per_second"] = spread([b["pods_per_second"] for b in backlogs])
        cpu = [b.get("cpu_ms_per_pod") or {} for b in backlogs]
        figures["cpu_ms_per_pod"] = {
            process: spread([c[process] for c in cpu if process in c])
            for process in PATH
            if any(process in c for c in cpu)
        }
    if streams:
        figures["stream_p99_ms"] = spread([r["latency_ms"]["p99"] for r in streams])
        figures["stream_median_ms"] = spread([r["latency_ms"]["median"] for r in streams])
        middle = sorted(streams, key=lambda r: r["latency_ms"]["p99"])[len(streams) // 2]
        figures["latencies_ms"] = middle["latencies_ms"]  # the run with the median p99, for the CDF
        if any("stalls" in r for r in streams):  # per run: waits in vain, of so many filters
            figures["stream_stalls"] = [r.get("stalls", 0) for r in streams]
            figures["stream_filters"] = [(r.get("extender", {}).get("filter") or {}).get("count", 0) for r in streams]
    return figures


def measured(curve: dict[str, Any]) -> dict[str, Any] | None:
    """``curve`` if any size of it ran a scheduler (None: every size stopped or was skipped before)."""
    return curve if any((sc.get("runs") or {}) for sc in curve.values()) else None


def _room(size: Size, measured: list[tuple[int, float]]) -> str | None:
    """Why the machine cannot hold ``size`` (None: it can, as far as the sizes before it tell)."""
    if not measured:
        return None
    nodes, grown = max(measured)
    per_node = max(grown, 0.0) / nodes
    need = per_node * size.nodes * (4 if size.shape == "eight-zones" else 1)
    free = psutil.virtual_memory().available / 2**20
    if need > HEADROOM * free:
        return (
            f"the apiserver and etcd would grow by about {need / 1024:.1f} GiB ({per_node * 1024:.0f} KiB per node "
            f"measured at {nodes} nodes); {free / 1024:.1f} GiB are available"
        )
    return None


def run(
    kubeconfig: Path,
    work: Path,
    full: bool = False,
    plan: list[Size] | None = None,
    measured_so_far: Callable[[dict[str, Any]], None] = lambda curve: None,
) -> dict[str, Any]:
    """The curve over ``plan`` (default: the quick or the full sizes), keyed by size;
    ``measured_so_far`` gets the curve after each size (a run cut short keeps what it measured)."""
    plan = plan if plan is not None else sizes(full)

    async def main() -> dict[str, Any]:
        curve: dict[str, Any] = {}
        measured: list[tuple[int, float]] = []
        async with Harness(kubeconfig, work) as h:
            for size in plan:
                why = _room(size, measured)
                if why is not None:
                    curve[size.key] = {"nodes": size.nodes, "shape": size.shape, "skipped": why}
                    continue
                out: dict[str, Any] = {}
                curve[size.key] = out
                await scale(h, size, out)
                measured_so_far(curve)
                cp = out.get("control_plane_mib")
                if cp and size.shape == "two-numa":
                    measured.append((size.nodes, cp["with_nodes"] - cp["before"]))
                if "stopped" in out:  # larger sizes would stop there too
                    for later in plan[plan.index(size) + 1 :]:
                        curve.setdefault(
                            later.key,
                            {"nodes": later.nodes, "shape": later.shape, "skipped": f"{size.key} stopped"},
                        )
                    break
        return curve

    return asyncio.run(main())
