"""``toposched capacity`` offline: the table, the JSON, the plot, and bad input as one line with exit 2."""

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.builders import node_body, nrt_body, pod_body
from testkit.paths import REPO
from toposched.cli import main

GPU = "example.com/gpu"
ZONES = [{"cpu": 8, "memory": "16Gi", GPU: 1}, {"cpu": 8, "memory": "16Gi", GPU: 1}]


def write(path: Path, objects: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(objects))
    return path


@pytest.fixture
def cluster(tmp_path: Path) -> list[str]:
    nrts = [nrt_body(n, ZONES, memory_manager="Static") for n in ("a", "b")]
    allocatable = {"cpu": "16", "memory": "32Gi", GPU: "2", "pods": "110"}
    nodes = [node_body(n, zone="z1", allocatable=allocatable) for n in ("a", "b")]
    bound = pod_body("busy", namespace="default", cpu=8, memory="1Gi", node_name="b")
    return [
        "--nrt", str(write(tmp_path / "nrts.yaml", nrts)),
        "--nodes", str(write(tmp_path / "nodes.yaml", nodes)),
        "--pods", str(write(tmp_path / "pods.yaml", [bound])),
    ]  # fmt: skip


def test_json_counts_per_node_zone_and_zone_label(cluster: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", *cluster, "--shape", "gpu=cpu:4,memory:4Gi,example.com/gpu:1", "-o", "json"]) == 0
    [shape] = json.loads(capsys.readouterr().out)["shapes"]
    assert (shape["fits"], shape["byZoneLabel"]) == (4, {"z1": 4})
    by_node = {n["node"]: n for n in shape["nodes"]}
    assert by_node["a"]["numaZones"] == {"node-0": 1, "node-1": 1}
    assert (by_node["b"]["fits"], by_node["b"]["reason"]) == (2, "Insufficient cpu")  # its pod's 8 CPUs


def test_table_and_plot(cluster: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "capacity.png"
    assert main(["capacity", *cluster, "--shape", "small=cpu:2,memory:2Gi", "--plot", str(png)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["SHAPE  FITS  NODES  UNKNOWN  NONE", "small  12    2      0        0"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--shape", "g=cpu:0"], "shape g: cpu must be positive, not 0", id="zero-request"),
        pytest.param(["--shape", "g=cpu:-1"], "shape g: requests.cpu: cpu -1 is negative", id="negative-request"),
        pytest.param(["--shape", "g=cpu:1,example.com/fpga:1"], "shape g: no node has example.com/fpga", id="unknown"),
        pytest.param(["--shape", "g=cpu:9,memory:1Gi"], "shape g: no node could take it, even empty", id="too-big"),
        pytest.param([], "no shape to count", id="no-shape"),
        pytest.param(["--shape", "g=cpu:1", "--shape", "g=cpu:2"], "shape g is given twice", id="twice"),
        pytest.param(["--pod", "/nonexistent/pod.yaml"], "/nonexistent/pod.yaml: No such file", id="missing-file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, cluster: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["capacity", *cluster, *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"toposched capacity: {message}")
    assert captured.err.count("\n") == 1


def test_pod_manifest_shape(cluster: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = write(tmp_path / "pod.yaml", [pod_body("trainer", cpu=8, memory="8Gi", devices={GPU: 1})])
    assert main(["capacity", *cluster, "--pod", str(pod), "-o", "json"]) == 0
    [shape] = json.loads(capsys.readouterr().out)["shapes"]
    assert (shape["name"], shape["fits"], shape["noneByReason"]) == ("trainer", 3, {})


def test_the_kubectl_plugin_is_the_same_command() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-toposched"] == scripts["toposched"]


def test_metrics_are_per_shape_and_zone_label_and_count_stranded_cpus(tmp_path: Path) -> None:
    from prometheus_client import REGISTRY

    from toposched.schedhook import capacitymetrics
    from toposched.schedhook.capacityreport import Objects, count
    from toposched.schedhook.placement.shapes import inline_shape

    zones = [{"cpu": 8, "memory": "16Gi", GPU: 1}, {"cpu": 3, "memory": "16Gi", GPU: 0}]
    objects = Objects(
        [node_body("a", zone="z1", allocatable={"cpu": "11", "memory": "32Gi", GPU: "1", "pods": "10"})],
        [nrt_body("a", zones, memory_manager="Static")],
        [],
        {},
    )
    result = count(objects, [inline_shape("gpu=cpu:4,memory:4Gi,example.com/gpu:1")], 30.0, 0.0)
    capacitymetrics.publish(result, 0.5, 1.0)
    assert REGISTRY.get_sample_value("toposched_capacity_pods", {"shape": "gpu", "zone": "z1"}) == 1
    assert REGISTRY.get_sample_value("toposched_capacity_pods_total", {"shape": "gpu"}) == 1
    assert REGISTRY.get_sample_value("toposched_capacity_unknown_nodes", {"shape": "gpu"}) == 0
    assert REGISTRY.get_sample_value("toposched_capacity_stranded_cpus") == 3  # zone 1: no GPU there
