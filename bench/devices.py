"""Devices judged by real kubelets: GPU-style nodes, a stream of pods asking for GPUs with CPUs.

Real nodes as in ``bench/realnodes.py`` (2 NUMA zones x 8 CPUs, CPU 0 reserved, 32 GiB per zone,
``single-numa-node``), each with two GPUs per zone (``example.com/gpu``) served by a real device
plugin (``testkit.deviceplugin``): the kubelet's device manager counts them, gives the Topology
Manager their hints and allocates them; the real exporter publishes them per zone. Each pod asks
for 1-2 GPUs with 2-6 integral CPUs (1 GiB each), Guaranteed, about 3.5 pods per node: more GPUs
than the nodes have, and about as many CPUs, so what counts is where the GPUs go.

Every NUMA strategy of the extender runs (MostAllocated as shipped, LeastAllocated,
BalancedAllocation, LeastNUMANodes), beside kube-scheduler alone and scheduler-plugins'
NodeResourceTopologyMatch, three runs each. Figures per run, from the kubelets: TopologyAffinityErrors,
pods admitted, devices in use at the end, and stranded devices (free GPUs none of whose zones has
the 2 CPUs the smallest pod asks for: no pod of the stream can have them).
"""

import random
from pathlib import Path
from typing import Any

from bench import ownpool, scheduler_plugins
from bench.harness import BENCH_LABEL
from bench.ownpool import OwnPool
from testkit.realnode import NodeDevices, workload_pod
from testkit.simulated_kubelet import GPU

GPUS_PER_ZONE = 2
DEVICES = NodeDevices.parse([f"{GPU}=" + ",".join(["0"] * GPUS_PER_ZONE + ["1"] * GPUS_PER_ZONE)])
NODE_SHAPE = f"2 NUMA zones x 8 CPUs (CPU 0 reserved), 32 GiB and {GPUS_PER_ZONE} GPUs per zone"
STRATEGIES = {"toposched-balanced": "BalancedAllocation", "toposched-least-numa": "LeastNUMANodes"}
"""The extender's NUMA strategies placement.start_schedulers does not start, by profile."""
SCHEDULERS = ("plain", "toposched", "toposched-spread", *STRATEGIES, scheduler_plugins.NUMA)
PODS_PER_NODE = 3.5
GPU_CHOICES = (1, 2)
CPU_CHOICES = (2, 3, 4, 5, 6)


def gpu_pods(count: int, scheduler: str, tag: str, seed: int) -> list[dict[str, Any]]:
    """Guaranteed pods, 1-2 GPUs with 2-6 integral CPUs (1 GiB each), for the pool's nodes only."""
    rng = random.Random(seed)
    pods = []
    for i in range(count):
        gpus, cpu = rng.choice(GPU_CHOICES), rng.choice(CPU_CHOICES)
        body = workload_pod(f"g{i:04d}", cpu=cpu, memory=f"{cpu}Gi", devices={GPU: gpus})
        body["spec"].update(schedulerName=scheduler, nodeSelector={BENCH_LABEL: tag})
        pods.append(body)
    return pods


SCENARIO = OwnPool(
    section="devices",
    pods_per_node=PODS_PER_NODE,
    schedulers=SCHEDULERS,
    node_shape=NODE_SHAPE,
    pod_shape="1-2 GPUs and 2-6 integral CPUs (1 GiB each)",
    make_pods=gpu_pods,
    devices=DEVICES,
    strategies=STRATEGIES,
    extra={"devices_per_node": 2 * GPUS_PER_ZONE, "stranded_below_cpus": min(CPU_CHOICES)},
)


def run(kubeconfig: Path, work: Path, full: bool, real_nodes: int) -> dict[str, Any]:
    """The GPU scenario (``results.json``'s ``devices``)."""
    return ownpool.run(kubeconfig, work, SCENARIO, full, real_nodes)
