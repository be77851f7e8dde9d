"""Real kubelet nodes with fake topologies in the local cluster: add, reset, remove, list.

Each node is one containerd and one kubelet, sharing a private mount namespace
(``unshare --mount --propagation private``) in which the generated sysfs trees and
``/proc/meminfo`` are bind-mounted over the real ones. Because the namespace is private, every
mount made in it (the fake trees, the kubelet's volumes, containerd's overlay rootfs and
``/dev/shm``, the pods' network namespaces) is invisible to the host and disappears with the
node's last process; teardown therefore only has to kill the processes of the node's cgroups and
delete what lives on disk or in the network stack. The node's state is all under
``.cluster/nodes/<name>/`` of the repo::

    node.json            what the node was made with (topology, settings, devices, DRA devices, ports, bridge,
                         subnet)
    node.sh              the launcher run in the private namespace (readable: how to run it by hand)
    kubelet.sh           the kubelet's command, which node.sh ends with (restart_kubelet runs it again)
    fakehost/            cpu/, node/, hugepages/ trees and meminfo, bind-mounted over the real ones
    pki/                 key, client certificate system:node:<name>, kubeconfig
    kubelet/             the kubelet's --root-dir (checkpoints, pod-resources/kubelet.sock, pods/,
                         device-plugins/: the kubelet's kubelet.sock and the device plugin's sockets,
                         plugins_registry/ and plugins/: the DRA driver's sockets)
    kubelet.yaml         its KubeletConfiguration
    pod-logs/            podLogsDir (container logs: <ns>_<pod>_<uid>/<container>/0.log)
    containerd/          config.toml, root/, state/, runc/, containerd.sock
    cni/                 net.d/ (one bridge network) and the host-local IPAM data
    host/                what is mounted over /var/log/containers, /var/lib/cni, /run/containerd
    runc-wrapper(.log)   the runc containerd calls (cpuset projection, see runc_wrapper.py)
    logs/                launcher.log, containerd.log, kubelet.log
    deviceplugin/        the device plugin's devices.json and plugin.log (see device_plugin.py)
    dra/                 the DRA driver's dra.json and driver.log (see dra_driver.py)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from testkit.realnode import host, sidecar
from testkit.realnode.cluster import LocalCluster, wait
from testkit.realnode.device_plugin import DevicePlugin
from testkit.realnode.devices import NodeDevices, is_extended_resource
from testkit.realnode.dra import DRAError, NodeDRA
from testkit.realnode.dra_driver import DRADriver, delete_slices
from testkit.realnode.errors import KubeletDiedError, MissingToolError, RealNodeError
from testkit.realnode.images import PAUSE_IMAGE, archives
from testkit.realnode.layout import NodeLayout
from testkit.realnode.settings import KubeletSettings
from testkit.realnode.topology import Topology, format_cpulist, parse_cpulist, write_fake_host

NODE_LABEL = "toposched.invalid/real-node"
"""Label (value "true") and NoSchedule taint key of every real node: pods land on them only when
they tolerate the taint, so tests written for kwok nodes never meet a real kubelet."""

NODE_TOLERATION: dict[str, str] = {"key": NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}

CNI_BIN_DIR = "/usr/lib/cni"
POD_SUBNET = "10.217.{index}.0/24"
MAX_NODES = 200
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_UNIX_PATH_MAX = 107

# Host tools: path or command -> the Debian package that provides it (hack/install-node-tools.sh).
REQUIRED_TOOLS: dict[str, str] = {
    "containerd": "containerd",
    "ctr": "containerd",
    "containerd-shim-runc-v2": "containerd",
    "runc": "runc",
    f"{CNI_BIN_DIR}/bridge": "containernetworking-plugins",
    f"{CNI_BIN_DIR}/host-local": "containernetworking-plugins",
    f"{CNI_BIN_DIR}/loopback": "containernetworking-plugins",
    "unshare": "util-linux",
    "nsenter": "util-linux",  # restart_kubelet: a new kubelet in the node's mount namespace
    "mount": "mount",
    "ip": "iproute2",
    "openssl": "openssl",
    "gcc": "gcc",  # the pause image's static binary (with libc6-dev)
    "/bin/busybox": "busybox-static",  # the workload image
}

# Popen objects of the launchers this process started, reaped when their node goes.
_LAUNCHERS: dict[str, subprocess.Popen[bytes]] = {}


def default_topology() -> Topology:
    """The local cluster's default real node: 2 NUMA zones x 4 CPUs, 4Gi each, no SMT."""
    return Topology.uniform(zones=2, cores_per_zone=4, memory_per_zone="4Gi")


def missing_tools() -> list[MissingToolError]:
    missing = []
    for tool, package in REQUIRED_TOOLS.items():
        found = os.access(tool, os.X_OK) if tool.startswith("/") else shutil.which(tool) is not None
        if not found:
            missing.append(MissingToolError(tool, package))
    return missing


def require_host() -> None:
    """Root and every tool, or a clear error naming what is missing and how to install it."""
    if os.geteuid() != 0:
        raise RealNodeError("real nodes need root (mount namespaces, cgroups, network links)")
    missing = missing_tools()
    if missing:
        names = ", ".join(f"{m.what} ({m.package})" for m in missing)
        raise MissingToolError(names, "them")


