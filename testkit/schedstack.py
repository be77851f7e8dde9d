"""toposched's scheduling stack as local processes against the local cluster: ``toposched
schedhook`` (extender, remediation, order gates; no webhooks) and a second kube-scheduler with the
shipped profile (``charts/toposched/files/kube-scheduler-config.yaml``) calling it.

Both speak HTTPS with certificates made in ``work/pki``, as in the chart. Start and stop are
bounded; the logs stay in ``work``.

    with scheduler_stack(kubeconfig, work) as stack:   # pods with schedulerName: toposched
        ...
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testkit.certs import ExtenderPKI, extender_pki
from testkit.extender import ready, schedhook_tls_args, scheduler_config
from testkit.paths import REPO


class StackError(RuntimeError):
    """The stack could not start; the message carries the logs' tails."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.is_file() else "(no log)"


def bin_dir() -> Path:
    done = subprocess.run([str(REPO / "hack" / "build-binaries.sh"), "--print"], capture_output=True, text=True)
    path = Path(done.stdout.strip())
    if done.returncode != 0 or not (path / "kube-scheduler").is_file():
        raise StackError("the Kubernetes binaries are not built: run `make binaries`")
    return path


@dataclass
class SchedulerStack:
    kubeconfig: Path
    work: Path
    extender_args: Sequence[str] = ()
    profile: str = "toposched"
    port: int = field(default_factory=_free_port)
    """The extender's HTTPS port (the tests' own calls)."""
    loopback_port: int = field(default_factory=_free_port)
    """Where kube-scheduler calls it: plain HTTP on loopback, as the chart's sidecar is called."""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    pki: ExtenderPKI | None = None

    def log(self, name: str) -> Path:
        return self.work / f"{name}.log"

    def _start(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        with self.log(name).open("ab") as out:
            proc = subprocess.Popen(args, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        self.processes[name] = proc
        return proc

    def start(self, timeout: float = 60) -> None:
        """The extender first (ready once its cache synced), then kube-scheduler."""
        self.work.mkdir(parents=True, exist_ok=True)
        pki = self.pki = extender_pki(self.work / "pki")
        self._start_extender(timeout)
        config = scheduler_config(self.kubeconfig, self.loopback_port, pki, loopback=True)
        path = self.work / f"{self.profile}.yaml"
        path.write_text(config.replace("schedulerName: toposched", f"schedulerName: {self.profile}"))
        command = [str(bin_dir() / "kube-scheduler"), f"--config={path}", "--secure-port=0", "-v=2"]
        scheduler = self._start("kube-scheduler", command)
        time.sleep(1)
        if scheduler.poll() is not None:
            self.stop()
            raise StackError(f"kube-scheduler exited:\n{_tail(self.log('kube-scheduler'))}")

    def _start_extender(self, timeout: float) -> None:
        assert self.pki is not None
        args = [sys.executable, "-m", "toposched", "schedhook", "--address", "127.0.0.1", "--port", str(self.port)]
        args += ["--loopback-port", str(self.loopback_port), "--metrics-port", "0", *schedhook_tls_args(self.pki)]
        extender = self._start("extender", [*args, *self.extender_args])
        deadline = time.monotonic() + timeout
        while not ready(self.port, self.pki):
            if extender.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise StackError(f"the extender did not become ready:\n{_tail(self.log('extender'))}")
            time.sleep(0.2)

    def restart_extender(self, timeout: float = 60) -> None:
        """Kill the extender (SIGKILL: nothing of it is kept) and start a new one on the same ports;
        kube-scheduler keeps running, and its queue."""
        old = self.processes.pop("extender")
        old.kill()
        old.wait(10)
        self._start_extender(timeout)

    def stop(self, timeout: float = 15) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.processes.values():
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.processes.clear()


@contextlib.contextmanager
def scheduler_stack(kubeconfig: Path, work: Path, extender_args: Sequence[str] = ()) -> Iterator[SchedulerStack]:
    stack = SchedulerStack(kubeconfig, work, extender_args)
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()
