"""One fault run: the scene up, the pod stream on, the faults of the schedule one after another
until the time is up, then the figures and the closing line."""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from testkit.chaos.faults import Faults, Recovery
from testkit.chaos.plane import Plane, PlaneError
from testkit.chaos.scene import KWOK_LABELS, NAMESPACE, PROFILE, Scene
from testkit.chaos.schedule import KINDS, fault_count, schedule
from testkit.chaos.stream import Stream
from testkit.large_nrt import NRTS
from testkit.paths import REPO
from testkit.realnode.exporter import process_usage
from toposched.apis.constants import NRT_ATTR_PODS_FINGERPRINT as FINGERPRINT
from toposched.kube.watch import follow

WARMUP = 20.0
"""Seconds of pod stream before the first fault (and before the extender's RSS is first taken)."""
SETTLE = 30.0
"""Seconds after the stream stops for the last pods' kubelets to decide."""
MIB = 2**20


@dataclass(frozen=True)
class Options:
    seconds: float = 1200.0
    seed: int = 1
    real: int = 3
    kwok: int = 4
    exporter_period: float = 10.0
    gap: tuple[float, float] = (20.0, 40.0)
    root: Path = REPO / ".cluster" / "chaos"
    """The run's control plane lives in ``root/plane`` (kept between runs), each run's logs in ``root/runs``."""


@dataclass
class Outcome:
    options: Options
    stream: dict[str, Any]
    recoveries: list[Recovery]
    rss: tuple[int, int]
    tracebacks: dict[str, int]
    binds_resumed: list[float | None] = field(default_factory=list)
    """Per apiserver fault: seconds from its readiness to kube-scheduler's next bind (None: none)."""
    rss_series: list[tuple[float, int]] = field(default_factory=list)
    """(seconds into the run, the extender's RSS) after each fault."""
    work: Path = Path()

    def longest(self) -> Recovery | None:
        return max(self.recoveries, key=lambda r: r.seconds, default=None)

    def warm_rss(self) -> int | None:
        """The extender's RSS once every kind of fault has happened (the schedule's first round):
        what it holds for the largest NRT's rewrites, watches listed again and the like is in, so
        growth from there is what keeps growing (None: the run ended before)."""
        seen: set[str] = set()
        for recovery, (_, rss) in zip(self.recoveries, self.rss_series, strict=False):
            seen.add(recovery.fault.kind)
            if len(seen) == len(KINDS):
                return rss
        return None

    def goals_met(self) -> bool:
        longest = self.longest()
        return (
            self.stream["topologyAffinityErrors"] == 0
            and not self.stream["blindPasses"]
            and (longest is None or longest.seconds <= 5.0)
            and self.rss[1] <= (self.warm_rss() or self.rss[0]) * 1.1
            and sum(self.tracebacks.values()) == 0
        )

    def line(self) -> str:
        longest = self.longest()
        where = ""
        if longest is not None:
            where = f" ({longest.fault.kind}{' on ' + longest.fault.target if longest.fault.target else ''})"
        start, end = (r / MIB for r in self.rss)
        growth = (end - start) / start * 100 if start else 0.0
        warm = self.warm_rss()
        since = f"; {(self.rss[1] - warm) / warm * 100:+.1f}% after every fault once" if warm else ""
        return (
            f"chaos {self.options.seconds / 60:.0f} min, seed {self.options.seed}, {len(self.recoveries)} faults: "
            f"{self.stream['placed']} pods placed, {self.stream['topologyAffinityErrors']} TopologyAffinityErrors, "
            f"{len(self.stream['blindPasses'])} pods wrongly passed while blind, "
            f"longest recovery {longest.seconds if longest else 0.0:.1f} s{where}, "
            f"extender RSS {start:.1f} -> {end:.1f} MiB ({growth:+.1f}%{since}), "
            f"{sum(self.tracebacks.values())} tracebacks"
        )

    def figures(self) -> dict[str, Any]:
        return {
            "options": {**asdict(self.options), "root": str(self.options.root)},
            "line": self.line(),
            "goalsMet": self.goals_met(),
            "stream": self.stream,
            "faults": [
                {
                    "kind": r.fault.kind,
                    "target": r.fault.target,
                    "seconds": r.seconds,
                    "parts": r.parts,
                    "detail": r.detail,
                }
                for r in self.recoveries
            ],
            "faultKinds": sorted({r.fault.kind for r in self.recoveries}),
            "bindsResumed": self.binds_resumed,
            "extenderRss": list(self.rss),
            "extenderRssWarm": self.warm_rss(),
            "extenderRssSeries": self.rss_series,
            "tracebacks": self.tracebacks,
            "logs": str(self.work),
        }


