"""CPU per scheduled pod of each process on the scheduling path, from /proc.

The processes: the scheduler under test (kube-scheduler, or scheduler-plugins' build of it), the
toposched extender when there is one, and the local control plane's kube-apiserver and etcd (found
by the pid files kwokctl writes for ``hack/cluster.sh``, so a second cluster on the machine is not
counted). Each figure is the process's user + system CPU between two samples, divided by the pods
bound between them, less what the process spends when nothing is scheduled: the kwok nodes'
heartbeats reach the control plane and, through their informers, the schedulers, at a rate that
grows with the nodes and not with the pods. That idle rate is measured apart and taken off, so a
slower scheduler is not charged more of it per pod: a scheduler's once its last pod is bound and
settled; the control plane's also just before each scheduler starts, and what counts is the
lowest rate of all the runs on the same nodes (a window that still serves earlier work, such as
the nodes' creation or the last pods' status updates, only reads higher). Each run keeps its raw
window (:func:`window`), so the figures per pod are made once every run on the nodes is done
(:func:`settle`). CPU-seconds, unlike wall time, do not grow when other work shares the machine's
cores.
"""

import asyncio
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

SCHEDULER, EXTENDER, APISERVER, ETCD = "kube-scheduler", "extender", "kube-apiserver", "etcd"
PATH = (SCHEDULER, EXTENDER, APISERVER, ETCD)
"""Every process a scheduled pod costs CPU in, in the order the report lists them."""
CONTROL_PLANE = (APISERVER, ETCD)


def control_plane_pids(kubeconfig: Path) -> dict[str, int]:
    """kube-apiserver's and etcd's pids, from the pid files beside ``kubeconfig`` (none found: empty)."""
    found: dict[str, int] = {}
    for name in CONTROL_PLANE:
        for pid_file in sorted(kubeconfig.parent.glob(f"kwok/clusters/*/pids/{name}.pid")):
            text = pid_file.read_text().strip()
            if text.isdigit() and psutil.pid_exists(int(text)):
                found[name] = int(text)
    return found


def role(cmdline: Iterable[str]) -> str | None:
    """Which process of the path a command line starts (None: not one of them, e.g. the operator)."""
    args = list(cmdline)
    if "schedhook" in args:
        return EXTENDER
    if any(a.startswith("--config=") for a in args):
        return SCHEDULER
    return None


def scheduler_pids(pids: Iterable[int]) -> dict[str, int]:
    """The scheduler and extender among ``pids`` (the harness's processes), by role."""
    found: dict[str, int] = {}
    for pid in pids:
        try:
            name = role(psutil.Process(pid).cmdline())
        except psutil.Error:
            continue
        if name is not None:
            found[name] = pid
    return found


def cpu_seconds(pids: Mapping[str, int]) -> dict[str, float]:
    """User + system CPU-seconds so far of each process (one that is gone is left out)."""
    out: dict[str, float] = {}
    for name, pid in pids.items():
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        out[name] = times.user + times.system
    return out


@dataclass(frozen=True)
class Sample:
    at: float
    """time.monotonic()"""
    pods: int
    """Pods bound so far."""
    cpu: dict[str, float]


def window(first: Sample, last: Sample, idle: Mapping[str, float]) -> dict[str, Any]:
    """What a run's CPU figures are made of: the pods bound and seconds between ``first`` and
    ``last``, each process's CPU-seconds in between, and its ``idle`` rate (CPU-seconds per second)."""
    return {
        "pods": last.pods - first.pods,
        "seconds": round(last.at - first.at, 3),
        "cpu_seconds": {n: round(last.cpu[n] - first.cpu[n], 3) for n in PATH if n in first.cpu and n in last.cpu},
        "idle": {n: round(rate, 4) for n, rate in idle.items()},
    }


def per_pod_ms(run: Mapping[str, Any], idle: Mapping[str, float]) -> dict[str, float]:
    """CPU-milliseconds per pod of each process in ``run`` (a :func:`window`), less ``idle`` over its seconds."""
    if run["pods"] <= 0:
        return {}
    return {
        name: round(1000 * max(0.0, used - idle.get(name, 0.0) * run["seconds"]) / run["pods"], 3)
        for name, used in run["cpu_seconds"].items()
    }


def settle(runs: Iterable[dict[str, Any]]) -> None:
    """Sets ``cpu_ms_per_pod`` of every run (each with its ``cpu`` window) on the same nodes: its
    schedulers less their own idle rate, the control plane less the lowest of every run's."""
    windows = [r for r in runs if "cpu" in r]
    quiet = lowest(*({n: v for n, v in r["cpu"]["idle"].items() if n in CONTROL_PLANE} for r in windows))
    for r in windows:
        r["cpu_ms_per_pod"] = per_pod_ms(r["cpu"], {**r["cpu"]["idle"], **quiet})


def lowest(*rates: Mapping[str, float]) -> dict[str, float]:
    """Per process, the lowest of the idle ``rates`` it was measured in."""
    out: dict[str, float] = {}
    for measured in rates:
        for name, rate in measured.items():
            out[name] = min(rate, out.get(name, rate))
    return out


class Meter:
    """Samples the path's processes: the control plane's from the start, the schedulers' once added."""

    def __init__(self, kubeconfig: Path) -> None:
        self.pids = control_plane_pids(kubeconfig)

    def sample(self, pods: int) -> Sample:
        return Sample(time.monotonic(), pods, cpu_seconds(self.pids))

    async def idle(self, seconds: float, only: Collection[str] = PATH) -> dict[str, float]:
        """CPU-seconds per second of the processes named in ``only`` over ``seconds`` with nothing to schedule."""
        before = self.sample(0)
        await asyncio.sleep(seconds)
        after = self.sample(0)
        elapsed = after.at - before.at
        return {n: (after.cpu[n] - before.cpu[n]) / elapsed for n in only if n in before.cpu and n in after.cpu}

    def add_schedulers(self, pids: Iterable[int]) -> None:
        self.pids.update(scheduler_pids(pids))
