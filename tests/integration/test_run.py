"""`make run`'s script (hack/run.sh) on the local control plane: what a person sees first."""

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.paths import EXAMPLES, REPO

pytestmark = pytest.mark.cluster
DEMO_NODES = ["numa-1", "numa-2", "numa-3", "numa-4", "numa-5"]


@pytest.fixture
def demo(kubectl: list[str]) -> Iterator[None]:
    yield
    # What run.sh leaves for the person to look at goes, so the next tests see their own nodes only.
    for args in (
        ["delete", "namespace", "toposched-demo", "toposched-demo-alone", "--wait=false"],
        ["delete", "-f", str(EXAMPLES / "nodes.yaml")],
        ["delete", "-f", str(EXAMPLES / "noderesourcetopology-worker-1.yaml")],
    ):
        subprocess.run([*kubectl, *args, "--ignore-not-found"], check=False, capture_output=True)
    remove = [sys.executable, "-m", "testkit.realnode", "remove", *DEMO_NODES]
    subprocess.run(remove, cwd=REPO, check=False, capture_output=True)
    subprocess.run([*kubectl, "delete", "nrt", *DEMO_NODES, "--ignore-not-found"], check=False, capture_output=True)


@pytest.mark.usefixtures("demo", "real_nodes")
@pytest.mark.parametrize("delete_nrt", ["", "all"], ids=["as-is", "nrts-deleted"])
def test_run_shows_the_order_the_costs_and_why(kubeconfig: Path, delete_nrt: str) -> None:
    """``make run`` as a person runs it; and with every real node's NRT deleted just before
    toposched places its pods (as a recreated Node or NRT does), when its pods must wait for the
    exporters to publish them again, saying why, and still meet no TopologyAffinityError."""
    done = subprocess.run(
        ["bash", str(REPO / "hack" / "run.sh")],
        cwd=REPO,
        env={**os.environ, "TOPOSCHED_DEMO_DELETE_NRT": delete_nrt},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "1\tfrontend" in out
    assert re.search(r"\bTrue\s+OrderComputed\s", out)
    assert re.search(r"\bTrue\s+CostsPublished\s+NetperfCosts: 2 region pairs, 4 zone pairs", out)
    assert "us-east-1 -> us-west-1=62" in out
    assert "z1 -> z2=2" in out
    # Online Boutique, placed side by side on the real nodes and judged by their kubelets.
    assert "side by side: each pod's node, region/zone and NUMA zones" in out
    assert re.search(r"^frontend\s+3\s+numa-\d\s+us-(west|east)-1/z\d\s+[01]\s+(running|admitted)", out, re.M)
    assert re.search(r"^summed network cost\s+\d+( \(\+\d+ unplaced\))?\s+\d+", out, re.M)
    assert re.search(r"^  numa-1: NRT written \d+ s ago, its fingerprint accounts for all \d+ pod", out, re.M) or (
        delete_nrt and "  numa-1: no NRT; exporter ready" in out
    ), out[-3000:]
    figures = json.loads((REPO / ".cluster" / "demo.json").read_text())
    assert figures["toposched"]["topologyAffinityErrors"] == 0, _rejections(figures["toposched"], out)
    if delete_nrt:  # pods placed while some NRTs were back and others not may pack less tightly
        verdicts = [p["kubelet"] for p in figures["toposched"]["pods"].values()]
        assert len(verdicts) == 11
        assert set(verdicts) <= {"running", "admitted", "unschedulable"}, verdicts
    else:
        assert figures["toposched"]["admitted"] == len(figures["toposched"]["pods"]) == 11
    assert figures["plain"]["admitted"] + figures["plain"]["topologyAffinityErrors"] <= 11
    # The GPU workload, placed first on the same nodes: each admitted pod's GPU is on its CPUs' zone.
    assert re.search(r"^gpu-training\s+2\s+numa-[13]\s+[01]\s+gpu-\d@[01]\s+(running|admitted)", out, re.M)
    gpus = figures["toposched"]["gpu"]
    assert gpus["topologyAffinityErrors"] == 0, _rejections(gpus, out)
    assert gpus["admitted"] == len(gpus["pods"]) == 2
    for scheduler in ("toposched", "plain"):
        for name, pod in figures[scheduler]["gpu"]["pods"].items():
            if pod["kubelet"] in ("running", "admitted"):
                assert [d["numa"] for d in pod["devices"]] == [pod["numa"]], (scheduler, name, pod)
    # The DRA GPU pods: first fit's gpu-0 lies on NUMA 0 while the 4-CPU pod's CPUs fit only NUMA 1.
    # kube-scheduler alone misaligns; toposched places both beside their CPUs (read from the kubelet).
    assert re.search(r"^dra-training\s+4\s+numa-5\s+1\s+gpu-1@1\s+yes\s+(running|admitted)", out, re.M), out[-3000:]
    assert re.search(r"^DRA GPU pods misaligned \(GPU off the CPUs\)\s+0\s+[12]$", out, re.M), out[-3000:]
    dra = {scheduler: figures[scheduler]["dra"] for scheduler in ("toposched", "plain")}
    assert (dra["toposched"]["misaligned"], dra["toposched"]["admitted"]) == (0, 2), dra
    assert dra["plain"]["misaligned"] >= 1, dra
    for name, pod in dra["toposched"]["pods"].items():
        assert [d["numa"] for d in pod["devices"]] == [pod["numa"]], (name, pod)
    if delete_nrt:
        deleted = figures["toposched"]
        assert all(s is not None for s in deleted["deletedNRTs"].values()), deleted["deletedNRTs"]
        assert deleted["boundBlind"] == [], out[-3000:]
        assert all(re.search(r"NRT of numa-\d missing since", m) for m in deleted["waitedForNRT"].values()), deleted
    assert "The operators, the exporters and both schedulers have stopped" in out
    assert "toposched explain --pod pod.yaml" in out


def _rejections(figures: dict[str, Any], out: str) -> str:
    """The pods the kubelets turned down, and what the extender logged about them."""
    rejected = {w: p for w, p in figures["pods"].items() if p["kubelet"] not in ("running", "admitted")}
    lines = [f"{w}: {p}" for w, p in rejected.items()]
    found = re.search(r"logs in (\S+)", out)
    log = Path(found.group(1)) / "extender-toposched.log" if found else None
    if log is not None and log.is_file():
        lines += ["extender log (tail):", *log.read_text(errors="replace").splitlines()[-60:]]
    return "\n".join([*lines, out[-3000:]])
