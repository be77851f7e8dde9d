"""Issue item 9 through the commands: bad input is one clear line naming the file and field and a
non-zero exit (or a warning line and the item skipped), never a traceback, never a hang."""

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.builders import pod_body
from testkit.paths import EXAMPLES
from testkit.sysfs import two_socket, write
from toposched.cli import main

POD = pod_body("p", cpu=4, memory="8Gi")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    started = time.monotonic()
    code = main(list(argv))
    assert time.monotonic() - started < 10
    captured = capsys.readouterr()
    for line in captured.err.splitlines():
        assert line.startswith(f"toposched {argv[0]}: "), line
        assert "errors.pydantic.dev" not in line
    return code, captured.out, captured.err


def _spec(spec: Any) -> Callable[[dict[str, Any]], None]:
    def spoil(pod: dict[str, Any]) -> None:
        pod["spec"] = spec

    return spoil


def _cpu(value: Any) -> Callable[[dict[str, Any]], None]:
    def spoil(pod: dict[str, Any]) -> None:
        pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = value

    return spoil


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (_cpu("abc"), "spec.containers[0].resources.limits.cpu: 'abc' is not a Kubernetes quantity"),
        (_cpu(float("nan")), "spec.containers[0].resources.limits.cpu: nan is not a Kubernetes quantity"),
        (_cpu("1e999999"), "spec.containers[0].resources.limits.cpu: '1e999999' is more than any machine has"),
        (_spec({"containers": 5}), "spec.containers: expected a list of containers"),
    ],
    ids=["cpu-abc", "cpu-nan", "cpu-1e999999", "containers-5"],
)
def test_explain_bad_pod(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spoil: Callable[[dict[str, Any]], None], message: str
) -> None:
    pod = json.loads(json.dumps(POD))
    spoil(pod)
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod))
    code, out, err = run(
        capsys,
        "explain",
        "--pod",
        str(tmp_path / "pod.yaml"),
        "--nrt",
        str(EXAMPLES / "noderesourcetopology-worker-1.yaml"),
    )
    assert (code, out) == (1, "")
    assert err == f"toposched explain: {tmp_path / 'pod.yaml'}: {message}" + err.split(message, 1)[1]
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.mkdir(), "is a directory, not a file"),
        (lambda p: p.write_bytes(b"\xff\x00\xfe"), "not UTF-8 text"),
        (lambda p: os.mkfifo(p), "not a regular file"),
        (lambda p: p.write_text("[" * 100_000), "nested more than 64 levels deep"),
    ],
    ids=["directory", "binary", "fifo", "deep"],
)
def test_explain_file_that_is_not_yaml_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, make: Callable[[Path], None], message: str
) -> None:
    path = tmp_path / "pod.yaml"
    make(path)
    code, _, err = run(
        capsys, "explain", "--pod", str(path), "--nrt", str(EXAMPLES / "noderesourcetopology-worker-1.yaml")
    )
    assert code == 1
    assert err == f"toposched explain: {path}: {message}" + err.split(message, 1)[1]


def test_explain_shows_a_bad_nrt_as_a_node_that_fails_with_the_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    nrt = yaml.safe_load((EXAMPLES / "noderesourcetopology-worker-1.yaml").read_text())
    bad = json.loads(json.dumps(nrt))
    bad["metadata"]["name"] = "worker-2"
    bad["zones"][0]["resources"][0]["available"] = "1e999999"
    (tmp_path / "nrts.yaml").write_text(yaml.safe_dump_all([nrt, bad, {"kind": "NodeResourceTopology", "zones": 5}]))
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(POD))
    code, out, err = run(
        capsys, "explain", "--pod", str(tmp_path / "pod.yaml"), "--nrt", str(tmp_path / "nrts.yaml"), "-o", "json"
    )
    assert code == 0
    results = {r["node"]: r for r in json.loads(out)}
    assert results["worker-1"]["fit"]
    assert results["worker-2"]["reason"].startswith("invalid NodeResourceTopology worker-2: zones[0].resources[0]")
    skipped = "skipped NodeResourceTopology #3: zones: Input should be a valid list"
    assert err == f"toposched explain: warning: {tmp_path / 'nrts.yaml'}: {skipped}\n"