# -- record ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeRecord:
    """What a node was made with; node.json."""

    name: str
    index: int
    kubelet_port: int
    healthz_port: int
    topology: Topology
    settings: KubeletSettings
    devices: NodeDevices = field(default_factory=NodeDevices)
    dra: NodeDRA = field(default_factory=NodeDRA)

    @property
    def bridge(self) -> str:
        return f"tsrn{self.index}"

    @property
    def subnet(self) -> str:
        return POD_SUBNET.format(index=self.index)

    @property
    def node_ip(self) -> str:
        """The bridge's gateway address: the node's InternalIP and the kubelet's listen address
        (the kubelet refuses a loopback node IP, and a per-node address keeps nodes apart)."""
        return self.subnet.rsplit(".", 1)[0] + ".1"

    def to_json(self) -> str:
        return (
            json.dumps(
                {
                    "name": self.name,
                    "index": self.index,
                    "kubeletPort": self.kubelet_port,
                    "healthzPort": self.healthz_port,
                    "topology": self.topology.to_dict(),
                    "settings": self.settings.to_dict(),
                    **({"devices": self.devices.to_dict()} if self.devices.resources else {}),
                    **({"dra": self.dra.to_dict()} if self.dra.slices else {}),
                },
                indent=2,
            )
            + "\n"
        )

    @classmethod
    def load(cls, path: Path) -> NodeRecord:
        data = json.loads(path.read_text())
        return cls(
            name=data["name"],
            index=int(data["index"]),
            kubelet_port=int(data["kubeletPort"]),
            healthz_port=int(data["healthzPort"]),
            topology=Topology.from_dict(data["topology"]),
            settings=KubeletSettings.from_dict(data["settings"]),
            devices=NodeDevices.from_dict(data.get("devices") or {}),
            dra=NodeDRA.from_dict(data.get("dra") or {}),
        )


