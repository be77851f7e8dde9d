"""Host resources real nodes use and must give back: cgroups, network links, mount points,
the ip_forward sysctl, processes. Everything here is keyed by node name, so teardown can find
what a node left even after the process that started it is gone."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from testkit.realnode.errors import RealNodeError

# Every node's cgroup is <hierarchy>/CGROUP_PARENT/<node>; its kubelet's cgroupRoot is that path
# (it creates kubepods below it) and containerd, the kubelet and the shims run in .../daemons.
# The parent is named after the checkout, so two checkouts' clusters on one machine (a developer's
# worktrees) never take each other's nodes for their own.
CGROUP_PREFIX = "toposched-realnode-"
CGROUP_PARENT = CGROUP_PREFIX + hashlib.sha1(str(Path(__file__).resolve().parents[2]).encode()).hexdigest()[:8]
DAEMONS = "daemons"

# Paths containerd, the CNI plugins and the kubelet write to whatever their configuration says.
# Each node bind-mounts a directory of its own over them in its private mount namespace, so they
# must exist on the host as mount points; those this module creates are removed with the last node.
HOST_MOUNT_POINTS = ("/var/log/containers", "/var/lib/cni", "/run/containerd", "/var/lib/kubelet")
KUBELET_DIR = "/var/lib/kubelet"
"""Where each node's kubelet root is mounted in its namespace: a DaemonSet's hostPath (the chart's
exporter) finds the node's PodResources socket, checkpoints and config.yaml there, as on a real host."""
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
# A kubelet holds 6 inotify instances and its containerd 1; Debian's default limit of 128 per
# user stops the 17th node or so ("Failed to start cAdvisor: inotify_init: too many open files").
INOTIFY_PER_NODE = 8


@dataclass(frozen=True)
class Hierarchy:
    """A mounted cgroup hierarchy (v1: one per controller set; v2: the unified one)."""

    mount: Path
    version: int
    controllers: tuple[str, ...]


def _unescape(field: str) -> str:
    # /proc/self/mountinfo escapes space, tab, newline and backslash as octal
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mountinfo() -> list[tuple[str, str, str]]:
    """(mount point, filesystem type, super options) of every mount of this namespace."""
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            fstype, _source, options = [*right.split(), "", "", ""][:3]
            mounts.append((_unescape(fields[4]), fstype, options))
    return mounts


def mounts_under(path: Path) -> list[str]:
    prefix = str(path).rstrip("/") + "/"
    return [m for m, _, _ in mountinfo() if m == str(path) or m.startswith(prefix)]


def hierarchies() -> list[Hierarchy]:
    found = []
    for mount, fstype, options in mountinfo():
        if fstype == "cgroup":
            known = {"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "hugetlb",
                     "net_cls", "net_prio", "perf_event", "rdma", "misc"}  # fmt: skip
            controllers = tuple(o for o in options.split(",") if o in known or o.startswith("name="))
            found.append(Hierarchy(Path(mount), 1, controllers))
        elif fstype == "cgroup2":
            found.append(Hierarchy(Path(mount), 2, ()))
    return found


def node_cgroup(hierarchy: Hierarchy, node: str) -> Path:
    return hierarchy.mount / CGROUP_PARENT / node


def cgroup_root(node: str) -> str:
    """The kubelet's ``cgroupRoot`` for a node (the same path in every hierarchy)."""
    return f"/{CGROUP_PARENT}/{node}"


def _copy_if_empty(directory: Path, name: str) -> None:
    target = directory / name
    if target.read_text().strip():
        return
    target.write_text((directory.parent / name).read_text())


def _make_cgroup(directory: Path) -> None:
    """mkdir that survives another node's teardown removing the shared parent at the same moment."""
    for _ in range(20):
        try:
            directory.mkdir(exist_ok=True)
            return
        except (FileExistsError, FileNotFoundError):
            time.sleep(0.05)
    raise RealNodeError(f"cannot create cgroup {directory}: it keeps appearing and vanishing")


