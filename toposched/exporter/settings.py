"""The exporter's settings: ``toposched exporter``'s flags, else TOPOSCHED_* variables, else defaults."""

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Self

from toposched.settings import Setting, Settings

FINGERPRINT_METHODS = ("all", "with-exclusive-resources")


@dataclass(frozen=True)
class ExporterSettings(Settings):
    node: Annotated[str, Setting("--node", env=("NODE_NAME", "TOPOSCHED_NODE"), help="node name")] = ""
    sysfs: Annotated[Path, Setting("--sysfs", env="TOPOSCHED_SYSFS", help="what stands for /sys")] = Path("/sys")
    kubelet_config: Annotated[
        Path | None, Setting("--kubelet-config", env="TOPOSCHED_KUBELET_CONFIG", help="kubelet config file")
    ] = Path("/var/lib/kubelet/config.yaml")
    """None when the file does not exist: the kubelet's defaults."""
    podresources: Annotated[
        Path, Setting("--podresources", env="TOPOSCHED_PODRESOURCES", help="PodResources socket")
    ] = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
    kubelet_state_dir: Annotated[
        Path, Setting("--kubelet-state-dir", env="TOPOSCHED_KUBELET_STATE_DIR", help="kubelet state dir")
    ] = Path("/var/lib/kubelet")
    period: Annotated[float, Setting("--period", env="TOPOSCHED_PERIOD", help="seconds between full refreshes")] = 10.0
    list_interval: Annotated[
        float, Setting("--list-interval", env="TOPOSCHED_LIST_INTERVAL", help="seconds between List polls (>= 0.1)")
    ] = 0.2
    fingerprint_method: Annotated[
        str,
        Setting(
            "--fingerprint-method",
            env="TOPOSCHED_FINGERPRINT_METHOD",
            choices=FINGERPRINT_METHODS,
            help="the pods the NRT's pods fingerprint covers",
        ),
    ] = "with-exclusive-resources"
    advertise_bandwidth: Annotated[
        bool,
        Setting(
            "--advertise-bandwidth",
            env="TOPOSCHED_ADVERTISE_BANDWIDTH",
            help="publish the NICs' speed as the node's network.aware.com/bandwidth",
        ),
    ] = False
    metrics_port: Annotated[
        int, Setting("--metrics-port", env="TOPOSCHED_METRICS_PORT", help="0 turns metrics off")
    ] = 9091
    # Loopback unless told: the exporter may run on the host network, where every interface is the
    # node's. The chart passes the pod's IP (on the host network, the node's own).
    metrics_address: Annotated[
        str, Setting("--metrics-address", env="TOPOSCHED_METRICS_ADDRESS", help="metrics listen address")
    ] = "127.0.0.1"
    health_port: Annotated[
        int, Setting("--health-port", env="TOPOSCHED_HEALTH_PORT", help="/healthz and /readyz; 0 turns them off")
    ] = 8081
    health_address: Annotated[
        str, Setting("--health-address", env="TOPOSCHED_HEALTH_ADDRESS", help="health listen address")
    ] = "127.0.0.1"
    min_write_interval: float = 1.0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Self:
        """The flags, then the environment. A kubelet config file that does not exist means the
        kubelet's defaults, and List is never polled more than 10 times a second."""
        found = super().from_args(args)
        kubelet_config = found.kubelet_config if found.kubelet_config and found.kubelet_config.exists() else None
        return dataclasses.replace(found, kubelet_config=kubelet_config, list_interval=max(0.1, found.list_interval))