# -- the node handle ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RealNode:
    """A real node of the local cluster (what add_node/reset_node return and list_nodes lists)."""

    record: NodeRecord
    layout: NodeLayout
    cluster: LocalCluster

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def topology(self) -> Topology:
        return self.record.topology

    @property
    def settings(self) -> KubeletSettings:
        return self.record.settings

    @property
    def devices(self) -> NodeDevices:
        """The devices the node was made (or last reset) with; ``device_plugin.devices()`` says
        what its plugin serves now."""
        return self.record.devices

    @property
    def device_plugin(self) -> DevicePlugin:
        """The node's device plugin: start, stop, restart, change devices mid-run, read its calls."""
        return DevicePlugin(self)

    @property
    def dra_driver(self) -> DRADriver:
        """The node's DRA driver: start, stop, restart, change its slices mid-run, read its calls."""
        return DRADriver(self)

    @property
    def dra(self) -> NodeDRA:
        """The DRA devices the node was made (or last reset) with; ``dra_driver.devices()`` says
        what its driver publishes now."""
        return self.record.dra

    @property
    def pod_resources_socket(self) -> Path:
        """The kubelet's PodResources gRPC socket (v1 List, GetAllocatableResources, Get)."""
        return self.layout.pod_resources_socket

    def pids(self) -> set[int]:
        return host.cgroup_pids(self.name)

    def kubelet_running(self) -> bool:
        return any(host.comm(pid) == "kubelet" and host.alive(pid) for pid in self.pids())

    def usage(self) -> tuple[int, float]:
        """(resident memory in bytes, CPU seconds used so far) of all the node's processes:
        containerd, the kubelet, the shims and the containers."""
        rss = 0
        cpu_ticks = 0
        for pid in self.pids():
            with contextlib.suppress(OSError, ValueError, IndexError):
                status = Path("/proc", str(pid), "status").read_text()
                rss += next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")) * 1024
                fields = Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()
                cpu_ticks += int(fields[11]) + int(fields[12])  # utime, stime
        return rss, cpu_ticks / os.sysconf("SC_CLK_TCK")

    def ensure_running(self) -> None:
        """Raise :class:`KubeletDiedError` (with the logs' tails) unless the kubelet runs."""
        if not self.kubelet_running():
            raise _died(self, "the kubelet is not running")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.record.healthz_port}/healthz", timeout=2) as r:
                return bool(r.read().decode().strip() == "ok")
        except (OSError, urllib.error.URLError):
            return False

    def _checkpoint(self, name: str) -> dict[str, Any] | None:
        path = self.layout.kubelet_root / name
        if not path.is_file():
            return None
        data: dict[str, Any] = json.loads(path.read_text())
        return data

    def cpu_manager_state(self) -> dict[str, Any] | None:
        """The kubelet's ``cpu_manager_state`` checkpoint (``defaultCpuSet``, ``entries``)."""
        return self._checkpoint("cpu_manager_state")

    def memory_manager_state(self) -> dict[str, Any] | None:
        """The kubelet's ``memory_manager_state`` checkpoint (``machineState``, ``entries``)."""
        return self._checkpoint("memory_manager_state")

    def assigned_cpus(self, pod_uid: str) -> dict[str, list[int]]:
        """Container -> exclusive CPUs the kubelet gave the pod (from its checkpoint)."""
        state = self.cpu_manager_state() or {}
        entries: dict[str, str] = state.get("entries", {}).get(pod_uid, {})
        return {container: parse_cpulist(cpus) for container, cpus in entries.items()}

    def log_tail(self, which: str = "kubelet", lines: int = 40) -> str:
        path = self.layout.logs / f"{which}.log"
        if not path.is_file():
            return f"(no {path.name})"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def container_log(self, namespace: str, pod: str, container: str) -> str:
        """A container's log from the pod log dir (``kubectl logs`` cannot reach these nodes:
        the apiserver dials a node by its Hostname address, here the unresolvable node name)."""
        files = sorted(self.layout.pod_logs.glob(f"{namespace}_{pod}_*/{container}/*.log"))
        return files[-1].read_text(errors="replace") if files else ""

    def numa_zones(self, cpus: list[int]) -> list[str]:
        """The NRT zone names (``node-<id>``) that hold ``cpus``, e.g. a pod's from assigned_cpus()."""
        return sorted({f"node-{self.topology.zone_of_cpu(c)}" for c in cpus})

    def runc_rewrites(self) -> list[str]:
        """What the runc wrapper changed (one line per rewritten create/update)."""
        path = self.layout.root / "runc-wrapper.log"
        return path.read_text().splitlines() if path.is_file() else []

    def power_off(self) -> None:
        """Lose the node as a power loss would: every process of it (containerd, the kubelet, the
        containers, its device plugin and DRA driver) killed at once, nothing told. Its files,
        its bridge (its address refuses connections from then on) and the Node object stay: the
        Node turns NotReady once its heartbeats are missed, and its pods stay bound to it.
        ``remove_node`` clears it."""
        _stop(self, keep_bridge=True)

    def kill(self, *words: str) -> list[int]:
        """kill -9 the node's processes (its containers' included) whose command line holds every
        one of ``words``; their pids."""
        pids = [p for p in self.pids() if (line := host.cmdline(p)) and all(w in line for w in words)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return pids

    def restart_kubelet(self, timeout: float = 90) -> None:
        """Stop the kubelet and start it again on the same state, as a service restart does
        (containerd and the containers keep running). Returns once the node is Ready again and,
        when the device plugin runs, it has registered with the new kubelet and the Node shows
        its devices (the kubelet removed the plugin's sockets when it started); when the DRA
        driver runs, the new kubelet has registered it and its slices are back (the kubelet
        deleted them when it started)."""
        _restart_kubelet(self, timeout)

    def stop_kubelet(self, *, kill: bool = False) -> None:
        """Stop the kubelet alone (SIGTERM, or SIGKILL with ``kill``), as a service stop or a
        crash does: containerd and the containers keep running, the Node stays. ``start_kubelet``
        brings it back on the same state."""
        self.ensure_running()
        _stop_kubelet(self, signal.SIGKILL if kill else signal.SIGTERM)

    def start_kubelet(self, timeout: float = 90) -> None:
        """Start the kubelet stopped by ``stop_kubelet``; returns as ``restart_kubelet`` does."""
        _start_kubelet(self, timeout)


# -- add / reset / remove ---------------------------------------------------------------------------


@contextlib.contextmanager
def _nodes_lock(cluster: LocalCluster) -> Iterator[None]:
    cluster.nodes_dir.mkdir(parents=True, exist_ok=True)
    with open(cluster.nodes_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _records(cluster: LocalCluster) -> list[NodeRecord]:
    if not cluster.nodes_dir.is_dir():
        return []
    found = []
    for path in sorted(cluster.nodes_dir.glob("*/node.json")):
        with contextlib.suppress(OSError, ValueError, KeyError):
            found.append(NodeRecord.load(path))
    return found


def _free_port(taken: set[int]) -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in taken:
            taken.add(port)
            return port


def _check_name(name: str) -> None:
    if not _NAME.match(name) or len(name) > 40:
        raise RealNodeError(f"node name {name!r}: use lowercase letters, digits and '-', at most 40 characters")


def add_node(
    name: str,
    topology: Topology | None = None,
    settings: KubeletSettings | None = None,
    *,
    devices: NodeDevices | None = None,
    dra: NodeDRA | None = None,
    cluster: LocalCluster | None = None,
    timeout: float = 90,
) -> RealNode:
    """Start a real kubelet node ``name`` with ``topology``, ``settings``, ``devices`` and ``dra``
    devices in the local cluster, and wait (bounded by ``timeout``) until it is Ready with the
    topology's capacity; with devices, its device plugin starts then and the wait (bounded by
    ``timeout`` again) lasts until the Node shows them; with DRA devices, its DRA driver starts
    last and the wait lasts until the kubelet registered it and its ResourceSlices are published.

    On any failure everything already started or created for the node is undone before the
    error propagates; a kubelet or containerd that exits is reported with the tail of its log.
    """
    cluster = cluster or LocalCluster()
    topology = topology or default_topology()
    settings = settings or KubeletSettings()
    devices = devices if devices is not None else NodeDevices()
    dra = dra if dra is not None else NodeDRA()
    _check_name(name)
    settings.validate(topology)
    devices.validate(topology)
    require_host()
    kubelet = cluster.kubelet()
    cluster.require_up()
    cluster.grant_pod_status()
    layout = NodeLayout(cluster.nodes_dir / name)
    images = archives()
    with _nodes_lock(cluster):
        if layout.root.exists():
            raise RealNodeError(
                f"real node {name} already exists; remove it first (python -m testkit.realnode remove {name})"
            )
        existing = cluster.get_json("node", name)
        if existing is not None:
            annotations = existing["metadata"].get("annotations") or {}
            if annotations.get("kwok.x-k8s.io/node") == "fake":
                raise RealNodeError(f"node {name} exists as a kwok node; pick another name")
            # A real node whose files are gone (its remover died half-way): its object is stale.
            cluster.kubectl("delete", "node", name, "--ignore-not-found", "--wait=false")
        records = _records(cluster)
        _check_dra(name, dra, topology, layout, records)
        used = {r.index for r in records}
        # Bridges and pod subnets are host-wide: skip those another checkout's cluster holds.
        # Each checkout starts its search elsewhere, so two clusters on one machine rarely even
        # look at the same index; the claim settles the rare race.
        first = int(host.CGROUP_PARENT.rsplit("-", 1)[1], 16) % MAX_NODES
        index = next(
            (
                i
                for i in ((first + k) % MAX_NODES for k in range(MAX_NODES))
                if i not in used
                and not host.link_exists(f"tsrn{i}")
                and not host.routes_overlapping(POD_SUBNET.format(index=i))
                and host.claim_bridge(f"tsrn{i}")  # last: it creates the bridge
            ),
            None,
        )
        if index is None:
            raise RealNodeError(f"at most {MAX_NODES} real nodes")
        taken = {p for r in records for p in (r.kubelet_port, r.healthz_port)}
        record = NodeRecord(name, index, _free_port(taken), _free_port(taken), topology, settings, devices, dra)
        overlapping = host.routes_overlapping(record.subnet)
        if overlapping:
            host.delete_bridge(record.bridge)
            raise RealNodeError(f"pod subnet {record.subnet} of node {name} overlaps host routes: {overlapping}")
        host.claim_host(cluster.nodes_dir)
        host.ensure_inotify_headroom(cluster.nodes_dir)
        layout.root.mkdir(parents=True)
        layout.record.write_text(record.to_json())
    node = RealNode(record, layout, cluster)
    try:
        _prepare(node, kubelet)
        _start(node, images, timeout)
        _start_beside(node, timeout)
    except BaseException:
        with contextlib.suppress(Exception):
            _teardown(node, delete_api_node=True)
        raise
    return node


def _check_dra(name: str, dra: NodeDRA, topology: Topology, layout: NodeLayout, others: list[NodeRecord]) -> None:
    """Raise unless node ``name`` can publish ``dra``: on its topology's NUMA nodes, with unix
    socket paths short enough, in pools no other node publishes."""
    dra.validate(topology)
    longest = layout.longest_socket(dra.drivers())
    if len(str(longest)) > _UNIX_PATH_MAX:
        raise RealNodeError(
            f"the repository path is too long for the node's unix sockets ({longest} exceeds "
            f"{_UNIX_PATH_MAX} bytes): use a checkout with a shorter path (or shorter DRA driver names)"
        )
    # A device is known by (driver, pool, name) cluster-wide: no two nodes may publish one pool.
    pools = {(s.driver, s.pool_name(name)) for s in dra.slices}
    for other in others:
        if other.name != name:
            shared = pools & {(s.driver, s.pool_name(other.name)) for s in other.dra.slices}
            if shared:
                driver, pool = sorted(shared)[0]
                raise DRAError(f"pool {pool} of {driver} is published by real node {other.name} already")


def _start_beside(node: RealNode, timeout: float) -> None:
    """Start the node's device plugin and then its DRA driver, each when it has something to serve."""
    if node.devices.resources:
        node.device_plugin.start(timeout)
    if node.dra.slices:
        node.dra_driver.start(timeout)


def reset_node(
    name: str,
    topology: Topology | None = None,
    settings: KubeletSettings | None = None,
    *,
    devices: NodeDevices | None = None,
    dra: NodeDRA | None = None,
    drain: bool = True,
    cluster: LocalCluster | None = None,
    timeout: float = 90,
) -> RealNode:
    """Restart node ``name`` from a clean kubelet and containerd state, optionally with a new
    topology, settings, devices and/or DRA devices (None keeps those the node was made or last reset
    with; changes made mid-run are dropped). Its device plugin and DRA driver restart, with new logs.

    A kubelet refuses to start when its CPU or memory manager checkpoint does not match the
    machine, so a topology change needs exactly this: every container is killed, the kubelet
    root (checkpoints included) and containerd's state are wiped, and both start again. With
    ``drain`` (default) the pods bound to the node are force-deleted first, so the new kubelet
    does not re-admit them against the new topology. The Node object and its name stay. If the
    restart fails, the node is left stopped with its logs (``remove_node`` clears it).
    """
    cluster = cluster or LocalCluster()
    old = get_node(name, cluster=cluster)
    topology = topology or old.topology
    settings = settings or old.settings
    devices = old.devices if devices is None else devices
    dra = old.dra if dra is None else dra
    settings.validate(topology)
    devices.validate(topology)
    _check_dra(name, dra, topology, old.layout, _records(cluster))
    require_host()
    kubelet = cluster.kubelet()
    cluster.require_up()
    _stop(old, keep_bridge=True)
    if drain:
        _delete_pods_on(cluster, name)
    _drop_extended_resources(cluster, name)
    with _nodes_lock(cluster):
        # After a reboot the shared mount points may be gone; the inotify limit may have been restored.
        host.claim_host(cluster.nodes_dir)
        host.ensure_inotify_headroom(cluster.nodes_dir)
    layout = old.layout
    wiped = (layout.kubelet_root, layout.containerd, layout.cni, layout.fakehost, layout.host_dirs, layout.pki)
    for path in (*wiped, old.device_plugin.directory, old.dra_driver.directory):
        shutil.rmtree(path, ignore_errors=True)
    record = NodeRecord(
        name, old.record.index, old.record.kubelet_port, old.record.healthz_port, topology, settings, devices, dra
    )
    layout.record.write_text(record.to_json())
    node = RealNode(record, layout, cluster)
    try:
        _prepare(node, kubelet)
        _start(node, archives(), timeout)
        _start_beside(node, timeout)
    except BaseException:
        with contextlib.suppress(Exception):
            _stop(node)
        raise
    return node


def remove_node(name: str, *, cluster: LocalCluster | None = None) -> None:
    """Stop node ``name`` and remove everything it had: processes, cgroups, bridge, files, the
    Node object and its pods; the shared host mount points and ip_forward go with the last node."""
    cluster = cluster or LocalCluster()
    layout = NodeLayout(cluster.nodes_dir / name)
    if not layout.record.is_file():
        if layout.root.exists() or host.leftover_cgroups(name):
            # Half-created: no record to read, but its cgroups and directory are named after it.
            _teardown_unrecorded(name, layout, cluster)
            return
        raise RealNodeError(f"no real node {name}")
    _teardown(RealNode(NodeRecord.load(layout.record), layout, cluster), delete_api_node=True)


def get_node(name: str, *, cluster: LocalCluster | None = None) -> RealNode:
    cluster = cluster or LocalCluster()
    layout = NodeLayout(cluster.nodes_dir / name)
    if not layout.record.is_file():
        raise RealNodeError(f"no real node {name}")
    return RealNode(NodeRecord.load(layout.record), layout, cluster)


def list_nodes(*, cluster: LocalCluster | None = None) -> list[RealNode]:
    cluster = cluster or LocalCluster()
    return [RealNode(r, NodeLayout(cluster.nodes_dir / r.name), cluster) for r in _records(cluster)]


def down(*, cluster: LocalCluster | None = None) -> list[str]:
    """Remove every real node (even half-created ones); returns their names."""
    cluster = cluster or LocalCluster()
    names: set[str] = set()
    if cluster.nodes_dir.is_dir():
        names.update(p.name for p in cluster.nodes_dir.iterdir() if p.is_dir())
    for h in host.hierarchies():
        parent = h.mount / host.CGROUP_PARENT
        if parent.is_dir():
            names.update(p.name for p in parent.iterdir() if p.is_dir())
    failures = []
    for name in sorted(names):
        try:
            remove_node(name, cluster=cluster)
        except RealNodeError as exc:  # remove the others anyway, then report
            failures.append(f"{name}: {exc}")
    if failures:
        raise RealNodeError("could not remove every real node:\n" + "\n".join(failures))
    with _nodes_lock(cluster):
        if not any(p.is_dir() for p in cluster.nodes_dir.iterdir()):
            host.release_host(cluster.nodes_dir)
    with contextlib.suppress(OSError):
        (cluster.nodes_dir / ".lock").unlink()
        cluster.nodes_dir.rmdir()
    return sorted(names)


def leftovers(name: str, *, cluster: LocalCluster | None = None) -> list[str]:
    """What a removed node left on the host (empty when it left nothing)."""
    cluster = cluster or LocalCluster()
    layout = NodeLayout(cluster.nodes_dir / name)
    found = [f"process {pid}: {cmd[:120]}" for pid, cmd in host.processes_mentioning(str(layout.root))]
    found += [f"process {pid} in the node's cgroups" for pid in host.cgroup_pids(name)]
    found += [f"mount {m}" for m in host.mounts_under(layout.root)]
    found += [f"cgroup {c}" for c in host.leftover_cgroups(name)]
    if layout.root.exists():
        found.append(f"directory {layout.root}")
    return found


# -- internals ----------------------------------------------------------------------------------------


def _prepare(node: RealNode, kubelet: Path) -> None:
    """Write every file the node needs and create its cgroups."""
    layout, record = node.layout, node.record
    for directory in (layout.kubelet_root, layout.pod_logs, layout.logs, layout.root / "volume-plugins"):
        directory.mkdir(parents=True, exist_ok=True)
    for point in _host_points():
        (layout.host_dirs / point.strip("/").replace("/", "-")).mkdir(parents=True, exist_ok=True)
    fake = write_fake_host(record.topology, layout.fakehost)
    kubeconfig = node.cluster.write_node_credentials(record.name, layout.pki)
    _write_containerd_config(node)
    _write_cni_config(node)
    _write_runc_wrapper(node)
    import yaml  # lazily: teardown (make cluster-down) must work without PyYAML

    kubelet_yaml = yaml.safe_dump(_kubelet_configuration(node), sort_keys=False)
    layout.kubelet_config.write_text(kubelet_yaml)
    # Where a node agent looks for it on a kubeadm-made host (/var/lib/kubelet/config.yaml).
    (layout.kubelet_root / "config.yaml").write_text(kubelet_yaml)
    procs = host.create_cgroups(record.name)
    host.create_bridge(record.bridge, f"{record.node_ip}/24")
    mounts = [(str(src), dst) for src, dst in fake.mounts()]
    mounts += _write_sysctls(layout.fakehost / "sysctl")
    mounts += [(str(layout.host_dirs / p.strip("/").replace("/", "-")), p) for p in _host_points()]
    mounts.append((str(layout.kubelet_root), host.KUBELET_DIR))
    _write_launcher(node, kubelet, kubeconfig, procs, mounts)


def _host_points() -> tuple[str, ...]:
    """The host mount points that get an empty directory of the node's own."""
    return tuple(p for p in host.HOST_MOUNT_POINTS if p != host.KUBELET_DIR)


def _write_containerd_config(node: RealNode) -> None:
    c = node.layout.containerd
    c.mkdir(parents=True, exist_ok=True)

    def q(value: Path | str) -> str:
        return json.dumps(str(value))  # a TOML basic string is a JSON string

    # Plugins that would write outside the node's directories (opt: /opt/containerd) or are useless here.
    disabled = [
        "io.containerd.internal.v1.opt",
        "io.containerd.snapshotter.v1.aufs",
        "io.containerd.snapshotter.v1.btrfs",
        "io.containerd.snapshotter.v1.devmapper",
        "io.containerd.snapshotter.v1.zfs",
        "io.containerd.tracing.processor.v1.otlp",
        "io.containerd.internal.v1.tracing",
    ]
    cri = '[plugins."io.containerd.grpc.v1.cri"]'
    runc = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]'
    (c / "config.toml").write_text(
        f"""# containerd of real node {node.name} (testkit.realnode)
version = 2
root = {q(c / "root")}
state = {q(c / "state")}
disabled_plugins = {json.dumps(disabled)}

[grpc]
  address = {q(node.layout.containerd_socket)}

[plugins]
  {cri}
    sandbox_image = {q(PAUSE_IMAGE)}
    # runc cannot lower oom_score_adj without CAP_SYS_RESOURCE, which this machine kind lacks.
    restrict_oom_score_adj = true
    # Pod network namespaces under the node's state dir, not /run/netns.
    netns_mounts_under_state_dir = true
    disable_apparmor = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = {q(CNI_BIN_DIR)}
      conf_dir = {q(node.layout.cni / "net.d")}
      max_conf_num = 1
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      {runc}
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = {q(node.layout.runc_wrapper)}
          Root = {q(c / "runc")}
          SystemdCgroup = false
"""
    )


def _write_cni_config(node: RealNode) -> None:
    record = node.record
    net = node.layout.cni / "net.d"
    net.mkdir(parents=True, exist_ok=True)
    config = {
        "cniVersion": "0.4.0",
        "name": f"toposched-{record.name}",
        "plugins": [
            {
                "type": "bridge",
                "bridge": record.bridge,
                "isGateway": True,
                # No masquerading: it would need iptables and leave host-wide rules behind.
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": record.subnet}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(node.layout.cni / "ipam"),
                },
            }
        ],
    }
    (net / "10-toposched.conflist").write_text(json.dumps(config, indent=2) + "\n")


