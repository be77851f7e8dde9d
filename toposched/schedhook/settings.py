"""schedhook's settings: ``toposched schedhook``'s flags, else TOPOSCHED_* variables, else defaults."""

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Self

from toposched.apis.constants import WEIGHT_NETPERF
from toposched.listeners import default_address
from toposched.logs import LEVELS
from toposched.settings import Setting, Settings

DEFAULT_CLIENT = "toposched-scheduler"
"""The common name of kube-scheduler's client certificate in the chart (of a release named toposched)."""


def label(text: str) -> tuple[str, str]:
    """KEY=VALUE."""
    key, equals, value = text.partition("=")
    if not equals:
        raise ValueError(text)
    return key, value


@dataclass(frozen=True)
class SchedhookSettings(Settings):
    address: Annotated[
        str,
        Setting(
            "--address",
            env="TOPOSCHED_ADDRESS",
            shown="all interfaces in a pod, else 127.0.0.1",
            help="listen address of the extender and the webhooks",
        ),
    ] = field(default_factory=default_address)
    port: Annotated[int, Setting("--port", env="TOPOSCHED_PORT", help="extender port (HTTPS)")] = 8888
    loopback_port: Annotated[
        int,
        Setting(
            "--loopback-port",
            env="TOPOSCHED_LOOPBACK_PORT",
            help="also serve the extender's verbs over plain HTTP on 127.0.0.1 at this port, for a kube-scheduler "
            "in the same pod (the sidecar): no TLS handshake per call; only the pod's containers reach it. 0: off",
        ),
    ] = 0
    metrics_port: Annotated[
        int, Setting("--metrics-port", env="TOPOSCHED_METRICS_PORT", help="0 turns metrics off")
    ] = 9092
    metrics_address: Annotated[
        str,
        Setting("--metrics-address", env="TOPOSCHED_METRICS_ADDRESS", shown="--address", help="metrics listen address"),
    ] = ""
    webhook_address: Annotated[
        str,
        Setting(
            "--webhook-address",
            env="TOPOSCHED_WEBHOOK_ADDRESS",
            shown="--address",
            help="webhooks listen address; on the host network the extender may stay on loopback while the "
            "apiserver reaches the webhooks at the node's address",
        ),
    ] = ""
    weights_name: Annotated[
        str, Setting("--weights-name", env="TOPOSCHED_WEIGHTS_NAME", help="the NetworkTopology weight of the costs")
    ] = WEIGHT_NETPERF
    strategy: Annotated[
        str,
        Setting(
            "--strategy",
            env="TOPOSCHED_NUMA_STRATEGY",
            help="NUMA score: MostAllocated, LeastAllocated, BalancedAllocation or LeastNUMANodes",
        ),
    ] = "MostAllocated"
    reservation_timeout: Annotated[
        float,
        Setting(
            "--reservation-timeout",
            env="TOPOSCHED_RESERVATION_TIMEOUT",
            help="seconds a bound pod's request stays reserved if its node's NRT does not change",
        ),
    ] = 60.0
    webhook_port: Annotated[int, Setting("--webhook-port", env="TOPOSCHED_WEBHOOK_PORT", help="webhooks port")] = 9443
    tls_cert: Annotated[
        str | None, Setting("--tls-cert", env="TOPOSCHED_TLS_CERT", help="webhook serving certificate (PEM)")
    ] = None
    tls_key: Annotated[
        str | None, Setting("--tls-key", env="TOPOSCHED_TLS_KEY", help="webhook serving key (PEM) for --tls-cert")
    ] = None
    extender_tls_cert: Annotated[
        str | None,
        Setting(
            "--extender-tls-cert",
            env="TOPOSCHED_EXTENDER_TLS_CERT",
            shown="--tls-cert",
            help="extender serving certificate (PEM)",
        ),
    ] = None
    extender_tls_key: Annotated[
        str | None,
        Setting("--extender-tls-key", env="TOPOSCHED_EXTENDER_TLS_KEY", shown="--tls-key", help="extender serving key"),
    ] = None
    extender_client_ca: Annotated[
        str | None,
        Setting(
            "--extender-client-ca",
            env="TOPOSCHED_EXTENDER_CLIENT_CA",
            help="CA of kube-scheduler's client certificate (PEM); the extender answers no one else",
        ),
    ] = None
    extender_client_names: Annotated[
        tuple[str, ...],
        Setting(
            "--extender-client-name",
            env="TOPOSCHED_EXTENDER_CLIENT_NAME",
            help="name (common name or DNS name) of an allowed client certificate; repeatable",
        ),
    ] = (DEFAULT_CLIENT,)
    route_namespaces: Annotated[
        tuple[str, ...], Setting("--route-namespace", help="send pods of this namespace to toposched (repeatable)")
    ] = ()
    route_labels: Annotated[
        tuple[tuple[str, str], ...],
        Setting("--route-label", parse=label, metavar="KEY=VALUE", help="send pods with this label to toposched"),
    ] = ()
    order_wait: Annotated[
        float,
        Setting(
            "--order-wait",
            env="TOPOSCHED_ORDER_WAIT",
            help="seconds a gated AppGroup pod waits for earlier workloads before it is released anyway",
        ),
    ] = 30.0
    bind_wait: Annotated[
        float,
        Setting(
            "--bind-wait",
            env="TOPOSCHED_BIND_WAIT",
            help="the most seconds a filter waits for earlier pods' binds, so it sees their NUMA reservations",
        ),
    ] = 1.0
    no_remediation: Annotated[
        bool, Setting("--no-remediation", help="leave pods that failed with TopologyAffinityError alone")
    ] = False
    missing_nrt: Annotated[
        str,
        Setting(
            "--missing-nrt",
            env="TOPOSCHED_MISSING_NRT",
            choices=("pass", "fail"),
            help="nodes without a NodeResourceTopology that none is expected of: pass with the lowest score, or fail",
        ),
    ] = "pass"
    nrt_grace: Annotated[
        float,
        Setting(
            "--nrt-grace",
            env="TOPOSCHED_NRT_GRACE",
            help="seconds a node whose NRT went away (and whose Node carries no Topology Manager label) still "
            "counts as NUMA-managed: its exporter is expected back",
        ),
    ] = 600.0
    stale_after: Annotated[
        float,
        Setting(
            "--stale-after",
            env="TOPOSCHED_STALE_AFTER",
            help="seconds an NRT may leave out a pod bound to its node before the node counts as blind",
        ),
    ] = 30.0
    dra_alignment: Annotated[
        str,
        Setting(
            "--dra-alignment",
            env="TOPOSCHED_DRA_ALIGNMENT",
            choices=("auto", "strict", "prefer", "off"),
            help="DRA devices off the NUMA zones of a pod's pinned CPUs: fail the node (strict), score it lowest "
            "(prefer), or ignore it (off); auto: strict under single-numa-node or restricted, else prefer. "
            "A pod's toposched.io/dra-alignment annotation overrides it",
        ),
    ] = "auto"
    dra_allocator: Annotated[
        str,
        Setting(
            "--dra-allocator",
            env="TOPOSCHED_DRA_ALLOCATOR",
            shown="toposched-dra-allocate on PATH",
            help="the DRA allocator helper: kube-scheduler's allocator, which predicts its device picks",
        ),
    ] = ""
    dra_pin: Annotated[
        str,
        Setting(
            "--dra-pin",
            env="TOPOSCHED_DRA_PIN",
            choices=("annotated", "all", "off"),
            help="the claim webhook keeps a new claim of a pod with pinned CPUs on the NUMA node most nodes would "
            "pin them on: for pods annotated toposched.io/dra-pin-numa=true, for all (but those annotated false), "
            "or never",
        ),
    ] = "annotated"
    dra_timeout: Annotated[
        float,
        Setting(
            "--dra-timeout",
            env="TOPOSCHED_DRA_TIMEOUT",
            help="the most seconds the allocator may search a node's devices; past it the node's pick is unknown",
        ),
    ] = 2.0
    scheduler_lease: Annotated[
        str,
        Setting(
            "--scheduler-lease",
            env="TOPOSCHED_SCHEDULER_LEASE",
            metavar="NAMESPACE/NAME",
            help="kube-scheduler's Lease: the extender acts only while the kube-scheduler of its own pod holds it, "
            "as the apiserver says (schedhook as a sidecar of each replica); empty: it always acts",
        ),
    ] = ""
    scheduler_identity: Annotated[
        str,
        Setting(
            "--scheduler-identity",
            env="TOPOSCHED_SCHEDULER_IDENTITY",
            shown="the hostname",
            help="how kube-scheduler's Lease identity (<hostname>_<uuid>) starts when its own scheduler holds it",
        ),
    ] = ""
    log_level: Annotated[
        str,
        Setting(
            "--log-level",
            env="TOPOSCHED_LOG_LEVEL",
            choices=LEVELS,
            help=f"the level of toposched's own messages: {', '.join(LEVELS)}; debug says what the extender saw of "
            "each node when it refused or bound a pod",
        ),
    ] = "info"
    no_controllers: Annotated[
        bool,
        Setting(
            "--no-controllers",
            help="leave releasing AppGroup gates and remediation to another schedhook (for kube-scheduler's sidecar)",
        ),
    ] = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Self:
        """The flags, then the environment; the addresses and the extender's key pair not given
        are --address and the webhooks' key pair."""
        found = super().from_args(args)
        return dataclasses.replace(
            found,
            metrics_address=found.metrics_address or found.address,
            webhook_address=found.webhook_address or found.address,
            extender_tls_cert=found.extender_tls_cert or found.tls_cert,
            extender_tls_key=found.extender_tls_key or found.tls_key,
        )
