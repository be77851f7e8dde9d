import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from testkit.builders import node_body
from testkit.paths import EXAMPLES, UPSTREAM_FIXTURES
from toposched.cli import COMMANDS, main


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command.name in out
        assert command.help in out


@pytest.mark.parametrize(
    ("args", "code", "stdout_first", "stderr_part"),
    [
        ([str(EXAMPLES / "appgroup-online-boutique.yaml")], 0, "frontend", ""),
        ([str(EXAMPLES / "appgroup-online-boutique.yaml"), "--algorithm", "TarjanSort"], 0, "frontend", ""),
        (
            [str(UPSTREAM_FIXTURES / "appgroup-online-boutique.yaml")],
            2,
            "frontend-deployment",
            "dependency cycle among",
        ),
        ([str(EXAMPLES / "networktopology.yaml")], 1, "", "expected exactly one AppGroup"),
        (["/nonexistent.yaml"], 1, "", "No such file"),
    ],
    ids=["valid", "algorithm-override", "cycle", "not-an-appgroup", "missing-file"],
)
def test_order_exit_codes(
    capsys: pytest.CaptureFixture[str], args: list[str], code: int, stdout_first: str, stderr_part: str
) -> None:
    assert main(["order", *args]) == code
    captured = capsys.readouterr()
    assert captured.out.split("\n")[0] == stdout_first
    assert stderr_part in captured.err


def test_order_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["order", str(EXAMPLES / "appgroup-online-boutique.yaml"), "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["algorithm"] == "AlternateKahn"
    assert document["order"][0] == {"index": 1, "name": "frontend", "selector": "frontend"}
    assert document["cycles"] == []


def test_order_invalid_spec(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text())
    data["spec"]["workloads"][0]["dependencies"][0]["workload"]["selector"] = "ghost"
    path = tmp_path / "ag.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["order", str(path)]) == 1
    assert "no workload has selector 'ghost'" in capsys.readouterr().err


def test_netcost_json_shape(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "cm.yaml").write_text(
        yaml.safe_dump(
            {
                "kind": "ConfigMap",
                "metadata": {"name": "m"},
                "data": {
                    "netperf.p90.latency.milliseconds.origin.n1.destination.n2": "4",
                    "netperf.p90.latency.milliseconds.origin.n1.destination.n9": "4",
                },
            }
        )
    )
    nodes = [node_body(n, region="r", zone=z) for n, z in [("n1", "a"), ("n2", "b"), ("n3", "c")]]
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump({"kind": "NodeList", "items": nodes}))
    args = ["netcost", "--networktopology", str(EXAMPLES / "networktopology.yaml")]
    args += ["--configmap", str(tmp_path / "cm.yaml"), "--nodes", str(tmp_path / "nodes.yaml"), "-o", "json"]
    assert main(args) == 0
    document = json.loads(capsys.readouterr().out)
    assert [w["name"] for w in document["weights"]] == ["NetperfCosts"]
    (zone,) = document["weights"][0]["topologyList"]
    assert zone["originList"][0] == {
        "origin": "a",
        "costList": [{"destination": "b", "networkCost": 4, "bandwidthAllocated": 0}],
    }
    assert {"topologyKey": "topology.kubernetes.io/zone", "origin": "a", "destination": "c"} in document["unknownPairs"]
    assert "unknown node n9" in document["ignoredKeys"]["netperf.p90.latency.milliseconds.origin.n1.destination.n9"]


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([], id="nothing"),
        pytest.param(["--tls-cert", "c.pem", "--tls-key", "k.pem"], id="serving-certificate-without-client-ca"),
        pytest.param(["--extender-client-ca", "ca.pem"], id="client-ca-without-serving-certificate"),
    ],
)
def test_schedhook_refuses_to_serve_the_extender_without_tls(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    assert main(["schedhook", *args]) == 2
    assert "the extender serves HTTPS to kube-scheduler only" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "variables"),
    [
        (
            "operator",
            ["TOPOSCHED_METRICS_PORT", "TOPOSCHED_METRICS_ADDRESS", "TOPOSCHED_LEASE_NAMESPACE", "POD_NAMESPACE"],
        ),
        (
            "exporter",
            ["NODE_NAME", "TOPOSCHED_NODE", "TOPOSCHED_SYSFS", "TOPOSCHED_PERIOD", "TOPOSCHED_HEALTH_ADDRESS"],
        ),
        ("netperf", ["NODE_NAME", "POD_NAMESPACE"]),
        ("schedhook", ["TOPOSCHED_ADDRESS", "TOPOSCHED_NUMA_STRATEGY", "TOPOSCHED_EXTENDER_CLIENT_NAME"]),
    ],
)
def test_help_names_the_variables(capsys: pytest.CaptureFixture[str], command: str, variables: list[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    for variable in variables:
        assert f"${variable}" in out


@pytest.mark.parametrize("command", ["operator", "schedhook"])
def test_unusable_credentials_are_one_line_and_exit_2(command: str, tmp_path: Path) -> None:
    # A real process: the operator would otherwise retry its login inside Kopf for ever.
    args = [sys.executable, "-m", "toposched", command]
    if command == "schedhook":
        args += ["--tls-cert", "c", "--tls-key", "k", "--extender-client-ca", "ca"]
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "absent"), "KUBERNETES_SERVICE_HOST": ""}
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"toposched {command}: cannot read the kubeconfig {tmp_path / 'absent'}: "
        f"[Errno 2] No such file or directory: '{tmp_path / 'absent'}'"
    ]
