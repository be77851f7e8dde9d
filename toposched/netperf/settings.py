"""The prober's settings: ``toposched netperf``'s flags, else the pod's variables, else defaults."""

from dataclasses import dataclass
from typing import Annotated

from toposched.settings import Setting, Settings


@dataclass(frozen=True)
class ProberSettings(Settings):
    node: Annotated[str, Setting("--node", env="NODE_NAME", help="this node's name")] = ""
    namespace: Annotated[str, Setting("--namespace", env="POD_NAMESPACE", help="ConfigMap namespace")] = "default"
    configmap: Annotated[str, Setting("--configmap", help="ConfigMap to write")] = "netperf-metrics"
    selector: Annotated[str, Setting("--selector", help="label selector of the nodes to measure (default: all)")] = ""
    all_pairs: Annotated[bool, Setting("--all-pairs", help="measure every node, not one node per zone pair")] = False
    duration: Annotated[float, Setting("--duration", help="seconds per netperf run")] = 2.0
    interval: Annotated[float, Setting("--interval", help="seconds between rounds")] = 300.0
    once: Annotated[bool, Setting("--once", help="measure one round and exit")] = False
    control_port: Annotated[int, Setting("--control-port", help="netserver's control port")] = 12865
    data_port: Annotated[int, Setting("--data-port", help="netserver's data port, fixed for firewalls")] = 12866
