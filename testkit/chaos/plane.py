"""A local control plane of the fault run's own, beside the shared one: its apiserver can be killed,
its etcd compacted and its watches expired without touching anybody else's.

It is ``hack/cluster.sh``'s cluster, created for a directory that stands for a checkout (``hack``
links to this repository's, the state lives in its ``.cluster``), so ``testkit.realnode`` adds real
nodes to it as to any checkout's cluster (``LocalCluster(root)``). Real nodes' cgroups are named
after the node alone, so its nodes carry names no other cluster uses; it is taken down node by node
and by its own pid files, never with ``realnode down`` (which would find every real node of this
machine).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.controlplane import Component, components
from testkit.paths import REPO
from testkit.realnode import remove_node
from testkit.realnode.cluster import CLUSTER_NAME, LocalCluster


class PlaneError(RuntimeError):
    """The fault run's control plane could not be started or stopped; the message says why."""


@dataclass(frozen=True)
class Plane:
    root: Path
    """The directory standing for a checkout (short: real nodes' unix socket paths live under it)."""

    @property
    def cluster(self) -> LocalCluster:
        return LocalCluster(self.root)

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    @property
    def cluster_dir(self) -> Path:
        return self.cluster.kwok_dir

    def up(self) -> None:
        """Create (or reuse) the cluster; returns once its apiserver is ready."""
        self.root.mkdir(parents=True, exist_ok=True)
        hack = self.root / "hack"
        if not hack.is_symlink():
            hack.symlink_to(REPO / "hack", target_is_directory=True)
        done = subprocess.run(
            [str(hack / "cluster.sh"), "up"],
            env={**os.environ, "REAL_NODES": "0"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise PlaneError(f"the fault run's control plane did not start:\n{done.stderr[-3000:]}")

    def down(self, nodes: list[str]) -> None:
        """Remove ``nodes`` (real nodes of this plane), then stop every process of the cluster."""
        for name in nodes:
            if (self.cluster.nodes_dir / name).exists():
                remove_node(name, cluster=self.cluster)
        if not self.cluster_dir.is_dir():
            return
        pids = [c.pid() for c in self.components().values()]
        kwokctl = self.cluster.bin_dir() / "kwokctl"
        env = {**os.environ, "KWOK_WORKDIR": str(self.root / ".cluster" / "kwok")}
        subprocess.run(
            [str(kwokctl), "--name", CLUSTER_NAME, "delete", "cluster"], env=env, capture_output=True, timeout=120
        )
        for pid in pids:  # kwokctl does not wait for an apiserver slow to end its watches
            if pid is not None and _belongs(pid, self.cluster_dir):
                os.kill(pid, signal.SIGKILL)

    def components(self) -> dict[str, Component]:
        return components(self.cluster_dir)

    def apiserver(self) -> Component:
        return self.components()["kube-apiserver"]

    def heal(self) -> None:
        """Start again any component that is not running (the scheduler and controller manager
        may exit during an outage)."""
        for part in self.components().values():
            if not part.running():
                part.start()

    def etcd_url(self) -> str:
        args = self.components()["etcd"].args
        found = next(a for a in args if a.startswith("--advertise-client-urls="))
        return found.split("=", 1)[1].split(",")[0]

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now (its JSON gateway): a watch from any older
        resourceVersion that reaches etcd then fails with 410 Gone. Returns the revision."""
        header: dict[str, str] = self._etcd("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]
        revision = int(header["revision"])
        self._etcd("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def _etcd(self, path: str, body: dict[str, object]) -> dict[str, Any]:
        request = urllib.request.Request(self.etcd_url() + path, data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=10) as answer:
            found: dict[str, Any] = json.loads(answer.read())
            return found

    def kill_apiserver(self, *, compact: bool = False) -> float:
        """kill -9 the apiserver (after compacting etcd, so that every watch resuming from before
        expires) and start it again; returns how long it was away (until its process started)."""
        apiserver = self.apiserver()
        started = time.monotonic()
        if compact:
            self.compact_etcd()
        apiserver.stop(signal.SIGKILL)
        apiserver.start()
        return time.monotonic() - started


def _belongs(pid: int, cluster_dir: Path) -> bool:
    try:
        return f"{cluster_dir}/" in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