def _real_cpuset() -> tuple[list[int], list[int]]:
    """The CPUs and memory nodes containers can really use (the root cpuset, else what is online)."""
    found: list[list[int]] = []
    for cgroup_file, online in (("cpuset.cpus", "cpu/online"), ("cpuset.mems", "node/online")):
        ids: list[int] = []
        for path in (Path("/sys/fs/cgroup/cpuset") / cgroup_file, Path("/sys/devices/system") / online):
            if path.is_file():
                ids = parse_cpulist(path.read_text())
                if ids:
                    break
        found.append(ids or [0])
    return found[0], found[1]


# The kubelet sets these host-wide sysctls to its liking at start (or, with protectKernelDefaults,
# refuses to start). The node's namespace sees files already holding its values, so it changes
# nothing on the host.
KUBELET_SYSCTLS = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}


def _write_sysctls(directory: Path) -> list[tuple[str, str]]:
    directory.mkdir(parents=True, exist_ok=True)
    mounts = []
    for key, value in KUBELET_SYSCTLS.items():
        path = directory / key.replace("/", ".")
        path.write_text(value + "\n")
        mounts.append((str(path), f"/proc/sys/{key}"))
    return mounts


def _write_runc_wrapper(node: RealNode) -> None:
    runc = shutil.which("runc")
    if runc is None:
        raise MissingToolError("runc", "runc")
    module_dir = Path(__file__).resolve().parent
    cpus, mems = _real_cpuset()
    wrapper = node.layout.runc_wrapper
    wrapper.write_text(
        f"""#!{sys.executable} -S
# runc of real node {node.name}: projects the kubelet's cpusets onto the real CPUs {format_cpulist(cpus)}
# and memory nodes {format_cpulist(mems)}; host-network containers are named {node.name} (see
# testkit/realnode/runc_wrapper.py).
import sys
sys.path.insert(0, {str(module_dir)!r})
from runc_wrapper import main
sys.exit(main(sys.argv, real_runc={runc!r}, cpus={cpus!r}, mems={mems!r},
              log={str(node.layout.root / "runc-wrapper.log")!r}, hostname={node.name!r}))
"""
    )
    wrapper.chmod(0o755)


