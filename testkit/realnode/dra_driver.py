"""A real node's DRA driver, seen from the test kit: started in the node's cgroups after its
kubelet, given the devices it publishes, changed, restarted or stopped mid-run, and read back
through its call log and the ResourceSlices it publishes.

The driver itself is ``python -m testkit.dra`` (gRPC, see :mod:`testkit.dra`); this module uses
the standard library only. One process serves every driver of the node's :class:`NodeDRA`, in
``<node cgroup>/dra``: removing or resetting the node kills it with the node's other processes.
Its files, under the node's directory::

    dra/dra.json        what it publishes: {"generation": N, "node": NAME, "dra": NodeDRA.to_dict()}
    dra/driver.log      one line per call or event: TIME METHOD DRIVER IDS [KEY=VALUE...]
    kubelet/plugins_registry/<driver>-reg.sock   its registration socket (the kubelet's plugin watcher)
    kubelet/plugins/<driver>/dra.sock            its DRAPlugin socket

The kubelet finds the registration socket in its root dir, asks GetInfo and dials the endpoint
named there, ``/var/lib/kubelet/plugins/<driver>/dra.sock``: the node's kubelet root as its mount
namespace sees it. A starting kubelet deletes every ResourceSlice of its node (and a driver's,
30 s after the driver became unusable); the driver publishes its slices through the API server
once registered, and again whenever they differ from what it publishes.

    driver = node.dra_driver
    driver.restart()                                       # stop, start, registered and published again
    driver.set_devices(NodeDRA.parse(["gpu.example.com=1,1"]))  # returns once the slices show it
    [c.ids for c in driver.calls("NodePrepareResources")]  # the devices the kubelet had prepared
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from testkit.realnode import host
from testkit.realnode.cluster import LocalCluster
from testkit.realnode.dra import NodeDRA, device_class, published
from testkit.realnode.layout import dra_plugin_socket, dra_registration_socket
from testkit.realnode.sidecar import STOP_GRACE, ClusterNode, NodeSidecar, wait_until

DRIVER_CGROUP = "dra"
PLUGIN_TYPE = "DRAPlugin"
SERVICE = "v1.DRAPlugin"
"""The one DRA service the driver offers: the kubelet (1.36) prefers it to v1beta1."""

# The log's methods: the kubelet's calls to the driver (registration, then DRAPlugin)...
GET_INFO, NOTIFY = "GetInfo", "NotifyRegistrationStatus"
PREPARE, UNPREPARE = "NodePrepareResources", "NodeUnprepareResources"
# ... and the driver's events.
SERVING, PUBLISHED, STOPPED, ERROR = "Serving", "Published", "Stopped", "Error"

KUBELET_STARTS = '"Kubelet version"'
"""The kubelet's first log line of each run."""
KUBELET_WIPE = '"Deleted ResourceSlices"'
"""What the kubelet logs (at -v 3 for its DRA plugin manager) once it deleted slices."""


def kubelet_endpoint(driver: str) -> str:
    """The DRAPlugin socket as the kubelet dials it, in its mount namespace."""
    return str(dra_plugin_socket(Path(host.KUBELET_DIR), driver))


