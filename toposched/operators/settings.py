"""Operator settings, read once at start-up from TOPOSCHED_* environment variables."""

import os
import socket
from dataclasses import dataclass

from toposched.kube.listen import default_address


def _env(name: str, default: str) -> str:
    return os.environ.get(f"TOPOSCHED_{name}", default)


@dataclass(frozen=True)
class OperatorSettings:
    metrics_port: int
    """Port of the Prometheus /metrics endpoint; 0 turns it off."""
    metrics_address: str
    """Its listen address: every interface in a pod (behind a Service), else loopback."""
    leader_election: bool
    """Take a Lease before writing, so that only one of several replicas acts."""
    lease_namespace: str
    lease_name: str
    identity: str
    coalesce_seconds: float
    """Pod events within this window become one status write per AppGroup."""
    netperf_percentile: str
    """Which measured percentile drives network costs: p50, p90 or p99."""
    netperf_max_age_seconds: float
    """Measurements older than this are reported as stale (and still used)."""
    resync_seconds: float
    """Every NetworkTopology is recomputed at least this often."""

    @classmethod
    def from_env(cls) -> "OperatorSettings":
        return cls(
            metrics_port=int(_env("METRICS_PORT", "9090")),
            metrics_address=_env("METRICS_ADDRESS", default_address()),
            leader_election=_env("LEADER_ELECTION", "true").lower() in ("1", "true", "yes"),
            lease_namespace=_env("LEASE_NAMESPACE", os.environ.get("POD_NAMESPACE", "default")),
            lease_name=_env("LEASE_NAME", "toposched-operator"),
            identity=_env("IDENTITY", f"{socket.gethostname()}-{os.getpid()}"),
            coalesce_seconds=float(_env("COALESCE_SECONDS", "0.2")),
            netperf_percentile=_env("NETPERF_PERCENTILE", "p90"),
            netperf_max_age_seconds=float(_env("NETPERF_MAX_AGE_SECONDS", "3600")),
            resync_seconds=float(_env("RESYNC_SECONDS", "300")),
        )
