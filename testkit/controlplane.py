"""The local control plane's components as processes: which run, and stopping and starting one
(an apiserver restart in a recovery test) the way kwokctl started it.

kwokctl's binary runtime keeps each component's command line in ``kwok.yaml`` and its pid in
``pids/<name>.pid``; a component started here goes back into that pid file, so ``make
cluster-down`` stops it like the others.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from testkit.paths import REPO

CLUSTER_DIR = REPO / ".cluster" / "kwok" / "clusters" / "toposched"


@dataclass(frozen=True)
class Component:
    name: str
    binary: str
    args: tuple[str, ...]
    workdir: Path
    cluster_dir: Path = CLUSTER_DIR
    """kwokctl's directory of the cluster it belongs to (default: the local cluster's)."""

    @property
    def pid_file(self) -> Path:
        return self.cluster_dir / "pids" / f"{self.name}.pid"

    @property
    def log(self) -> Path:
        return self.cluster_dir / "logs" / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def running(self) -> bool:
        pid = self.pid()
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"

    def stop(self, sig: signal.Signals = signal.SIGTERM, grace: float = 15) -> float:
        """Stop it with ``sig``; after ``grace`` seconds, SIGKILL (as a kubelet ends a pod's grace
        period). Returns how long it took. (A kube-apiserver with watches open can take minutes
        to finish a SIGTERM.)"""
        pid = self.pid()
        started = time.monotonic()
        if pid is None or not self.running():
            return 0.0
        os.kill(pid, sig)
        while self.running():
            if time.monotonic() - started > grace:
                os.kill(pid, signal.SIGKILL)
                grace = float("inf")
            time.sleep(0.05)
        return time.monotonic() - started

    def start(self, attempts: int = 10) -> int:
        """Start it; while it exits within a second (its port still held a moment after a
        kill), start it again, up to ``attempts`` times."""
        for _ in range(attempts - 1):
            pid = self._launch()
            time.sleep(1)
            if self.running():
                return pid
        return self._launch()

    def _launch(self) -> int:
        if self.running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid()})")
        # Started through a shell that exits at once, so the component is nobody's child here
        # (as under kwokctl) and outlives this process without a Popen to reap it.
        launcher = subprocess.run(
            ["sh", "-c", 'exec 0</dev/null; "$0" "$@" >>"$LOG" 2>&1 & echo $!', self.binary, *self.args],
            cwd=self.workdir,
            env={**os.environ, "LOG": str(self.log)},
            capture_output=True,
            text=True,
            check=True,
            start_new_session=True,
        )
        pid = int(launcher.stdout.strip())
        self.pid_file.write_text(f"{pid}\n")
        return pid


def components(cluster_dir: Path = CLUSTER_DIR) -> dict[str, Component]:
    """The cluster's components from kwokctl's record of them (``kwok.yaml``, first document);
    ``cluster_dir``: another kwokctl cluster's directory than the local cluster's."""
    path = cluster_dir / "kwok.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the local cluster was never created (make cluster)")
    document = next(iter(yaml.safe_load_all(path.read_text())))
    return {
        c["name"]: Component(
            c["name"], c["binary"], tuple(c.get("args") or ()), Path(c.get("workDir") or cluster_dir), cluster_dir
        )
        for c in document.get("components") or []
    }
