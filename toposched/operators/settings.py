"""The operators' settings: ``toposched operator``'s flags, else TOPOSCHED_* variables, else defaults.

Under ``kopf run -m toposched.operators.main`` there are no flags of ours (Kopf's own decide the
namespaces, the liveness endpoint and verbosity), and the settings come from the environment only.
"""

import os
import socket
from dataclasses import dataclass, field
from typing import Annotated

from toposched.listeners import default_address
from toposched.settings import Setting, Settings


def _identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class OperatorSettings(Settings):
    namespaces: Annotated[
        tuple[str, ...],
        Setting(
            "-n",
            "--namespace",
            help="watch only this namespace (repeatable; glob patterns allowed); default: all namespaces",
        ),
    ] = ()
    liveness: Annotated[
        str | None,
        Setting("--liveness", metavar="URL", help="serve a liveness probe, e.g. http://0.0.0.0:8080/healthz"),
    ] = None
    verbose: Annotated[bool, Setting("-v", "--verbose", help="debug logging")] = False
    metrics_port: Annotated[int, Setting(env="TOPOSCHED_METRICS_PORT", help="metrics port, 0 turns it off")] = 9090
    """Port of the Prometheus /metrics endpoint."""
    metrics_address: Annotated[
        str,
        Setting(
            "--metrics-address",
            env="TOPOSCHED_METRICS_ADDRESS",
            shown="all interfaces in a pod, else 127.0.0.1",
            help="metrics listen address",
        ),
    ] = field(default_factory=default_address)
    """Every interface in a pod (behind a Service), else loopback."""
    leader_election: Annotated[bool, Setting(env="TOPOSCHED_LEADER_ELECTION", help="take a Lease before writing")] = (
        True
    )
    """So that only one of several replicas acts."""
    lease_namespace: Annotated[
        str, Setting(env=("TOPOSCHED_LEASE_NAMESPACE", "POD_NAMESPACE"), help="the Lease's namespace")
    ] = "default"
    lease_name: Annotated[str, Setting(env="TOPOSCHED_LEASE_NAME", help="the Lease's name")] = "toposched-operator"
    identity: Annotated[str, Setting(env="TOPOSCHED_IDENTITY", shown="host name-pid", help="this replica's name")] = (
        field(default_factory=_identity)
    )
    """The Lease holder's name, the Events' reporting instance and Kopf's identity."""
    coalesce_seconds: Annotated[
        float, Setting(env="TOPOSCHED_COALESCE_SECONDS", help="pod events within this window, one status write")
    ] = 0.2
    """Pod events within this window become one status write per AppGroup."""
    netperf_percentile: Annotated[
        str, Setting(env="TOPOSCHED_NETPERF_PERCENTILE", help="the measured percentile that drives network costs")
    ] = "p90"
    """p50, p90 or p99."""
    netperf_max_age_seconds: Annotated[
        float, Setting(env="TOPOSCHED_NETPERF_MAX_AGE_SECONDS", help="older measurements are stale")
    ] = 3600.0
    """Measurements older than this are reported as stale (and still used)."""
    resync_seconds: Annotated[
        float, Setting(env="TOPOSCHED_RESYNC_SECONDS", help="recompute every NetworkTopology this often")
    ] = 300.0
