"""The DRA oracle: toposched's prediction of kube-scheduler's device pick against the real
kube-scheduler (testkit.oracle_dra), on kwok nodes of the local control plane.

80 seeded cases (ResourceSlices in several pools and slices, device classes with and without
selectors, devices in use, several claims per pod from claims and templates, firstAvailable,
matchAttribute, selectors that fail or match nothing), each predicted by the extender's own path
and then scheduled by kube-scheduler. Every disagreement must be one docs/oracle.md documents.
``make oracle-dra CASES=N SEED=S`` runs more.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.paths import REPO

pytestmark = pytest.mark.cluster

CASES = int(os.environ.get("TOPOSCHED_ORACLE_DRA_CASES", "80"))


@pytest.mark.timeout(900)
def test_dra_pick_agrees_with_kube_scheduler(kubeconfig: Path, tmp_path: Path) -> None:
    out = tmp_path / "oracle-dra.json"
    command = [sys.executable, "-m", "testkit.oracle_dra", "--cases", str(CASES), "--seed", "1", "--out", str(out)]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=840)
    print(run.stdout[-20000:], run.stderr[-4000:])
    lines = run.stdout.strip().splitlines()
    assert lines, run.stderr
    assert re.fullmatch(r"oracle-dra: \d+ cases, \d+ undocumented disagreements", lines[-1]), lines[-1]
    assert lines[-1] == f"oracle-dra: {CASES} cases, 0 undocumented disagreements", "\n".join(lines[-40:])
    assert run.returncode == 0, run.stderr
    assert "'bound'" in lines[-2], lines[-2]  # the scheduler placed some case pods: picks were compared
    assert out.is_file()