@dataclass(frozen=True)
class DriverConfig:
    """What the driver process publishes (dra.json)."""

    generation: int
    node: str
    dra: NodeDRA

    @classmethod
    def read(cls, path: Path) -> DriverConfig:
        data = json.loads(path.read_text())
        return cls(int(data["generation"]), str(data["node"]), NodeDRA.from_dict(data["dra"]))

    def write(self, path: Path) -> None:
        """Replace ``path`` at once (the driver may read it at any moment)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".json.partial")
        data = {"generation": self.generation, "node": self.node, "dra": self.dra.to_dict()}
        partial.write_text(json.dumps(data, indent=2) + "\n")
        partial.replace(path)

    def slices(self) -> list[dict[str, Any]]:
        return self.dra.resource_slices(self.node, self.generation)


def node_slices(cluster: LocalCluster, node: str) -> list[dict[str, Any]]:
    """The ResourceSlices of ``node`` in the API (any driver's), by name."""
    listed = cluster.get_json("resourceslices", f"--field-selector=spec.nodeName={node}") or {}
    return sorted(listed.get("items") or [], key=lambda s: str(s["metadata"]["name"]))


def delete_slices(cluster: LocalCluster, node: str) -> None:
    """Delete every ResourceSlice of ``node`` (its kubelet would on its next start; a removed node has none)."""
    cluster.kubectl(
        "delete", "resourceslices", f"--field-selector=spec.nodeName={node}", "--ignore-not-found", check=False
    )


def ensure_device_class(driver: str, *, name: str = "", cluster: LocalCluster | None = None) -> str:
    """Create (or keep) a DeviceClass selecting every device of ``driver``; returns its name."""
    body = device_class(driver, name)
    (cluster or LocalCluster()).kubectl("apply", "-f", "-", stdin=json.dumps(body))
    return str(body["metadata"]["name"])


class DriverNode(ClusterNode, Protocol):
    """What the DRA driver needs of its node: a ``RealNode``, which holds its driver in turn."""

    @property
    def dra(self) -> NodeDRA: ...


@dataclass(frozen=True)
class DRADriver(NodeSidecar):
    """The DRA driver process of one real node (``RealNode.dra_driver``): it serves every DRA
    driver of the node. Every wait is bounded and fails with the driver's log tail and the
    kubelet's."""

    CGROUP, CONFIG, LOG, TITLE = DRIVER_CGROUP, "dra.json", "driver.log", "DRA driver"

    node: DriverNode

    def config(self) -> DriverConfig:
        """What the driver publishes (or will when started): the node's DRA devices as changed
        mid-run, else as the node was made with."""
        if self.config_file.is_file():
            return DriverConfig.read(self.config_file)
        return DriverConfig(1, self.node.name, self.node.dra)

    def devices(self) -> NodeDRA:
        return self.config().dra

    def sockets(self) -> list[Path]:
        """Its sockets (registration and DRAPlugin, per driver), whether they exist or not."""
        root = self.node.layout.kubelet_root
        drivers = self.devices().drivers()
        return [p for d in drivers for p in (dra_registration_socket(root, d), dra_plugin_socket(root, d))]

    def slices(self) -> list[dict[str, Any]]:
        """The node's ResourceSlices in the API now."""
        return node_slices(self.node.cluster, self.node.name)

    # -- control ---------------------------------------------------------------------------------

    def start(self, timeout: float = 60) -> None:
        """Start the driver and return once the kubelet has registered each of its drivers and
        the API holds exactly its slices (after the kubelet's start-up wipe)."""
        self.node.ensure_running()
        if not self.config_file.is_file():
            self.config().write(self.config_file)
        since = self.log_size()
        args = ["--config", str(self.config_file), "--kubelet-dir", str(self.node.layout.kubelet_root)]
        self._spawn("testkit.dra", [*args, "--kubeconfig", str(self.node.cluster.kubeconfig)])
        self.wait(timeout, since=since)

    def stop(self, timeout: float = STOP_GRACE) -> None:
        """SIGTERM (SIGKILL after ``timeout`` s) and wait until it is gone with its sockets. Its
        slices stay: the kubelet deletes them 30 s later unless the driver is back by then."""
        self._terminate(timeout)
        for path in self.sockets():  # a killed driver leaves its sockets behind
            path.unlink(missing_ok=True)

    def restart(self, timeout: float = 60) -> None:
        """Stop and start again: the kubelet registers it anew."""
        self.stop()
        self.start(timeout)

    def set_devices(self, dra: NodeDRA, timeout: float = 60) -> None:
        """Publish ``dra`` from now on (SIGHUP): a driver added registers, one removed goes with
        its slices. Returns once the API shows it; with the driver stopped it only records it."""
        dra.validate(self.node.topology)
        current = self.config()
        since = self.log_size()
        DriverConfig(current.generation + 1, self.node.name, dra).write(self.config_file)
        if not self.running():
            return
        self._signal(signal.SIGHUP)
        self.wait(timeout, since=since, drivers=set(dra.drivers()) - set(current.dra.drivers()))

    def wait(self, timeout: float = 60, *, since: int = 0, drivers: set[str] | None = None) -> None:
        """Wait until the kubelet has registered ``drivers`` (default: all) after byte ``since``
        of the log, the kubelet's start-up wipe is done and the API holds exactly the slices of
        the driver's configuration. Fails at once when the driver or the kubelet exits."""
        expected = {published(s) for s in self.config().slices()}
        pending = set(self.devices().drivers()) if drivers is None else drivers
        last: list[str] = []

        def done() -> bool:
            if not self.running():
                raise self.exited()
            self.node.ensure_running()
            registered = {c.resource for c in self.calls(NOTIFY, since=since) if c.detail.get("registered") == "True"}
            last[:] = [f"{d} not registered by the kubelet yet" for d in sorted(pending - registered)]
            if not last and not kubelet_wiped(self.node.layout.logs / "kubelet.log"):
                last[:] = ["the kubelet has not wiped the node's slices since it started"]
            if not last:
                found = {published(s) for s in self.slices()}
                last[:] = [f"slice {p[0]} missing or different" for p in sorted(expected - found, key=str)]
                last.extend(f"slice {p[0]} is one too many" for p in sorted(found - expected, key=str))
            return not last

        def what() -> str:
            return f"the DRA driver of {self.node.name} to be registered and published ({'; '.join(last)})"

        wait_until(done, timeout, what, self.tails)


def kubelet_wiped(log: Path) -> bool:
    """Whether the kubelet logging to ``log`` has deleted its node's slices since it last started
    (the wipe of one driver's slices, 30 s after it went, names the driver too: it does not count)."""
    if not log.is_file():
        return False
    text = log.read_bytes()
    run = text[max(0, text.rfind(KUBELET_STARTS.encode())) :]
    return any(KUBELET_WIPE.encode() in line and b"spec.driver" not in line for line in run.splitlines())