def create_cgroups(node: str) -> list[Path]:
    """The node's cgroup (and its daemons child) in every hierarchy; returns the daemons'
    ``cgroup.procs`` files, into which the node's launcher writes itself first thing."""
    procs = []
    for h in hierarchies():
        path = node_cgroup(h, node)
        for directory in (path.parent, path, path / DAEMONS):
            _make_cgroup(directory)
            if "cpuset" in h.controllers:
                # A v1 cpuset cgroup takes no task until it has CPUs and memory nodes.
                _copy_if_empty(directory, "cpuset.cpus")
                _copy_if_empty(directory, "cpuset.mems")
        if h.version == 2:
            # The kubelet needs the controllers delegated down to its cgroupRoot.
            available = (h.mount / "cgroup.controllers").read_text().split()
            wanted = [c for c in ("cpuset", "cpu", "io", "memory", "hugetlb", "pids") if c in available]
            # (a hybrid v1/v2 host has no controller on its v2 hierarchy: nothing to delegate)
            for directory in (h.mount, path.parent, path) if wanted else ():
                control = directory / "cgroup.subtree_control"
                try:
                    control.write_text(" ".join(f"+{c}" for c in wanted))
                except OSError as exc:
                    raise RealNodeError(f"cannot delegate cgroup controllers in {directory}: {exc}") from exc
        procs.append(path / DAEMONS / "cgroup.procs")
    if not procs:
        raise RealNodeError("no cgroup hierarchy is mounted under /sys/fs/cgroup")
    return procs


def create_child_cgroup(node: str, child: str) -> list[Path]:
    """A cgroup ``child`` of an existing node's cgroup in every hierarchy, for a process that belongs
    with the node (its exporter, its device plugin), so that the node's teardown kills it too;
    returns the ``cgroup.procs`` files to join."""
    procs = []
    for h in hierarchies():
        path = node_cgroup(h, node) / child
        if not path.parent.is_dir():
            raise RealNodeError(f"node {node} has no cgroup in {h.mount}: is it running?")
        path.mkdir(exist_ok=True)
        if "cpuset" in h.controllers:
            _copy_if_empty(path, "cpuset.cpus")
            _copy_if_empty(path, "cpuset.mems")
        procs.append(path / "cgroup.procs")
    return procs


def joining(procs: list[Path]) -> Callable[[], None]:
    """A ``preexec_fn`` that moves the child into the cgroups whose ``cgroup.procs`` files
    ``procs`` lists, before it execs: it starts life inside the node."""

    def join() -> None:
        for path in procs:
            path.write_text("0")

    return join


def daemons_procs(node: str) -> list[Path]:
    """The ``cgroup.procs`` files of the node's daemons cgroup (where its kubelet runs)."""
    return [node_cgroup(h, node) / DAEMONS / "cgroup.procs" for h in hierarchies()]


def child_cgroup_pids(node: str, child: str) -> set[int]:
    """The live processes of one child cgroup of the node (its exporter, its device plugin)."""
    for h in hierarchies():
        with contextlib.suppress(OSError):
            text = (node_cgroup(h, node) / child / "cgroup.procs").read_text()
            return {pid for pid in map(int, text.split()) if alive(pid)}
    return set()


def cgroup_pids(node: str) -> set[int]:
    """Every process in the node's cgroups, in any hierarchy."""
    pids: set[int] = set()
    for h in hierarchies():
        root = node_cgroup(h, node)
        if not root.is_dir():
            continue
        for directory, _dirs, files in os.walk(root):
            if "cgroup.procs" in files:
                try:
                    text = Path(directory, "cgroup.procs").read_text()
                except OSError:
                    continue
                pids.update(int(p) for p in text.split())
    return pids


