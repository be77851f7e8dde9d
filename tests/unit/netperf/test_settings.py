"""ProberSettings: `toposched netperf`'s flags, else the pod's variables, else defaults."""

import pytest

from toposched.cli import build_parser, main
from toposched.netperf.settings import ProberSettings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NODE_NAME", "POD_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)


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
    monkeypatch: pytest.MonkeyPatch, argv: list[str], environ: dict[str, str], expected: dict[str, object]
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    found = ProberSettings.from_args(build_parser("netperf").parse_args(["netperf", *argv]))
    assert {name: getattr(found, name) for name in expected} == expected


def test_a_bad_flag_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["netperf", "--interval", "hourly"])
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "toposched netperf: error: argument --interval: invalid float value: 'hourly'"
    )


def test_without_a_node_it_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["netperf"]) == 1
    assert capsys.readouterr().err == "toposched netperf: --node or $NODE_NAME is required\n"