async def run(options: Options, say: Callable[[str], None]) -> Outcome:
    options.root.mkdir(parents=True, exist_ok=True)
    with (options.root / ".lock").open("w") as lock:
        try:  # one run at a time: they would share the control plane and the nodes' names
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PlaneError(f"another fault run is using {options.root}; wait for it to end") from None
        return await _run(options, say)


async def _run(options: Options, say: Callable[[str], None]) -> Outcome:
    work = options.root / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-seed{options.seed}"
    work.mkdir(parents=True)
    log = logging.FileHandler(work / "chaos.log")
    log.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(log)
    logging.getLogger().setLevel(logging.INFO)
    real = [f"chaos-r{i}" for i in range(options.real)]
    kwok = [f"chaos-k{i}" for i in range(options.kwok)]
    scene = Scene(Plane(options.root / "plane"), work, options.exporter_period, real, kwok)
    try:
        await scene.start(say)
        outcome = await _faults(scene, options, say)
        outcome.work = work
    finally:
        say("stopping: the run's components, its real nodes and its control plane")
        await scene.stop()
        logging.getLogger().removeHandler(log)
    return outcome


async def _faults(scene: Scene, options: Options, say: Callable[[str], None]) -> Outcome:
    stack = scene.stack
    assert stack is not None
    extender = stack.processes["extender"].pid
    stream = Stream(scene.kube, NAMESPACE, PROFILE, KWOK_LABELS, options.seed)
    stop = asyncio.Event()
    began = time.monotonic()
    deadline = began + options.seconds
    recoveries: list[Recovery] = []
    series: list[tuple[float, int]] = []
    async with aiohttp.ClientSession() as session:
        faults = Faults(scene, session)
        streaming = asyncio.create_task(stream.run(stop, settle=SETTLE))
        recording = asyncio.create_task(record_nrts(scene, scene.work / "nrts.jsonl", began))
        say(f"pod stream on; faults from seed {options.seed} for {options.seconds / 60:.1f} min")
        await asyncio.sleep(WARMUP)
        rss_start = process_usage(extender)[0]
        count = fault_count(options.seconds, options.gap)
        for fault in schedule(options.seed, count, scene.real_names, scene.kwok_names, options.gap):
            if time.monotonic() + fault.gap >= deadline:
                break
            await asyncio.sleep(fault.gap)
            say(f"{time.monotonic() - began:6.0f} s  {fault.kind}{' on ' + fault.target if fault.target else ''}")
            recovery = await faults.inject(fault)
            recoveries.append(recovery)
            series.append((round(time.monotonic() - began), process_usage(extender)[0]))
            say(f"{time.monotonic() - began:6.0f} s    {recovery.line()}")
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))
        stop.set()
        await streaming
        recording.cancel()
        await asyncio.gather(recording, return_exceptions=True)
    rss_end = process_usage(extender)[0]
    pods = [asdict(r) | {"began": began} for r in stream.pods.values()]  # monotonic times, as the NRTs' file
    (scene.work / "pods.json").write_text(json.dumps(pods, indent=1) + "\n")
    logs = [*scene.logs(), scene.work / "chaos.log"]
    tracebacks = {_shown(p, scene.work): p.read_text(errors="replace").count("Traceback") for p in logs if p.is_file()}
    resumed = [stream.first_bound_after(back) for back in faults.outages]
    return Outcome(options, stream.tally(began), recoveries, (rss_start, rss_end), tracebacks, resumed, series)


async def record_nrts(scene: Scene, path: Path, began: float) -> None:
    """Until cancelled: each version of the real nodes' NRTs as it arrives (seconds into the run,
    its pods fingerprint, each zone's free CPUs and memory), for whoever reads why a pod failed."""
    real = set(scene.real_names)

    def seen(_: str, nrt: dict[str, Any]) -> None:
        if nrt["metadata"]["name"] not in real:
            return
        attributes = {a.get("name"): a.get("value") for a in nrt.get("attributes") or []}
        free = {
            z["name"]: {r["name"]: r["available"] for r in z.get("resources") or [] if r["name"] in ("cpu", "memory")}
            for z in nrt.get("zones") or []
        }
        line = {"at": round(time.monotonic() - began, 2), "node": nrt["metadata"]["name"]}
        line |= {"version": nrt["metadata"].get("resourceVersion"), "fingerprint": attributes.get(FINGERPRINT)}
        with path.open("a") as out:
            out.write(json.dumps(line | {"free": free}) + "\n")

    def listed(items: list[dict[str, Any]]) -> None:
        for item in items:
            seen("LISTED", item)

    lister = partial(client.CustomObjectsApi(scene.kube).list_cluster_custom_object, *NRTS)
    await follow(lister, listed, seen, "nrts")


def _shown(path: Path, work: Path) -> str:
    return str(path.relative_to(work)) if path.is_relative_to(work) else str(path)
