"""ProberSettings: `toposched netperf`'s flags, else the pod's variables, else defaults."""

from collections.abc import Callable

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
                "namespace": "default",
                "configmap": "netperf-metrics",
                "selector": "",
                "all_pairs": False,
                "duration": 2,
                "interval": 300,
                "once": False,
                "control_port": 12865,
                "data_port": 12866,
            },
            id="defaults",
        ),
        pytest.param([], {"NODE_NAME": "n1", "POD_NAMESPACE": "ns"}, {"node": "n1", "namespace": "ns"}, id="pod"),
        pytest.param(
            ["--node", "n2", "--namespace", "other"],
            {"NODE_NAME": "n1", "POD_NAMESPACE": "ns"},
            {"node": "n2", "namespace": "other"},
            id="flags-beat-variables",
        ),
        pytest.param(
            ["--all-pairs", "--once", "--duration", "0.5", "--data-port", "20000", "--selector", "a=b"],
            {},
            {"all_pairs": True, "once": True, "duration": 0.5, "data_port": 20000, "selector": "a=b"},
            id="flags",
        ),
    ],
)
def test_flags_then_variables_then_defaults(
    command_settings: Callable[..., Settings], argv: list[str], environ: dict[str, str], expected: dict[str, object]
) -> None:
    found = command_settings("netperf", argv, environ)
    assert {name: getattr(found, name) for name in expected} == expected
