"""ExporterSettings: `toposched exporter`'s flags, else its variables, else defaults."""

from collections.abc import Callable
from pathlib import Path

import pytest

from toposched.settings import Settings


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        pytest.param(
            [],
            {},
            {
                "node": "",
                "sysfs": Path("/sys"),
                "podresources": Path("/var/lib/kubelet/pod-resources/kubelet.sock"),
                "kubelet_state_dir": Path("/var/lib/kubelet"),
                "period": 10,
                "list_interval": 0.2,
                "fingerprint_method": "with-exclusive-resources",
                "advertise_bandwidth": False,
                "metrics_port": 9091,
                "metrics_address": "127.0.0.1",
                "health_port": 8081,
                "health_address": "127.0.0.1",
            },
            id="defaults",
        ),
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
            [],
            {"KUBERNETES_SERVICE_HOST": "10.96.0.1"},
            {"metrics_address": "127.0.0.1", "health_address": "127.0.0.1"},
            id="loopback-in-a-pod-too",
        ),
        pytest.param(
            [],
            {"TOPOSCHED_METRICS_ADDRESS": "10.0.0.5", "TOPOSCHED_HEALTH_ADDRESS": "10.0.0.5"},
            {"metrics_address": "10.0.0.5", "health_address": "10.0.0.5"},
            id="addresses-from-variables",
        ),
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
    command_settings: Callable[..., Settings], argv: list[str], environ: dict[str, str], expected: dict[str, object]
) -> None:
    found = command_settings("exporter", argv, environ)
    assert {name: getattr(found, name) for name in expected} == expected


def test_a_kubelet_config_that_does_not_exist_means_the_kubelet_s_defaults(
    command_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    absent, present = tmp_path / "absent.yaml", tmp_path / "config.yaml"
    present.write_text("kind: KubeletConfiguration\n")
    assert command_settings("exporter", ["--kubelet-config", str(absent)], {}) == command_settings(
        "exporter", [], {"TOPOSCHED_KUBELET_CONFIG": str(absent)}
    )
    assert command_settings("exporter", ["--kubelet-config", str(absent)], {}).kubelet_config is None
    assert command_settings("exporter", ["--kubelet-config", str(present)], {}).kubelet_config == present
