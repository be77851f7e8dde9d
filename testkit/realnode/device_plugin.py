"""A real node's device plugin, seen from the test kit: started in the node's cgroups, given the
devices it serves, changed, restarted or stopped mid-run, and read back through its call log.

The plugin itself is ``python -m testkit.deviceplugin`` (gRPC, see :mod:`testkit.deviceplugin`);
this module uses the standard library only, so real nodes and ``make cluster-down`` need no gRPC.
The plugin runs in ``<node cgroup>/deviceplugin``: removing or resetting the node kills it with
the node's other processes. Its files, under the node's directory::

    deviceplugin/devices.json   what it serves: {"generation": N, "devices": NodeDevices.to_dict()}
    deviceplugin/plugin.log     one line per call or event: TIME METHOD RESOURCE IDS [KEY=VALUE...]
    kubelet/device-plugins/     the kubelet's kubelet.sock and the plugin's sockets (one per resource)

The kubelet's device manager always uses ``/var/lib/kubelet/device-plugins``; in the node's mount
namespace the node's kubelet root is bind-mounted there, so the kubelet and the plugin (outside
that namespace) meet on the same files. The kubelet dials each socket by the endpoint name the
plugin registers, relative to that directory.

    plugin = node.device_plugin
    plugin.set_health("example.com/gpu", "gpu-0", healthy=False)  # returns once the Node shows it
    plugin.restart()                                               # stop, start, registered again
    [c.ids for c in plugin.calls("Allocate")]                     # what the kubelet asked for
"""

from __future__ import annotations

import hashlib
import json
import signal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from testkit.realnode.devices import NodeDevices
from testkit.realnode.errors import RealNodeError
from testkit.realnode.sidecar import STOP_GRACE, ClusterNode, NodeSidecar, wait_until
from testkit.realnode.sidecar import PluginCall as PluginCall
from testkit.realnode.sidecar import format_call as format_call
from testkit.realnode.sidecar import parse_calls as parse_calls

PLUGIN_CGROUP = "deviceplugin"
KUBELET_SOCKET = "kubelet.sock"
API_VERSION = "v1beta1"

# The log's methods: the plugin's own call to the kubelet, the kubelet's calls to the plugin
# (ListAndWatchUpdate: a later list sent on an open ListAndWatch), and events.
REGISTER = "Register"
OPTIONS = "GetDevicePluginOptions"
LIST_AND_WATCH = "ListAndWatch"
LIST_AND_WATCH_UPDATE = "ListAndWatchUpdate"
PREFERRED = "GetPreferredAllocation"
ALLOCATE = "Allocate"
PRE_START = "PreStartContainer"
ERROR = "Error"


def endpoint_name(resource: str) -> str:
    """The plugin's socket for ``resource`` in the device-plugins directory: short (unix socket
    paths are limited) and the same for a resource across restarts and changes."""
    return f"tsdp-{hashlib.sha1(resource.encode()).hexdigest()[:10]}.sock"


def read_config(path: Path) -> tuple[int, NodeDevices]:
    """(generation, devices) of a plugin's devices.json."""
    data = json.loads(path.read_text())
    return int(data["generation"]), NodeDevices.from_dict(data["devices"])


