"""The differential test: toposched's admission predictor against real kubelets (testkit.oracle).

200 seeded cases (machines of 1 to 8 NUMA zones, every Topology Manager policy and scope, the
policy options, the Static Memory Manager on and off, pod sequences that fill the node), each
pod judged first by the predictor on the NRT the exporter builds, then by the kubelet. Every
disagreement must be one docs/oracle.md documents. ``make oracle CASES=N SEED=S`` runs more.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.paths import REPO

pytestmark = pytest.mark.cluster

CASES = int(os.environ.get("TOPOSCHED_ORACLE_CASES", "200"))


@pytest.mark.timeout(1500)
def test_predictor_agrees_with_real_kubelets(real_nodes: None, tmp_path: Path) -> None:
    out = tmp_path / "oracle.json"
    run = subprocess.run(
        [sys.executable, "-m", "testkit.oracle", "--cases", str(CASES), "--seed", "1", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1400,
    )
    print(run.stdout[-20000:], run.stderr[-4000:])
    lines = run.stdout.strip().splitlines()
    assert lines, run.stderr
    assert lines[-1] == f"oracle: {CASES} cases, 0 undocumented disagreements", "\n".join(lines[-40:])
    assert run.returncode == 0, run.stderr
    assert out.is_file()
