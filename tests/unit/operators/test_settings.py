"""OperatorSettings: `toposched operator`'s flags, else TOPOSCHED_* variables, else defaults."""

import os
import socket
from collections.abc import Callable

import pytest

from toposched.operators.settings import OperatorSettings
from toposched.settings import Settings


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        pytest.param(
            [],
            {},
            {
                "namespaces": (),
                "liveness": None,
                "verbose": False,
                "metrics_port": 9090,
                "metrics_address": "127.0.0.1",
                "leader_election": True,
                "lease_namespace": "default",
                "lease_name": "toposched-operator",
                "identity": f"{socket.gethostname()}-{os.getpid()}",
                "coalesce_seconds": 0.2,
                "netperf_percentile": "p90",
                "netperf_max_age_seconds": 3600,
                "resync_seconds": 300,
            },
            id="defaults",
        ),
        pytest.param(
            ["-n", "a", "--namespace", "b*", "--liveness", "http://0.0.0.0:8080/healthz", "-v"],
            {},
            {"namespaces": ("a", "b*"), "liveness": "http://0.0.0.0:8080/healthz", "verbose": True},
            id="flags",
        ),
        pytest.param([], {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, {"metrics_address": "0.0.0.0"}, id="in-a-pod"),
        pytest.param(
            [], {"TOPOSCHED_METRICS_ADDRESS": "10.1.2.3"}, {"metrics_address": "10.1.2.3"}, id="address-variable"
        ),
        pytest.param(
            ["--metrics-address", "::"],
            {"TOPOSCHED_METRICS_ADDRESS": "10.1.2.3"},
            {"metrics_address": "::"},
            id="address-flag-beats-variable",
        ),
        pytest.param([], {"POD_NAMESPACE": "toposched"}, {"lease_namespace": "toposched"}, id="lease-in-pod-namespace"),
        pytest.param(
            [],
            {"POD_NAMESPACE": "toposched", "TOPOSCHED_LEASE_NAMESPACE": "elsewhere"},
            {"lease_namespace": "elsewhere"},
            id="lease-namespace-told",
        ),
        pytest.param(
            [],
            {
                "TOPOSCHED_METRICS_PORT": "0",
                "TOPOSCHED_LEADER_ELECTION": "false",
                "TOPOSCHED_LEASE_NAME": "lease",
                "TOPOSCHED_IDENTITY": "pod-1",
                "TOPOSCHED_COALESCE_SECONDS": "0.05",
                "TOPOSCHED_NETPERF_PERCENTILE": "p99",
                "TOPOSCHED_NETPERF_MAX_AGE_SECONDS": "60",
                "TOPOSCHED_RESYNC_SECONDS": "30",
            },
            {
                "metrics_port": 0,
                "leader_election": False,
                "lease_name": "lease",
                "identity": "pod-1",
                "coalesce_seconds": 0.05,
                "netperf_percentile": "p99",
                "netperf_max_age_seconds": 60,
                "resync_seconds": 30,
            },
            id="variables",
        ),
    ],
)
def test_flags_then_variables_then_defaults(
    command_settings: Callable[..., Settings], argv: list[str], environ: dict[str, str], expected: dict[str, object]
) -> None:
    found = command_settings("operator", argv, environ)
    assert {name: getattr(found, name) for name in expected} == expected


def test_under_kopf_run_the_environment_alone(command_settings: Callable[..., Settings]) -> None:
    environ = {"TOPOSCHED_METRICS_PORT": "0", "POD_NAMESPACE": "toposched", "TOPOSCHED_IDENTITY": "pod-1"}
    from_the_command = command_settings("operator", [], environ)
    assert OperatorSettings.from_env() == from_the_command