def write_config(path: Path, generation: int, devices: NodeDevices) -> None:
    """Replace a plugin's devices.json at once (the plugin may read it at any moment)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps({"generation": generation, "devices": devices.to_dict()}, indent=2) + "\n")
    partial.replace(path)


class PluginNode(ClusterNode, Protocol):
    """What the device plugin needs of its node: a ``RealNode``, which holds its plugin in turn."""

    @property
    def devices(self) -> NodeDevices: ...


@dataclass(frozen=True)
class DevicePlugin(NodeSidecar):
    """The device plugin of one real node (``RealNode.device_plugin``). Every wait is bounded and
    fails with the plugin's log tail and the kubelet's."""

    CGROUP, CONFIG, LOG, TITLE = PLUGIN_CGROUP, "devices.json", "plugin.log", "device plugin"

    node: PluginNode

    @property
    def socket_dir(self) -> Path:
        """The kubelet's device-plugins directory, as the host sees it."""
        return self.node.layout.device_plugins

    def sockets(self) -> dict[str, Path]:
        """Resource -> the socket the plugin serves it on (whether it exists or not)."""
        return {name: self.socket_dir / endpoint_name(name) for name in self.devices().names()}

    def devices(self) -> NodeDevices:
        """What the plugin serves (or will serve when started): the node's devices as changed
        mid-run, else as the node was made with."""
        return read_config(self.config_file)[1] if self.config_file.is_file() else self.node.devices

    def generation(self) -> int:
        return read_config(self.config_file)[0] if self.config_file.is_file() else 0

    # -- control ---------------------------------------------------------------------------------

    def start(self, timeout: float = 60) -> None:
        """Start the plugin with :meth:`devices` and return once the kubelet has every resource's
        list and the Node shows them (capacity counts unhealthy devices, allocatable does not)."""
        self.node.ensure_running()
        if not self.config_file.is_file():
            write_config(self.config_file, 1, self.devices())
        since = self.log_size()
        self._spawn("testkit.deviceplugin", ["--config", str(self.config_file), "--socket-dir", str(self.socket_dir)])
        self.wait(timeout, since=since)

    def stop(self, timeout: float = STOP_GRACE) -> None:
        """SIGTERM (SIGKILL after ``timeout`` s) and wait until it is gone with its sockets; the
        kubelet then finds the resources' lists ended and marks their devices unhealthy."""
        self._terminate(timeout)
        for path in self.sockets().values():  # a killed plugin leaves its sockets behind
            path.unlink(missing_ok=True)

    def restart(self, timeout: float = 60) -> None:
        """Stop and start again (it registers anew), as a plugin's crash and restart would."""
        self.stop()
        self.start(timeout)

    def reregister(self, timeout: float = 60) -> None:
        """Register every resource once more while serving on (SIGUSR1): the kubelet connects
        again and opens a second ListAndWatch; returns once it has and the Node shows the devices."""
        if not self.running():
            raise RealNodeError(f"the device plugin of {self.node.name} does not run\n{self.tails()}")
        since = self.log_size()
        self._signal(signal.SIGUSR1)
        self.wait(timeout, since=since)

    def update(self, devices: NodeDevices, timeout: float = 60) -> None:
        """Serve ``devices`` from now on: new lists go out on the open ListAndWatch streams (a
        resource whose options changed registers again, one added registers, one removed stops).
        Returns once the kubelet has them and the Node shows them; with the plugin stopped it only
        records them for the next start."""
        devices.validate(self.node.topology)
        old = self.devices()
        generation = self.generation() + 1
        since = self.log_size()
        write_config(self.config_file, generation, devices)
        if not self.running():
            return
        self._signal(signal.SIGHUP)
        changed = {r.name for r in devices.resources if r not in old.resources}
        removed = set(old.names()) - set(devices.names())
        self.wait(timeout, since=since, resources=changed, generation=generation, removed=removed)

    def set_health(self, resource: str, device_id: str, healthy: bool, timeout: float = 60) -> None:
        """Mark one device (un)healthy mid-run, as a plugin does when its device fails or recovers."""
        self.update(self.devices().with_health(resource, device_id, healthy), timeout)

    def wait(
        self,
        timeout: float = 60,
        *,
        since: int = 0,
        resources: set[str] | None = None,
        generation: int = 0,
        removed: Iterable[str] = (),
    ) -> None:
        """Wait until the plugin has sent the kubelet the lists of ``resources`` (default: all it
        serves) at ``generation`` or later, after byte ``since`` of its log, and the Node's
        capacity and allocatable show every resource it serves (and none allocatable of the
        ``removed`` ones). Fails at once when the plugin or the kubelet exits."""
        devices = self.devices()
        expected = devices.counts()
        pending = set(devices.names()) if resources is None else set(resources)
        last: list[str] = []

        def done() -> bool:
            if not self.running():
                raise self.exited()
            self.node.ensure_running()
            sent = {
                c.resource
                for c in self.calls(since=since)
                if c.method in (LIST_AND_WATCH, LIST_AND_WATCH_UPDATE) and c.generation >= generation
            }
            last[:] = [f"no list of {name} sent to the kubelet yet" for name in sorted(pending - sent)]
            if last:
                return False
            last[:] = _node_differences(self.node, expected, removed)
            return not last

        def what() -> str:
            return f"node {self.node.name} to show its devices ({'; '.join(last)})"

        wait_until(done, timeout, what, self.tails)


def _node_differences(node: PluginNode, expected: Mapping[str, tuple[int, int]], removed: Iterable[str]) -> list[str]:
    """How the Node's capacity and allocatable differ from ``expected`` (empty: they agree)."""
    obj = node.cluster.get_json("node", node.name)
    if obj is None:
        return [f"no Node {node.name}"]
    status = obj.get("status", {})
    capacity, allocatable = status.get("capacity", {}), status.get("allocatable", {})
    found = []
    for name, (total, healthy) in sorted(expected.items()):
        shown = (capacity.get(name), allocatable.get(name))
        if shown != (str(total), str(healthy)):
            found.append(f"{name}: capacity/allocatable {shown[0]}/{shown[1]}, expected {total}/{healthy}")
    for name in sorted(removed):
        if allocatable.get(name, "0") != "0":
            found.append(f"{name}: allocatable {allocatable[name]} after its removal, expected 0")
    return found
