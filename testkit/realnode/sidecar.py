"""A process a real node runs beside its kubelet (its device plugin, its DRA driver), seen from
the test kit: started in a child cgroup of the node (so that removing or resetting the node kills
it), stopped, and read back through its call log.

The log has one line per call or event, ``TIME METHOD SUBJECT IDS [KEY=VALUE...]`` (SUBJECT: the
resource or driver the line is about), written by the process and parsed here. Standard library
only, like the rest of :mod:`testkit.realnode`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Protocol

from testkit.realnode import host
from testkit.realnode.cluster import REPO, LocalCluster
from testkit.realnode.errors import RealNodeError
from testkit.realnode.layout import NodeLayout
from testkit.realnode.topology import Topology

_MESSAGE = "message"
STOP_GRACE = 10.0

# Popen objects of the processes this process started, by (node, cgroup), reaped when they stop.
_PROCESSES: dict[tuple[str, str], subprocess.Popen[bytes]] = {}


def reap(node: str) -> None:
    """Forget (and reap) every process this process started beside ``node``'s kubelet, once the
    node's teardown has killed them."""
    for key in [k for k in _PROCESSES if k[0] == node]:
        proc = _PROCESSES.pop(key)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)


@dataclass(frozen=True)
class PluginCall:
    """One line of a call log: a call (or an event) with its subject and ids."""

    time: str
    method: str
    resource: str
    ids: tuple[str, ...]
    detail: Mapping[str, str]

    @property
    def generation(self) -> int:
        """The configuration's generation the process served when it logged this (0: not said)."""
        return int(self.detail.get("generation", 0))


def format_call(method: str, resource: str, ids: list[str] | tuple[str, ...], **detail: object) -> str:
    """A log line: ``TIME METHOD SUBJECT IDS [KEY=VALUE...]``; ``-`` for no subject or no ids,
    a ``message`` (free text) last."""
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
    message = detail.pop(_MESSAGE, None)
    fields = [stamp, method, resource or "-", ",".join(ids) or "-"]
    fields += [f"{key}={value}" for key, value in detail.items()]
    if message is not None:
        fields.append(f"{_MESSAGE}={' '.join(str(message).split())}")
    return " ".join(fields)


def parse_calls(text: str) -> list[PluginCall]:
    """The calls and events of a log (other lines, a traceback say, are skipped)."""
    calls = []
    for line in text.splitlines():
        parts = line.split(" ", 4)
        if len(parts) < 4 or not parts[0][:4].isdigit() or "T" not in parts[0]:
            continue
        stamp, method, resource, ids = parts[:4]
        detail: dict[str, str] = {}
        rest = parts[4] if len(parts) == 5 else ""
        while rest:
            if rest.startswith(f"{_MESSAGE}="):
                detail[_MESSAGE] = rest.removeprefix(f"{_MESSAGE}=")
                break
            token, _, rest = rest.partition(" ")
            key, _, value = token.partition("=")
            detail[key] = value
        calls.append(
            PluginCall(
                stamp,
                method,
                "" if resource == "-" else resource,
                () if ids == "-" else tuple(ids.split(",")),
                detail,
            )
        )
    return calls


def wait_until(done: Callable[[], bool], within: float, what: Callable[[], str], tails: Callable[[], str]) -> None:
    deadline = time.monotonic() + within
    while not done():
        if time.monotonic() > deadline:
            raise RealNodeError(f"timed out after {within:.0f} s waiting for {what()}\n{tails()}")
        time.sleep(0.5)  # the API is read with kubectl: a process each time


class SidecarNode(Protocol):
    """What a sidecar needs of its node (a ``RealNode``)."""

    @property
    def name(self) -> str: ...

    @property
    def layout(self) -> NodeLayout: ...

    def ensure_running(self) -> None: ...

    def log_tail(self, which: str = "kubelet", lines: int = 40) -> str: ...


class ClusterNode(SidecarNode, Protocol):
    """A node whose sidecar reads the API too and checks what it is given against the topology."""

    @property
    def cluster(self) -> LocalCluster: ...

    @property
    def topology(self) -> Topology: ...


@dataclass(frozen=True)
class NodeSidecar:
    """A process in ``<node cgroup>/<CGROUP>`` with its files in ``<node dir>/<CGROUP>/``: what it
    is to serve (``CONFIG``) and its call log (``LOG``)."""

    CGROUP: ClassVar[str]
    CONFIG: ClassVar[str]
    LOG: ClassVar[str]
    TITLE: ClassVar[str]
    """How errors name it: "the <TITLE> of <node>"."""

    node: SidecarNode

    @property
    def directory(self) -> Path:
        return self.node.layout.root / self.CGROUP

    @property
    def config_file(self) -> Path:
        return self.directory / self.CONFIG

    @property
    def log_file(self) -> Path:
        return self.directory / self.LOG

    def pids(self) -> set[int]:
        key = (self.node.name, self.CGROUP)
        proc = _PROCESSES.get(key)
        if proc is not None and proc.poll() is not None:  # reap it: a zombie stays in its cgroup
            _PROCESSES.pop(key, None)
        return host.child_cgroup_pids(self.node.name, self.CGROUP)

    def running(self) -> bool:
        return bool(self.pids())

    def log_size(self) -> int:
        """Where the log ends now: pass it as ``since`` to look at what comes after."""
        return self.log_file.stat().st_size if self.log_file.is_file() else 0

    def calls(self, method: str | None = None, *, since: int = 0) -> list[PluginCall]:
        """The logged calls (of ``method`` only, when given), from byte ``since`` of the log on."""
        if not self.log_file.is_file():
            return []
        with self.log_file.open("rb") as log:
            log.seek(since)
            found = parse_calls(log.read().decode(errors="replace"))
        return [c for c in found if method is None or c.method == method]

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_file.is_file():
            return f"(no {self.LOG})"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def tails(self) -> str:
        """Its log tail and the kubelet's, for an error message."""
        return (
            f"--- {self.log_file.name} (tail) ---\n{self.log_tail()}\n"
            f"--- kubelet.log (tail) ---\n{self.node.log_tail('kubelet', 20)}"
        )

    def exited(self) -> RealNodeError:
        return RealNodeError(f"the {self.TITLE} of {self.node.name} exited\n{self.tails()}")

    def _spawn(self, module: str, args: list[str]) -> None:
        """Run ``python -m module args`` in the node's child cgroup, its output to the log."""
        if self.running():
            raise RealNodeError(f"the {self.TITLE} of {self.node.name} already runs (pids {sorted(self.pids())})")
        procs = host.create_child_cgroup(self.node.name, self.CGROUP)
        self.directory.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            _PROCESSES[(self.node.name, self.CGROUP)] = subprocess.Popen(
                [sys.executable, "-m", module, *args],
                cwd=REPO,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=host.joining(procs),
                start_new_session=True,
            )

    def _signal(self, signum: signal.Signals) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def _terminate(self, timeout: float) -> None:
        """SIGTERM (SIGKILL after ``timeout`` s) and wait until it is gone."""
        deadline = time.monotonic() + timeout
        self._signal(signal.SIGTERM)
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        self._signal(signal.SIGKILL)
        wait_until(lambda: not self.pids(), 5, lambda: f"the {self.TITLE} of {self.node.name} to exit", self.tails)
        proc = _PROCESSES.pop((self.node.name, self.CGROUP), None)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