def _kubelet_configuration(node: RealNode) -> dict[str, Any]:
    layout, record = node.layout, node.record
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": record.node_ip,
        "port": record.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": record.healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(node.cluster.ca_cert)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": host.cgroup_root(record.name),
        "cgroupsPerQOS": True,
        # This machine kind has cgroup v1 only; kubelet 1.36 refuses it unless told otherwise.
        "failCgroupV1": False,
        "failSwapOn": False,
        "podLogsDir": str(layout.pod_logs),
        "volumePluginDir": str(layout.root / "volume-plugins"),
        # No KUBE-IPTABLES-HINT/KUBE-FIREWALL chains: they are host-wide and would outlive the node.
        "makeIPTablesUtilChains": False,
        "registerNode": True,
        "registerWithTaints": [{"key": NODE_LABEL, "value": "true", "effect": "NoSchedule"}],
        # Images cannot be pulled again: never garbage-collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # Device counts reach the Node only with a status update: a node with devices updates
        # every second, so a plugin's registration or change shows without waiting 5 s.
        "nodeStatusUpdateFrequency": "1s" if record.devices.resources else "5s",
        "nodeStatusReportFrequency": "1m",
        "syncFrequency": "10s",
        "shutdownGracePeriod": "0s",
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "enableDebuggingHandlers": True,
        "staticPodPath": "",
    }
    config.update(record.settings.kubelet_config(record.topology))
    config.update(record.settings.extra)
    return config