def netcost(tmp_path: Path, configmap: dict[str, Any], topology: dict[str, Any] | None = None) -> list[str]:
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(configmap))
    (tmp_path / "nt.yaml").write_text(
        yaml.safe_dump(topology or yaml.safe_load((EXAMPLES / "networktopology.yaml").read_text()))
    )
    node = {
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {}},
        "status": {"capacity": {"network.aware.com/bandwidth": "1e999999"}},
    }
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump(node))
    return [
        "netcost",
        "--networktopology",
        str(tmp_path / "nt.yaml"),
        "--configmap",
        str(tmp_path / "cm.yaml"),
        "--nodes",
        str(tmp_path / "nodes.yaml"),
    ]


def test_netcost_configmap_whose_data_is_a_list(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, *netcost(tmp_path, {"kind": "ConfigMap", "data": ["a", "b"]}))
    assert code == 1
    assert err == f"toposched netcost: {tmp_path / 'cm.yaml'}: data: expected a map of keys to strings\n"


def test_netcost_networktopology_problems_one_line_each(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    topology = yaml.safe_load((EXAMPLES / "networktopology.yaml").read_text())
    topology["spec"]["weights"][0]["topologyList"][0]["originList"][0]["costList"][0]["bandwidthCapacity"] = "-1"
    topology["spec"]["weights"][0]["topologyList"][1]["originList"][0]["costList"][0]["networkCost"] = "x"
    code, _, err = run(capsys, *netcost(tmp_path, {"kind": "ConfigMap", "data": {}}, topology))
    assert code == 1
    where = f"toposched netcost: {tmp_path / 'nt.yaml'}: spec.weights[0].topologyList"
    assert err.splitlines() == [
        f"{where}[0].originList[0].costList[0].bandwidthCapacity: '-1' is negative",
        f"{where}[1].originList[0].costList[0].networkCost: Input should be a valid integer, "
        "unable to parse string as an integer",
    ]


def test_netcost_a_node_bandwidth_no_nic_has_is_a_warning(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, *netcost(tmp_path, {"kind": "ConfigMap", "data": {}}))
    assert code == 0
    assert err == (
        f"toposched netcost: warning: {tmp_path / 'nodes.yaml'}: node n1: ignoring network.aware.com/bandwidth "
        "('1e999999' is more than any machine has (at most 8Pi))\n"
    )


def test_order_problems_one_line_each(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    appgroup = yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text())
    appgroup["spec"]["workloads"][0]["workload"]["selector"] = "app in (x)"
    appgroup["spec"]["workloads"][0]["dependencies"][0]["minBandwidth"] = "1e999999999"
    (tmp_path / "ag.yaml").write_text(yaml.safe_dump(appgroup))
    code, _, err = run(capsys, "order", str(tmp_path / "ag.yaml"))
    assert code == 1
    where = f"toposched order: {tmp_path / 'ag.yaml'}: spec.workloads[0]"
    assert err.splitlines() == [
        f"{where}.workload.selector: String should match pattern '^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$'",
        f"{where}.dependencies[0].minBandwidth: '1e999999999' is more than any machine has (at most 8Pi)",
    ]


def nrt_command(sys: Path, *extra: str) -> list[str]:
    return ["nrt", "--sysfs", str(sys), "--node", "n", "-o", "json", *extra]


@pytest.mark.parametrize(
    ("relative", "make", "message"),
    [
        ("devices/system/node/node0/cpulist", lambda p: p.write_text("0-99999999\n"), "names id 99999999"),
        ("devices/system/node/node0/cpulist", lambda p: (p.unlink(), os.mkfifo(p)), "not a regular file"),
        ("devices/system/node/node0/meminfo", lambda p: p.write_bytes(b"\x00\x01\xff"), "not UTF-8 text"),
        ("devices/system/node/node0/meminfo", lambda p: (p.unlink(), p.mkdir()), "is a directory, not a file"),
    ],
    ids=["cpulist-0-99999999", "fifo", "binary", "directory"],
)
def test_nrt_garbled_sysfs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, relative: str, make: Callable[[Path], object], message: str
) -> None:
    sys = two_socket(tmp_path)
    make(sys / relative)
    code, out, err = run(capsys, *nrt_command(sys))
    assert (code, out) == (1, "")
    assert err.startswith(f"toposched nrt: {sys / relative}: ")
    assert message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("relative", "content", "warning"),
    [
        ("class/net/ens1f0/speed", "\u00b2", "class/net/ens1f0/speed: '²' is not a link speed in Mb/s"),
        ("bus/pci/devices/0000:06:00.0/numa_node", "--5", "numa_node: '--5' is not a NUMA node"),
        ("devices/system/node/node0/distance", "10 -21", "node0/distance: '-21' is not a distance to node 1"),
        ("devices/system/node/node0/hugepages/hugepages-0kB/nr_hugepages", "5", "hugepages-0kB: not a huge page size"),
    ],
    ids=["nic-speed-superscript", "pci-numa-double-minus", "negative-distance", "hugepages-0kB"],
)
def test_nrt_refinements_that_are_garbage_are_warnings_and_never_published(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, relative: str, content: str, warning: str
) -> None:
    sys = two_socket(tmp_path)
    write(sys / relative, content + "\n")
    code, out, err = run(capsys, *nrt_command(sys))
    assert code == 0
    assert warning in err
    nrt = json.loads(out)
    for zone in nrt["zones"]:
        assert all(10 <= cost["value"] <= 255 for cost in zone.get("costs") or [])
        assert all(not r["name"].startswith("hugepages-0") for r in zone["resources"])


