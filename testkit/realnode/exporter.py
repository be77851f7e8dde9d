"""The real ``toposched exporter`` daemon for a real node, as its DaemonSet pod would run it.

It reads what the node's kubelet reads: a sysfs root assembled from the node's fake trees
(``exporter/sys`` under the node's directory: ``devices/system/cpu``, ``devices/system/node`` and
``kernel/mm/hugepages`` link to ``fakehost/``), the node's kubelet configuration file, its state
directory and its PodResources socket, and it publishes to the local cluster with its admin
kubeconfig. Without the socket (``podresources=False``) it runs in estimate mode.

The daemon runs in the node's cgroups (``<node>/exporter``), so removing the node, or
``make cluster-down``, stops it too: nothing outlives its node. Every wait is bounded.

    exporter = start_exporter(node)            # returns once /healthz answers
    ...
    exporter.stop()                            # or: with running_exporter(node) as exporter: ...
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testkit.realnode import host
from testkit.realnode.cluster import REPO
from testkit.realnode.errors import RealNodeError
from testkit.realnode.node import RealNode
from toposched.apis.constants import NRT_ATTR_KUBELET_RESTART

EXPORTER_CGROUP = "exporter"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sysfs_view(node: RealNode) -> Path:
    """A directory standing for the node's /sys, as far as the exporter reads it (idempotent)."""
    root = node.layout.root / EXPORTER_CGROUP / "sys"
    links = {
        root / "devices" / "system" / "cpu": node.layout.fakehost / "cpu",
        root / "devices" / "system" / "node": node.layout.fakehost / "node",
        root / "kernel" / "mm" / "hugepages": node.layout.fakehost / "hugepages",
    }
    for link, target in links.items():
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(target, target_is_directory=True)
    return root


def health_status(port: int, path: str) -> int | None:
    """The HTTP status of an exporter's health server on 127.0.0.1:``port`` (None: no answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return None


@dataclass
class NodeExporter:
    """One running ``toposched exporter`` of a real node."""

    node: RealNode
    proc: subprocess.Popen[bytes]
    health_port: int
    metrics_port: int
    log: Path
    podresources: bool
    """False: estimate mode (the daemon was given no PodResources socket)."""
    args: list[str] = field(default_factory=list)

    def running(self) -> bool:
        return self.proc.poll() is None

    def _status(self, path: str) -> int | None:
        return health_status(self.health_port, path)

    def healthy(self) -> bool:
        return self._status("/healthz") == 200

    def ready(self) -> bool:
        """/readyz: the NRT was confirmed current recently and PodResources answers."""
        return self._status("/readyz") == 200

    def log_tail(self, lines: int = 30) -> str:
        if not self.log.is_file():
            return "(no log)"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def usage(self) -> tuple[int, int, float]:
        """(RSS bytes, PSS bytes, CPU seconds so far) of the daemon."""
        return process_usage(self.proc.pid)

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; idempotent."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def ensure_running(self) -> None:
        if not self.running():
            raise RealNodeError(
                f"the exporter of {self.node.name} exited with status {self.proc.returncode}\n{self.log_tail()}"
            )


def start_exporter(
    node: RealNode,
    *,
    podresources: bool = True,
    period: float = 10.0,
    list_interval: float = 0.2,
    watch_state_files: bool = True,
    fingerprint_method: str = "with-exclusive-resources",
    metrics: bool = False,
    timeout: float = 30,
) -> NodeExporter:
    """Start the daemon for ``node`` and return once it answers /healthz (at most ``timeout`` s).

    ``podresources=False`` gives it a socket path that does not exist (estimate mode);
    ``watch_state_files=False`` (with a long ``list_interval`` and ``period``) makes a lagging
    exporter, for stale-NRT scenarios.
    """
    node.ensure_running()
    work = node.layout.root / EXPORTER_CGROUP
    work.mkdir(parents=True, exist_ok=True)
    sysfs = sysfs_view(node)
    socket_path = node.pod_resources_socket if podresources else work / "no-podresources.sock"
    state_dir = node.layout.kubelet_root if watch_state_files else work / "no-state-files"
    state_dir.mkdir(exist_ok=True)
    health, metrics_port = _free_port(), _free_port() if metrics else 0
    args = [
        *("--node", node.name, "--sysfs", str(sysfs), "--kubelet-config", str(node.layout.kubelet_config)),
        *("--podresources", str(socket_path), "--kubelet-state-dir", str(state_dir)),
        *("--period", f"{period:g}", "--list-interval", f"{list_interval:g}"),
        *("--fingerprint-method", fingerprint_method),
        *("--metrics-port", str(metrics_port), "--health-port", str(health)),
    ]
    procs = host.create_child_cgroup(node.name, EXPORTER_CGROUP)
    env = {**os.environ, "KUBECONFIG": str(node.cluster.kubeconfig), "PYTHONUNBUFFERED": "1"}
    env.pop("NODE_NAME", None)
    log = work / "exporter.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "toposched", "exporter", *args],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=host.joining(procs),
            start_new_session=True,
        )
    exporter = NodeExporter(node, proc, health, metrics_port, log, podresources, args)
    deadline = time.monotonic() + timeout
    while not exporter.healthy():
        if not exporter.running():
            exporter.ensure_running()
        if time.monotonic() > deadline:
            exporter.stop()
            raise RealNodeError(
                f"the exporter of {node.name} did not answer /healthz within {timeout:.0f} s\n{exporter.log_tail()}"
            )
        time.sleep(0.1)
    return exporter


@contextlib.contextmanager
def running_exporter(node: RealNode, **options: Any) -> Iterator[NodeExporter]:
    """:func:`start_exporter`, stopped when the block ends (however it ends)."""
    exporter = start_exporter(node, **options)
    try:
        yield exporter
    finally:
        exporter.stop()


def process_usage(pid: int) -> tuple[int, int, float]:
    """(RSS bytes, PSS bytes, CPU seconds so far) of one process; zeros when it is gone."""
    rss = pss = 0
    cpu = 0.0
    with contextlib.suppress(OSError, ValueError, IndexError, StopIteration):
        status = Path("/proc", str(pid), "status").read_text()
        rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")) * 1024
        rollup = Path("/proc", str(pid), "smaps_rollup").read_text()
        pss = next(int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")) * 1024
        fields = Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return rss, pss, cpu


def published_nrt(node: RealNode) -> dict[str, Any] | None:
    """The node's NodeResourceTopology as stored (None when there is none yet)."""
    return node.cluster.get_json("noderesourcetopologies.topology.node.k8s.io", node.name)


