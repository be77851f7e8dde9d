"""ExporterSettings: `toposched exporter`'s flags, else its variables, else defaults."""

import os
from pathlib import Path

import pytest

from toposched.cli import build_parser, main
from toposched.exporter.settings import ExporterSettings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ["NODE_NAME", *(n for n in os.environ if n.startswith("TOPOSCHED_"))]:
        monkeypatch.delenv(name, raising=False)


def settings(argv: list[str]) -> ExporterSettings:
    return ExporterSettings.from_args(build_parser("exporter").parse_args(["exporter", *argv]))


def test_defaults() -> None:
    found = settings([])
    assert found.node == ""
    assert (found.sysfs, found.podresources, found.kubelet_state_dir) == (
        Path("/sys"),
        Path("/var/lib/kubelet/pod-resources/kubelet.sock"),
        Path("/var/lib/kubelet"),
    )
    assert (found.period, found.list_interval, found.fingerprint_method, found.advertise_bandwidth) == (
        10,
        0.2,
        "with-exclusive-resources",
        False,
    )
    assert (found.metrics_port, found.metrics_address, found.health_port, found.health_address) == (
        9091,
        "127.0.0.1",
        8081,
        "127.0.0.1",
    )


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        pytest.param([], {"NODE_NAME": "n1"}, {"node": "n1"}, id="node-from-pod"),
        pytest.param([], {"TOPOSCHED_NODE": "n2"}, {"node": "n2"}, id="node-variable"),
        pytest.param([], {"NODE_NAME": "n1", "TOPOSCHED_NODE": "n2"}, {"node": "n1"}, id="node-name-first"),
        pytest.param(["--node", "n3"], {"NODE_NAME": "n1"}, {"node": "n3"}, id="node-flag"),
        pytest.param(
            [],
            {"TOPOSCHED_SYSFS": "/host/sys", "TOPOSCHED_PERIOD": "5", "TOPOSCHED_FINGERPRINT_METHOD": "all"},
            {"sysfs": Path("/host/sys"), "period": 5, "fingerprint_method": "all"},
            id="variables",
        ),
        pytest.param(
            ["--sysfs", "/flag", "--period", "3"],
            {"TOPOSCHED_SYSFS": "/host/sys", "TOPOSCHED_PERIOD": "5"},
            {"sysfs": Path("/flag"), "period": 3},
            id="flags-beat-variables",
        ),
        pytest.param(
            [], {"TOPOSCHED_ADVERTISE_BANDWIDTH": "true"}, {"advertise_bandwidth": True}, id="switch-variable"
        ),
        pytest.param(["--advertise-bandwidth"], {}, {"advertise_bandwidth": True}, id="switch-flag"),
        pytest.param(["--list-interval", "0.01"], {}, {"list_interval": 0.1}, id="list-interval-at-least-0.1"),
        pytest.param(
            ["--metrics-address", "10.0.0.5"],
            {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "TOPOSCHED_HEALTH_ADDRESS": "10.0.0.6"},
            {"metrics_address": "10.0.0.5", "health_address": "10.0.0.6"},
            id="addresses",
        ),
        pytest.param(
            ["--metrics-port", "0"],
            {"TOPOSCHED_HEALTH_PORT": "9999"},
            {"metrics_port": 0, "health_port": 9999},
            id="ports",
        ),
    ],
)
def test_flags_then_variables_then_defaults(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], environ: dict[str, str], expected: dict[str, object]
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    found = settings(argv)
    assert {name: getattr(found, name) for name in expected} == expected


def test_a_kubelet_config_that_does_not_exist_means_the_kubelet_s_defaults(tmp_path: Path) -> None:
    assert settings(["--kubelet-config", str(tmp_path / "absent.yaml")]).kubelet_config is None
    (tmp_path / "config.yaml").write_text("kind: KubeletConfiguration\n")
    assert settings(["--kubelet-config", str(tmp_path / "config.yaml")]).kubelet_config == tmp_path / "config.yaml"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TOPOSCHED_PERIOD", "often", "$TOPOSCHED_PERIOD: invalid float value: 'often'"),
        ("TOPOSCHED_METRICS_PORT", "x", "$TOPOSCHED_METRICS_PORT: invalid int value: 'x'"),
        (
            "TOPOSCHED_FINGERPRINT_METHOD",
            "some",
            "$TOPOSCHED_FINGERPRINT_METHOD: invalid choice: 'some' (choose from 'all', 'with-exclusive-resources')",
        ),
    ],
)
def test_a_bad_variable_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    assert main(["exporter", "--node", "n"]) == 2
    assert capsys.readouterr().err == f"toposched exporter: {message}\n"


def test_a_bad_flag_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["exporter", "--period", "often"])
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "toposched exporter: error: argument --period: invalid float value: 'often'"
    )


def test_without_a_node_it_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["exporter"]) == 1
    assert capsys.readouterr().err == "toposched exporter: --node or $NODE_NAME is required\n"


def test_help_names_the_variables(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["exporter", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for variable in ("NODE_NAME", "TOPOSCHED_SYSFS", "TOPOSCHED_PERIOD", "TOPOSCHED_HEALTH_ADDRESS"):
        assert f"${variable}" in out