def kill_cgroups(node: str, within: float = 20) -> None:
    """SIGKILL every process of the node until its cgroups are empty.

    Freezing first would be tidier on v1, but a frozen runc/containerd-shim pair can hold the
    freezer in FREEZING forever; repeated SIGKILL converges (new children die with their parents).
    """
    deadline = time.monotonic() + within
    while True:
        pids = cgroup_pids(node) - {os.getpid()}
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise RealNodeError(f"processes of node {node} survive SIGKILL: {sorted(pids)}")
        time.sleep(0.05)


def remove_cgroups(node: str, within: float = 10) -> None:
    """Remove the node's cgroups (deepest first) in every hierarchy, and the shared parent once
    no node uses it. The kernel refuses while a cgroup has tasks: retried until ``within``."""
    deadline = time.monotonic() + within
    for h in hierarchies():
        root = node_cgroup(h, node)
        if root.is_dir():
            for directory, _dirs, _files in sorted(os.walk(root, topdown=False), key=lambda w: -len(w[0])):
                while True:
                    try:
                        os.rmdir(directory)
                        break
                    except FileNotFoundError:
                        break
                    except OSError as exc:
                        if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                            raise RealNodeError(f"cannot remove cgroup {directory}: {exc}") from exc
                        time.sleep(0.05)
        with contextlib.suppress(OSError):  # another node still uses it, or it was never created
            root.parent.rmdir()


def leftover_cgroups(node: str | None = None) -> list[str]:
    found = []
    for h in hierarchies():
        path = h.mount / CGROUP_PARENT if node is None else node_cgroup(h, node)
        if path.exists():
            found.append(str(path))
    return found


# -- network ---------------------------------------------------------------------------------------


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def claim_bridge(bridge: str) -> bool:
    """Create the bridge, empty; False when the name is taken. Creating it is the claim: two
    checkouts picking the same free index at the same moment cannot both get it (one would
    otherwise adopt the other's bridge, and lose its address when the other node goes)."""
    return subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], capture_output=True).returncode == 0


def create_bridge(bridge: str, address: str) -> None:
    """The node's CNI bridge (claimed, or created now), with its gateway address (the node IP),
    up before the kubelet starts; the bridge plugin adopts a bridge that already has the address."""
    steps = [] if link_exists(bridge) else [["ip", "link", "add", bridge, "type", "bridge"]]
    shown = subprocess.run(["ip", "-o", "addr", "show", "dev", bridge], capture_output=True, text=True).stdout
    if f" {address} " not in shown:
        steps.append(["ip", "addr", "add", address, "dev", bridge])
    steps.append(["ip", "link", "set", bridge, "up"])
    for step in steps:
        result = subprocess.run(step, capture_output=True, text=True)
        if result.returncode != 0:
            raise RealNodeError(f"{' '.join(step)} failed: {result.stderr.strip()}")


def delete_bridge(bridge: str) -> None:
    """Delete a node's bridge and any veth still enslaved to it (their netns is normally gone)."""
    if not link_exists(bridge):
        return
    brif = Path("/sys/class/net", bridge, "brif")
    for port in sorted(os.listdir(brif)) if brif.is_dir() else []:
        subprocess.run(["ip", "link", "delete", port], capture_output=True)
    result = subprocess.run(["ip", "link", "delete", bridge], capture_output=True, text=True)
    if result.returncode != 0 and link_exists(bridge):
        raise RealNodeError(f"cannot delete bridge {bridge}: {result.stderr.strip()}")


def routes_overlapping(prefix: str) -> list[str]:
    """Routes of the host that fall in ``a.b.c.0/24`` (the node's pod subnet)."""
    base = prefix.rsplit(".", 1)[0] + "."
    result = subprocess.run(["ip", "-4", "-o", "route", "show"], capture_output=True, text=True)
    return [line for line in result.stdout.splitlines() if line.split()[0].startswith(base)]


# -- host mount points and sysctl, shared by all nodes ---------------------------------------------


def _host_state_file(nodes_dir: Path) -> Path:
    return nodes_dir / "host.json"