def nrt_attributes(nrt: dict[str, Any]) -> dict[str, str]:
    return {str(a["name"]): str(a["value"]) for a in nrt.get("attributes") or []}


def wait_agreement(exporter: NodeExporter, within: float, *, available: bool = True) -> float:
    """Seconds until the node's published NRT equals its kubelet's own per-zone accounting, device
    groups included (see :mod:`testkit.realnode.accounting`; ``available=False``: allocatable
    only). Fails fast when the kubelet or the exporter dies; after ``within`` seconds it raises
    with the differences."""
    started = time.monotonic()
    last = ["no NRT published"]
    while True:
        exporter.node.ensure_running()
        exporter.ensure_running()
        last = nrt_differences(exporter.node, available=available)
        if not last:
            return time.monotonic() - started
        if time.monotonic() - started > within:
            raise RealNodeError(
                f"the NRT of {exporter.node.name} still differs from its kubelet after {within:.0f} s:\n"
                + "\n".join(last)
            )
        time.sleep(0.2)


def nrt_differences(node: RealNode, *, available: bool = True) -> list[str]:
    """How the node's published NRT differs from its kubelet's own accounting, per zone and per
    device group (empty: it agrees), whichever exporter published it (this module's daemon or the
    chart's DaemonSet pod)."""
    from testkit.realnode import accounting

    nrt = published_nrt(node)
    if nrt is None:
        return ["no NRT published"]
    # A kubelet admitting its first pods since it started still holds what stale entries hold;
    # the NRT says when it counts them so (toposched.exporter.restarts).
    active = None if NRT_ATTR_KUBELET_RESTART in nrt_attributes(nrt) else accounting.active_pod_uids(node)
    zones = accounting.differences(
        accounting.kubelet_figures(node, active), accounting.nrt_figures(nrt), available=available
    )
    groups = accounting.differences(
        accounting.kubelet_device_groups(node, active), accounting.nrt_device_groups(nrt), available=available
    )
    return zones + groups