def _write_launcher(
    node: RealNode, kubelet: Path, kubeconfig: Path, procs: list[Path], mounts: list[tuple[str, str]]
) -> None:
    layout, record = node.layout, node.record
    containerd = shutil.which("containerd") or "containerd"
    kubelet_args = [
        str(kubelet),
        f"--config={layout.kubelet_config}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={layout.kubelet_root}",
        f"--cert-dir={layout.kubelet_root / 'pki'}",
        f"--hostname-override={record.name}",
        f"--node-ip={record.node_ip}",
        f"--node-labels={NODE_LABEL}=true",
        # TOPOSCHED_KUBELET_V raises the log level to see why a pod was refused (4 logs hints).
        f"--v={os.environ.get('TOPOSCHED_KUBELET_V', '2')}",
        # Its DRA plugin manager says when it deleted the node's ResourceSlices: the DRA driver's
        # waits end only after that (see dra_driver.py).
        "--vmodule=dra_plugin_manager=3",
    ]
    q = shlex.quote
    lines = [
        "#!/bin/sh",
        f"# Launcher of real node {record.name} (testkit.realnode). It runs as",
        "#   unshare --mount --propagation private -- /bin/sh node.sh",
        "# so the bind mounts below exist only for this node's containerd, kubelet and containers.",
        "set -eu",
        "# Into the node's cgroups first, so every process started from here on is found at teardown.",
        *(f"echo $$ > {q(str(p))}" for p in procs),
        *(f"mount --bind {q(src)} {q(dst)}" for src, dst in mounts),
        f"{q(containerd)} --config {q(str(layout.containerd / 'config.toml'))} "
        f">> {q(str(layout.logs / 'containerd.log'))} 2>&1 &",
        "containerd=$!",
        "i=0",
        f"until [ -S {q(str(layout.containerd_socket))} ]; do",
        '  kill -0 "$containerd" 2>/dev/null || { echo "containerd exited" >&2; exit 1; }',
        '  i=$((i + 1)); [ "$i" -lt 300 ] || { echo "containerd did not open its socket within 30 s" >&2; exit 1; }',
        "  sleep 0.1",
        "done",
        f"exec /bin/sh {q(str(layout.kubelet_script))}",
    ]
    layout.launcher.write_text("\n".join(lines) + "\n")
    layout.launcher.chmod(0o755)
    kubelet_lines = [
        "#!/bin/sh",
        f"# The kubelet of real node {record.name}, run by node.sh (and by restart_kubelet) in its namespace.",
        f"exec {' '.join(q(a) for a in kubelet_args)} >> {q(str(layout.logs / 'kubelet.log'))} 2>&1",
    ]
    layout.kubelet_script.write_text("\n".join(kubelet_lines) + "\n")
    layout.kubelet_script.chmod(0o755)


