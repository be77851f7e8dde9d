"""Configurations the kubelet refuses, judged by real kubelets 1.36: each pair of CPU Manager
options in toposched's table (``placement.parse.CPU_OPTION_CONFLICTS``), align-by-socket beside
single-numa-node, and more NUMA nodes than ``max-allowable-numa-nodes`` make a real kubelet exit at
start with its reason, so such a node runs no pod. (An NRT that says a node is so configured is
unreadable for the extender, never a fit: tests/unit/schedhook/placement/test_parse.py.)

``testkit.realnode`` refuses these settings before it starts anything (from the same table); here
that check is set aside so that the kubelet itself is asked. Needs root and the node tools (``make
test-tools``): skips without them, fails under CI.
"""

import os
import uuid
from pathlib import Path

import pytest

from testkit.cluster import skip_or_fail
from testkit.realnode import KubeletSettings, RealNodeError, Topology, add_node, list_nodes, missing_tools
from toposched.schedhook.placement.parse import CPU_OPTION_CONFLICTS

pytestmark = pytest.mark.cluster

ALPHA = {"CPUManagerPolicyAlphaOptions": True}
SMT = Topology.uniform(2, 2, threads_per_core=2)
CASES = [
    *(
        pytest.param(
            KubeletSettings(cpu_manager_policy_options={a: "true", b: "true"}, feature_gates=ALPHA),
            SMT,
            f"static policy options {a} and {b} can not be used at the same time",
            id=f"{a}+{b}",
        )
        for a, b in CPU_OPTION_CONFLICTS
    ),
    pytest.param(
        KubeletSettings(cpu_manager_policy_options={"align-by-socket": "true"}, feature_gates=ALPHA),
        SMT,
        "single-numa-node policy is incompatible with CPUManager align-by-socket",
        id="align-by-socket+single-numa-node",
    ),
    pytest.param(
        KubeletSettings(topology_manager_policy="restricted"),
        Topology.uniform(zones=9, cores_per_zone=1, memory_per_zone="1Gi"),
        "unsupported on machines with more than 8 NUMA Nodes",
        id="nine-zones-without-max-allowable-numa-nodes",
    ),
]


@pytest.mark.parametrize(("settings", "topology", "refusal"), CASES)
def test_the_kubelet_refuses_to_start(
    kubeconfig: Path, monkeypatch: pytest.MonkeyPatch, settings: KubeletSettings, topology: Topology, refusal: str
) -> None:
    problems = [] if os.geteuid() == 0 else ["root"]
    problems += [f"{m.what} ({m.package})" for m in missing_tools()]
    if problems:
        skip_or_fail(f"real nodes need {', '.join(problems)}: run `make test-tools` as root")
    monkeypatch.setattr(KubeletSettings, "validate", lambda self, topology: None)
    name = f"rf-{uuid.uuid4().hex[:6]}"
    with pytest.raises(RealNodeError) as refused:
        add_node(name, topology=topology, settings=settings, timeout=60)
    assert refusal in str(refused.value)
    assert name not in {n.name for n in list_nodes()}  # undone: nothing left behind
