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

import asyncio
import random
import time
from pathlib import Path
from typing import Any

from bench import placement, scheduler_plugins
from bench.harness import BENCH_LABEL, Harness
from bench.realnodes import create_pool, real_scenario
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


async def gpu_scenario(h: Harness, count: int, full: bool) -> dict[str, Any]:
    """The scenario on ``count`` new real nodes with GPUs, removed at the end."""
    started = time.monotonic()
    pool = await asyncio.to_thread(create_pool, count, "single-numa-node", DEVICES)
    created = round(time.monotonic() - started, 1)
    try:
        await asyncio.to_thread(pool.start_exporters, False)
        out = await real_scenario(
            h,
            pool,
            policy="single-numa-node",
            pods=round(count * PODS_PER_NODE),
            repeats=5 if full else 3,
            stale=False,
            burst=10,
            interval=0.25,
            schedulers=SCHEDULERS,
            make_pods=gpu_pods,
            node_shape=NODE_SHAPE,
        )
    finally:
        await asyncio.to_thread(pool.remove)
    return out | {
        "pod_shape": "1-2 GPUs and 2-6 integral CPUs (1 GiB each)",
        "devices_per_node": 2 * GPUS_PER_ZONE,
        "stranded_below_cpus": min(CPU_CHOICES),
        "created_seconds": created,
        "total_seconds": round(time.monotonic() - started, 1),
    }


def run(kubeconfig: Path, work: Path, full: bool, real_nodes: int) -> dict[str, Any]:
    """The GPU scenario on ``real_nodes`` real nodes, with every scheduler it compares (``results.json``'s
    ``devices``)."""

    logs = work / "devices"  # beside the other sections' logs of the same names
    logs.mkdir(parents=True, exist_ok=True)

    async def main() -> dict[str, Any]:
        async with Harness(kubeconfig, logs) as h:
            for profile, strategy in STRATEGIES.items():
                await h.start_toposched(["--strategy", strategy], profile=profile)
            await placement.start_schedulers(h)
            return await gpu_scenario(h, real_nodes, full)

    return asyncio.run(main())