TLS = ["--tls-cert", "c.pem", "--tls-key", "k.pem", "--extender-client-ca", "ca.pem"]


@pytest.mark.parametrize(
    ("argv", "variable", "value", "message"),
    [
        (["operator"], "TOPOSCHED_METRICS_PORT", "x", "invalid int value: 'x'"),
        (["operator"], "TOPOSCHED_LEADER_ELECTION", "perhaps", "invalid boolean value: 'perhaps'"),
        (["operator"], "TOPOSCHED_COALESCE_SECONDS", "soon", "invalid float value: 'soon'"),
        (["exporter", "--node", "n"], "TOPOSCHED_PERIOD", "often", "invalid float value: 'often'"),
        (
            ["exporter", "--node", "n"],
            "TOPOSCHED_FINGERPRINT_METHOD",
            "some",
            "invalid choice: 'some' (choose from 'all', 'with-exclusive-resources')",
        ),
        (["schedhook", *TLS], "TOPOSCHED_PORT", "https", "invalid int value: 'https'"),
        (["schedhook", *TLS], "TOPOSCHED_MISSING_NRT", "skip", "invalid choice: 'skip' (choose from 'pass', 'fail')"),
    ],
    ids=[
        "operator-port",
        "operator-boolean",
        "operator-seconds",
        "exporter-period",
        "exporter-choice",
        "schedhook-port",
        "schedhook-choice",
    ],
)
def test_a_variable_that_cannot_be_read_is_one_line_naming_it_and_exit_2(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    variable: str,
    value: str,
    message: str,
) -> None:
    monkeypatch.setenv(variable, value)
    code, out, err = run(capsys, *argv)
    assert (code, out, err) == (2, "", f"toposched {argv[0]}: ${variable}: {message}\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["exporter", "--period", "often"], "argument --period: invalid float value: 'often'"),
        (["netperf", "--interval", "hourly"], "argument --interval: invalid float value: 'hourly'"),
        (["schedhook", "--route-label", "team"], "argument --route-label: invalid label value: 'team'"),
        (
            ["schedhook", "--missing-nrt", "skip"],
            "argument --missing-nrt: invalid choice: 'skip' (choose from 'pass', 'fail')",
        ),
        (["operator", "--namespace"], "argument -n/--namespace: expected one argument"),
    ],
    ids=["exporter-period", "netperf-interval", "schedhook-label", "schedhook-choice", "operator-namespace"],
)
def test_a_bad_flag_is_argparse_s_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"toposched {argv[0]}: error: {message}"


@pytest.mark.parametrize("command", ["exporter", "netperf"])
def test_a_node_daemon_without_a_node_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    for variable in ("NODE_NAME", "TOPOSCHED_NODE"):
        monkeypatch.delenv(variable, raising=False)
    assert run(capsys, command) == (1, "", f"toposched {command}: --node or $NODE_NAME is required\n")
