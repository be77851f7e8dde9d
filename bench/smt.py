"""NUMA fragmentation on performance-tuned nodes, judged by real kubelets: SMT and ``full-pcpus-only``.

Real nodes as in ``bench/realnodes.py`` but with two threads per core (2 NUMA zones x 4 cores x 2
threads, 32 GiB per zone) and the CPU Manager's ``full-pcpus-only`` on, the way telco and GPU
nodes are tuned: the reserved CPUs are a whole core, and the kubelet refuses with
``SMTAlignmentError`` a container whose CPUs are not whole cores (an odd request here) or more
whole cores than are free. ``single-numa-node``. The stream is the fragmentation scenario's
(Guaranteed pods of 1-6 integral CPUs, 4 GiB each, 4.5 per node), so about a third of the pods
ask for an odd number of CPUs: no node can run them, and a scheduler that does not know the
option sends them anyway. kube-scheduler alone, toposched and scheduler-plugins' NodeResourceTopologyMatch,
three runs each (five with ``--full``); rejections counted by the kubelet's reason.
"""

from pathlib import Path
from typing import Any

from bench import ownpool, scheduler_plugins
from bench.ownpool import OwnPool
from testkit.realnode import KubeletSettings, Topology

TOPOLOGY = Topology.uniform(zones=2, cores_per_zone=4, threads_per_core=2, memory_per_zone="32Gi")
NODE_SHAPE = "2 NUMA zones x 4 cores x 2 threads (core 0 reserved), 32 GiB per zone, full-pcpus-only"
SETTINGS = KubeletSettings(
    cpu_manager_policy_options={"full-pcpus-only": "true"},
    reserved_system_cpus=",".join(map(str, TOPOLOGY.siblings(0))),
)
SCHEDULERS = ("plain", "toposched", scheduler_plugins.NUMA)
PODS_PER_NODE = 4.5


SCENARIO = OwnPool(
    section="smt",
    pods_per_node=PODS_PER_NODE,
    schedulers=SCHEDULERS,
    node_shape=NODE_SHAPE,
    pod_shape="1-6 integral CPUs (4 GiB each)",
    topology=TOPOLOGY,
    settings=SETTINGS,
)


def run(kubeconfig: Path, work: Path, full: bool, real_nodes: int) -> dict[str, Any]:
    """The scenario (``results.json``'s ``smt``)."""
    return ownpool.run(kubeconfig, work, SCENARIO, full, real_nodes)
