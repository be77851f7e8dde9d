"""Where a real node's files are, under ``.cluster/nodes/<name>/`` (listed in :mod:`testkit.realnode.node`).

The node and its device plugin both find their files here; it knows nothing of either.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


def dra_registration_socket(kubelet_root: Path, driver: str) -> Path:
    """A DRA driver's registration socket, where the kubelet's plugin watcher finds it."""
    return kubelet_root / "plugins_registry" / f"{driver}-reg.sock"


def dra_plugin_socket(kubelet_root: Path, driver: str) -> Path:
    """A DRA driver's DRAPlugin socket (the place the kubelet's helper library gives it)."""
    return kubelet_root / "plugins" / driver / "dra.sock"


@dataclass(frozen=True)
class NodeLayout:
    """Where a node's files are (see :mod:`testkit.realnode.node`)."""

    root: Path

    @property
    def record(self) -> Path:
        return self.root / "node.json"

    @property
    def launcher(self) -> Path:
        return self.root / "node.sh"

    @property
    def kubelet_script(self) -> Path:
        return self.root / "kubelet.sh"

    @property
    def fakehost(self) -> Path:
        return self.root / "fakehost"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet.yaml"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def containerd(self) -> Path:
        return self.root / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd / "containerd.sock"

    @property
    def cni(self) -> Path:
        return self.root / "cni"

    @property
    def host_dirs(self) -> Path:
        return self.root / "host"

    @property
    def runc_wrapper(self) -> Path:
        return self.root / "runc-wrapper"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def pod_resources_socket(self) -> Path:
        return self.kubelet_root / "pod-resources" / "kubelet.sock"

    @property
    def device_plugins(self) -> Path:
        """The kubelet's device-plugins directory (in the node's namespace: /var/lib/kubelet/device-plugins)."""
        return self.kubelet_root / "device-plugins"

    def longest_socket(self, dra_drivers: Iterable[str] = ()) -> Path:
        """The longest unix socket path of the node (its DRA drivers' registration sockets too)."""
        return max(
            (
                self.pod_resources_socket,
                self.device_plugins / "kubelet.sock",
                self.kubelet_root / "plugins_registry" / "csi.sock",
                Path(str(self.containerd_socket) + ".ttrpc"),
                *(dra_registration_socket(self.kubelet_root, driver) for driver in dra_drivers),
            ),
            key=lambda p: len(str(p)),
        )
