"""SchedhookSettings: `toposched schedhook`'s flags, else TOPOSCHED_* variables, else defaults."""

from collections.abc import Callable

import pytest

from toposched.schedhook.settings import DEFAULT_CLIENT
from toposched.settings import Settings

IN_A_POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        pytest.param(
            [],
            {},
            {
                "address": "127.0.0.1",
                "port": 8888,
                "metrics_port": 9092,
                "metrics_address": "127.0.0.1",
                "webhook_address": "127.0.0.1",
                "weights_name": "NetperfCosts",
                "strategy": "MostAllocated",
                "reservation_timeout": 60,
                "webhook_port": 9443,
                "tls_cert": None,
                "extender_tls_cert": None,
                "extender_client_ca": None,
                "extender_client_names": (DEFAULT_CLIENT,),
                "route_namespaces": (),
                "route_labels": (),
                "order_wait": 30,
                "bind_wait": 1.0,
                "no_remediation": False,
                "missing_nrt": "pass",
            },
            id="defaults",
        ),
        pytest.param(
            [], IN_A_POD, {"address": "0.0.0.0", "metrics_address": "0.0.0.0", "webhook_address": "0.0.0.0"}, id="pod"
        ),
        pytest.param(["--address", "127.0.0.1"], IN_A_POD, {"address": "127.0.0.1"}, id="address-told"),
        pytest.param(
            [],
            {"TOPOSCHED_ADDRESS": "10.0.0.1", "TOPOSCHED_METRICS_ADDRESS": "::1"},
            {"address": "10.0.0.1", "metrics_address": "::1", "webhook_address": "10.0.0.1"},
            id="addresses-from-variables",
        ),
        pytest.param(
            ["--metrics-address", "::1"],
            {"TOPOSCHED_METRICS_ADDRESS": "10.0.0.9"},
            {"address": "127.0.0.1", "metrics_address": "::1"},
            id="metrics-told",
        ),
        pytest.param(
            ["--webhook-address", "10.0.0.5"],
            {"TOPOSCHED_WEBHOOK_ADDRESS": "10.0.0.9"},
            {"address": "127.0.0.1", "webhook_address": "10.0.0.5"},
            id="webhooks-told",
        ),
        pytest.param(
            ["--tls-cert", "c.pem", "--tls-key", "k.pem"],
            {},
            {"extender_tls_cert": "c.pem", "extender_tls_key": "k.pem"},
            id="extender-key-pair-from-the-webhooks",
        ),
        pytest.param(
            ["--tls-cert", "c.pem", "--extender-tls-cert", "e.pem"],
            {"TOPOSCHED_TLS_KEY": "k.pem"},
            {"extender_tls_cert": "e.pem", "extender_tls_key": "k.pem"},
            id="extender-key-pair-own",
        ),
        pytest.param(
            [], {"TOPOSCHED_EXTENDER_CLIENT_NAME": "sched"}, {"extender_client_names": ("sched",)}, id="client-variable"
        ),
        pytest.param(
            ["--extender-client-name", "a", "--extender-client-name", "b"],
            {"TOPOSCHED_EXTENDER_CLIENT_NAME": "sched"},
            {"extender_client_names": ("a", "b")},
            id="client-flags",
        ),
        pytest.param(
            ["--route-label", "team=a", "--route-label", "x=y=z", "--route-namespace", "ns"],
            {},
            {"route_labels": (("team", "a"), ("x", "y=z")), "route_namespaces": ("ns",)},
            id="routes",
        ),
        pytest.param(
            ["--strategy", "LeastAllocated", "--no-remediation"],
            {"TOPOSCHED_NUMA_STRATEGY": "BalancedAllocation", "TOPOSCHED_MISSING_NRT": "fail"},
            {"strategy": "LeastAllocated", "no_remediation": True, "missing_nrt": "fail"},
            id="placement",
        ),
        pytest.param(
            [],
            {
                "TOPOSCHED_PORT": "1",
                "TOPOSCHED_ORDER_WAIT": "2",
                "TOPOSCHED_BIND_WAIT": "0",
                "TOPOSCHED_WEIGHTS_NAME": "W",
            },
            {"port": 1, "order_wait": 2, "bind_wait": 0, "weights_name": "W"},
            id="variables",
        ),
    ],
)
def test_flags_then_variables_then_defaults(
    command_settings: Callable[..., Settings], argv: list[str], environ: dict[str, str], expected: dict[str, object]
) -> None:
    found = command_settings("schedhook", argv, environ)
    assert {name: getattr(found, name) for name in expected} == expected
