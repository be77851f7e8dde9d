"""SchedhookSettings: `toposched schedhook`'s flags, else TOPOSCHED_* variables, else defaults."""

import os

import pytest

from toposched.cli import build_parser, main
from toposched.schedhook.settings import DEFAULT_CLIENT, SchedhookSettings

IN_A_POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}
TLS = ["--tls-cert", "c.pem", "--tls-key", "k.pem", "--extender-client-ca", "ca.pem"]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ["KUBERNETES_SERVICE_HOST", *(n for n in os.environ if n.startswith("TOPOSCHED_"))]:
        monkeypatch.delenv(name, raising=False)


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
                "bind_wait": 0.25,
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
    monkeypatch: pytest.MonkeyPatch, argv: list[str], environ: dict[str, str], expected: dict[str, object]
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    found = SchedhookSettings.from_args(build_parser("schedhook").parse_args(["schedhook", *argv]))
    assert {name: getattr(found, name) for name in expected} == expected


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TOPOSCHED_PORT", "https", "$TOPOSCHED_PORT: invalid int value: 'https'"),
        ("TOPOSCHED_BIND_WAIT", "short", "$TOPOSCHED_BIND_WAIT: invalid float value: 'short'"),
        (
            "TOPOSCHED_MISSING_NRT",
            "skip",
            "$TOPOSCHED_MISSING_NRT: invalid choice: 'skip' (choose from 'pass', 'fail')",
        ),
    ],
)
def test_a_bad_variable_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    assert main(["schedhook", *TLS]) == 2
    assert capsys.readouterr().err == f"toposched schedhook: {message}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--route-label", "team"], "argument --route-label: invalid label value: 'team'"),
        (["--missing-nrt", "skip"], "argument --missing-nrt: invalid choice: 'skip' (choose from 'pass', 'fail')"),
    ],
)
def test_a_bad_flag_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["schedhook", *argv])
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"toposched schedhook: error: {message}"


def test_help_names_the_variables(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["schedhook", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for variable in ("TOPOSCHED_ADDRESS", "TOPOSCHED_NUMA_STRATEGY", "TOPOSCHED_EXTENDER_CLIENT_NAME"):
        assert f"${variable}" in out