def _import(node: RealNode, paths: Iterable[Path], remaining: Callable[[], float], alive: Callable[[], None]) -> None:
    ctr = shutil.which("ctr") or "ctr"
    for archive in paths:
        for attempt in range(5):  # a containerd under load may open its socket before it serves it
            result = subprocess.run(
                [ctr, "--address", str(node.layout.containerd_socket), "--namespace", "k8s.io", "images", "import",
                 str(archive)],
                capture_output=True,
                text=True,
                timeout=remaining(),
            )  # fmt: skip
            if result.returncode == 0 or "connection refused" not in result.stderr or attempt == 4:
                break
            alive()
            time.sleep(1)
        if result.returncode != 0:
            raise _died(node, f"importing {archive.name} into its containerd failed: {result.stderr.strip()}")


def _died(node: RealNode, what: str) -> KubeletDiedError:
    return KubeletDiedError(
        f"real node {node.name}: {what}\n"
        f"--- launcher.log ---\n{node.log_tail('launcher', 10)}\n"
        f"--- containerd.log (tail) ---\n{node.log_tail('containerd', 15)}\n"
        f"--- kubelet.log (tail) ---\n{node.log_tail('kubelet', 40)}"
    )


def _start(node: RealNode, images: dict[str, Path], timeout: float) -> None:
    """Run the launcher and wait until the node is Ready with its topology's capacity."""
    layout = node.layout
    started = time.time()
    launch = _Launch.run(
        node, ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", str(layout.launcher)], timeout
    )
    alive, remaining = launch.alive, launch.remaining

    def socket_ready() -> bool:
        alive()
        return layout.containerd_socket.is_socket()

    wait(socket_ready, min(30, remaining()), f"containerd of {node.name} to open its socket")
    _import(node, images.values(), remaining, alive)
    _wait_ready(node, started, launch)


@dataclass(frozen=True)
class _Launch:
    """A process that ends as the node's kubelet (the launcher, or kubelet.sh run again) and the
    deadline of its start."""

    node: RealNode
    proc: subprocess.Popen[bytes]
    deadline: float

    @classmethod
    def run(cls, node: RealNode, args: list[str], timeout: float, join: list[Path] | None = None) -> _Launch:
        """Start ``args`` (output to launcher.log; in the cgroups whose procs files ``join`` lists)."""
        with open(node.layout.logs / "launcher.log", "ab") as log:
            proc = subprocess.Popen(
                args,
                cwd=node.layout.root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=host.joining(join) if join else None,
                start_new_session=True,  # a Ctrl-C meant for the caller must not reach the node
            )
        _LAUNCHERS[node.name] = proc
        return cls(node, proc, time.monotonic() + timeout)

    def alive(self) -> None:
        if self.proc.poll() is not None:
            raise _died(self.node, f"the launcher exited with status {self.proc.returncode}")

    def remaining(self) -> float:
        return max(1.0, self.deadline - time.monotonic())


def _wait_ready(node: RealNode, started: float, launch: _Launch) -> None:
    """Wait until the kubelet started at ``started`` (epoch seconds) answers /healthz and has
    reported the node Ready with its topology's capacity."""
    alive, remaining = launch.alive, launch.remaining

    def healthy() -> bool:
        alive()
        return node.healthy()

    try:
        wait(healthy, remaining(), f"the kubelet of {node.name} to answer /healthz")
    except RealNodeError as exc:  # alive but silent: its log says why
        raise _died(node, str(exc)) from None
    expected_cpu = str(node.topology.cpu_count)

    def ready() -> bool:
        alive()
        obj = node.cluster.get_json("node", node.name)
        if obj is None or obj["status"].get("capacity", {}).get("cpu") != expected_cpu:
            return False
        for condition in obj["status"].get("conditions", []):
            if condition["type"] == "Ready" and condition["status"] == "True":
                beat = datetime.fromisoformat(condition["lastHeartbeatTime"].replace("Z", "+00:00")).timestamp()
                return beat >= started - 1  # this kubelet's report, not one left by a previous run
        return False

    try:
        wait(ready, remaining(), f"node {node.name} to be Ready with {expected_cpu} CPUs", interval=0.25)
    except RealNodeError as exc:
        raise _died(node, str(exc)) from None