def claim_host(nodes_dir: Path) -> None:
    """Before the first node: create the missing mount points and remember ip_forward (the CNI
    bridge plugin turns it on for its gateway); :func:`release_host` undoes both."""
    state_file = _host_state_file(nodes_dir)
    state: dict[str, object] = json.loads(state_file.read_text()) if state_file.is_file() else {}
    created = list(state.get("created", []))  # type: ignore[call-overload]
    for point in HOST_MOUNT_POINTS:
        if not os.path.isdir(point):
            os.makedirs(point)
            created.append(point)
    state["created"] = created
    if "ip_forward" not in state:
        state["ip_forward"] = IP_FORWARD.read_text().strip()
    nodes_dir.mkdir(parents=True, exist_ok=True)
    state_file.write_text(json.dumps(state, indent=2) + "\n")


def other_checkouts_running() -> bool:
    """Real nodes of another checkout's cluster run on this machine (they share the host settings)."""
    return any(
        p.name.startswith(CGROUP_PREFIX) and p.name != CGROUP_PARENT and any(c.is_dir() for c in p.iterdir())
        for h in hierarchies()
        if h.mount.is_dir()
        for p in h.mount.iterdir()
        if p.is_dir()
    )


def _drop_dead_shim_sockets(point: Path) -> None:
    """containerd's shims leave their sockets in ``<point>/s`` when a node is killed rather than
    stopped; with no node left they are dead (nothing else but sockets is removed)."""
    shims = point / "s"
    if not shims.is_dir():
        return
    for entry in shims.iterdir():
        if entry.is_socket():
            entry.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        shims.rmdir()


def release_host(nodes_dir: Path) -> None:
    """After the last node: remove the mount points :func:`claim_host` created (if still empty)
    and restore ip_forward; left as they are while another checkout's nodes still use them."""
    state_file = _host_state_file(nodes_dir)
    if not state_file.is_file():
        return
    if other_checkouts_running():
        state_file.unlink()
        return
    state = json.loads(state_file.read_text())
    for point in reversed(state.get("created", [])):
        _drop_dead_shim_sockets(Path(point))
        try:
            os.rmdir(point)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise RealNodeError(f"cannot remove {point} (created for real nodes): {exc}") from exc
    if "ip_forward" in state and IP_FORWARD.read_text().strip() != state["ip_forward"]:
        IP_FORWARD.write_text(state["ip_forward"] + "\n")
    if "max_user_instances" in state:
        INOTIFY_INSTANCES.write_text(f"{state['max_user_instances']}\n")
    state_file.unlink()


def inotify_instances_in_use() -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.scandir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(fd.path) == "anon_inode:inotify":
                        count += 1
    return count


def ensure_inotify_headroom(nodes_dir: Path) -> None:
    """Raise fs.inotify.max_user_instances when one more node would exhaust it; the original
    value is remembered by the first raise and restored by :func:`release_host`."""
    limit = int(INOTIFY_INSTANCES.read_text())
    in_use = inotify_instances_in_use()
    if in_use + INOTIFY_PER_NODE <= limit:
        return
    state_file = _host_state_file(nodes_dir)
    state = json.loads(state_file.read_text()) if state_file.is_file() else {}
    state.setdefault("max_user_instances", limit)
    state_file.write_text(json.dumps(state, indent=2) + "\n")
    INOTIFY_INSTANCES.write_text(f"{max(limit * 2, in_use + 16 * INOTIFY_PER_NODE)}\n")


# -- processes ---------------------------------------------------------------------------------------


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Live (non-zombie) processes whose command line contains ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        line = cmdline(int(entry))
        if text in line:
            found.append((int(entry), line))
    return found


def cmdline(pid: int) -> str:
    """A process's command line, its arguments joined by spaces ("" once it is gone)."""
    try:
        return Path("/proc", str(pid), "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def comm(pid: int) -> str:
    try:
        return Path("/proc", str(pid), "comm").read_text().strip()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a killed kubelet stays one until the process that
    started its node reaps it)."""
    try:
        return Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
