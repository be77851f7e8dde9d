"""``hack/chaos.sh`` bounded to about two minutes: every kind of fault once, on a control plane of
the run's own (the shared one is never restarted), under a steady stream of pods.

The run's own goals hold here too: no TopologyAffinityError from the real kubelets, no pod passed
on a node the extender could not see into, no traceback in any component's log. Seed 11 with these
gaps has the faults of `hack/chaos.sh --minutes 20 --seed 11` (tests/unit/testkit/
test_chaos_schedule.py), which once lost a pod to the kubelet restart on chaos-r0. The run's
exporters publish every 2 s, which bounds how long an NRT deleted with its Node takes to come back.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.chaos.schedule import KINDS, KUBELET_RESTART
from testkit.paths import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]


@pytest.mark.usefixtures("real_nodes")
def test_a_short_fault_run_meets_the_goals(tmp_path: Path) -> None:
    figures_file = tmp_path / "chaos.json"
    command = [sys.executable, "-m", "testkit.chaos", "--minutes", "2", "--seed", "11", "--gap", "2,4"]
    command += ["--exporter-period", "2", "--json", str(figures_file)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=840, check=False)
    print(done.stdout[-6000:])
    assert figures_file.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    figures = json.loads(figures_file.read_text())
    assert set(figures["faultKinds"]) == set(KINDS), figures["faults"]
    assert {"kind": KUBELET_RESTART, "target": "chaos-r0"}.items() <= figures["faults"][3].items()
    assert figures["stream"]["placed"] > 20, figures["stream"]
    assert figures["stream"]["topologyAffinityErrors"] == 0, figures["stream"]
    assert figures["stream"]["blindPasses"] == [], figures["stream"]
    assert sum(figures["tracebacks"].values()) == 0, figures["tracebacks"]
    for fault in figures["faults"]:
        assert "not recovered" not in fault["parts"], fault
    assert "watch from before expired (410 Gone)" in json.dumps(figures["faults"])