def _restart_kubelet(node: RealNode, timeout: float) -> None:
    """Stop the kubelet (:func:`_stop_kubelet`) and start it again (:func:`_start_kubelet`)."""
    node.ensure_running()
    _stop_kubelet(node, signal.SIGTERM)
    _start_kubelet(node, timeout)


def _stop_kubelet(node: RealNode, first: signal.Signals) -> None:
    """Send the node's kubelet ``first`` (SIGKILL after 10 s) and wait for it to exit; containerd
    and the containers keep running."""
    for signum, within in ((first, 10.0), (signal.SIGKILL, 5.0)):
        for pid in node.pids():
            if host.comm(pid) == "kubelet":
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)
        with contextlib.suppress(RealNodeError):
            wait(lambda: not node.kubelet_running(), within, f"the kubelet of {node.name} to exit")
    if node.kubelet_running():
        raise _died(node, "the kubelet survives SIGKILL")
    old = _LAUNCHERS.pop(node.name, None)
    if old is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            old.wait(5)


def _start_kubelet(node: RealNode, timeout: float) -> None:
    """Run kubelet.sh again in the node's mount namespace (entered through its containerd) and
    daemons cgroup; wait as :func:`_start` does, then for the device plugin and the DRA driver
    to register with the new kubelet."""
    if node.kubelet_running():
        raise RealNodeError(f"the kubelet of {node.name} is already running")
    containerd = next((p for p in node.pids() if host.comm(p) == "containerd" and host.alive(p)), None)
    if containerd is None:
        raise _died(node, "its containerd is not running (reset the node instead)")
    plugin, driver = node.device_plugin, node.dra_driver
    since, driver_since = plugin.log_size(), driver.log_size()
    started = time.time()
    args = ["nsenter", f"--mount=/proc/{containerd}/ns/mnt", "--", "/bin/sh", str(node.layout.kubelet_script)]
    # Into the daemons cgroup, where the first kubelet ran, so that teardown finds this one too.
    launch = _Launch.run(node, args, timeout, join=host.daemons_procs(node.name))
    _wait_ready(node, started, launch)
    if plugin.running():
        plugin.wait(launch.remaining(), since=since)
    if driver.running():
        driver.wait(launch.remaining(), since=driver_since)


def _stop(node: RealNode, *, keep_bridge: bool = False) -> None:
    """Kill all of the node's processes and free its cgroups and (unless ``keep_bridge``: a reset
    keeps its index, no other checkout can take it in between) its bridge; files stay."""
    host.kill_cgroups(node.name)
    proc = _LAUNCHERS.pop(node.name, None)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
    sidecar.reap(node.name)
    host.remove_cgroups(node.name)
    if not keep_bridge:
        host.delete_bridge(node.record.bridge)
    stray = host.mounts_under(node.layout.root)
    for mount in sorted(stray, key=len, reverse=True):
        subprocess.run(["umount", "--lazy", mount], capture_output=True)


def _drop_extended_resources(cluster: LocalCluster, name: str) -> None:
    """Remove the device resources from a stopped node's status. The new kubelet of a reset starts
    with a wiped device manager: it reports the resources its plugin registers, never zeroes the
    others (its checkpoint directory is not empty once it listens), and a Node still offering
    them would mislead whatever reads it."""
    obj = cluster.get_json("node", name)
    status = (obj or {}).get("status", {})
    ops = [
        {"op": "remove", "path": f"/status/{field}/{resource.replace('~', '~0').replace('/', '~1')}"}
        for field in ("capacity", "allocatable")
        for resource in status.get(field) or {}
        if is_extended_resource(resource)
    ]
    if ops:
        cluster.kubectl("patch", "node", name, "--subresource=status", "--type=json", "-p", json.dumps(ops))


def _delete_pods_on(cluster: LocalCluster, name: str) -> None:
    cluster.kubectl(
        "delete", "pods", "--all-namespaces", f"--field-selector=spec.nodeName={name}",
        "--force", "--grace-period=0", "--wait=false", check=False,
    )  # fmt: skip


def _teardown(node: RealNode, *, delete_api_node: bool) -> None:
    _stop(node)
    with _nodes_lock(node.cluster):
        shutil.rmtree(node.layout.root, ignore_errors=True)
        if not any(p.is_dir() for p in node.cluster.nodes_dir.iterdir()):
            host.release_host(node.cluster.nodes_dir)
    if delete_api_node:
        with contextlib.suppress(Exception):
            _delete_pods_on(node.cluster, node.name)
            node.cluster.kubectl("delete", "node", node.name, "--ignore-not-found", "--wait=false", check=False)
            delete_slices(node.cluster, node.name)


def _teardown_unrecorded(name: str, layout: NodeLayout, cluster: LocalCluster) -> None:
    host.kill_cgroups(name)
    _LAUNCHERS.pop(name, None)
    sidecar.reap(name)
    host.remove_cgroups(name)
    for mount in sorted(host.mounts_under(layout.root), key=len, reverse=True):
        subprocess.run(["umount", "--lazy", mount], capture_output=True)
    with _nodes_lock(cluster):
        shutil.rmtree(layout.root, ignore_errors=True)
        if not any(p.is_dir() for p in cluster.nodes_dir.iterdir()):
            host.release_host(cluster.nodes_dir)
