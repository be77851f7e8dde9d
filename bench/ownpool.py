"""Real-kubelet scenarios on a pool of real nodes of their own (the GPU and the SMT ones): the pool
is created for the scenario and removed after it; a single-numa-node stream, 10 pods every 0.25 s,
3 runs per scheduler (5 with ``--full``)."""

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import placement
from bench.harness import Harness
from bench.realnodes import TOPOLOGY, PodStream, RunJudge, create_pool, real_pods, real_scenario
from testkit.realnode import KubeletSettings, NodeDevices, NodeDRA, Topology


@dataclass(frozen=True)
class OwnPool:
    section: str
    """The results' key and the logs' directory."""
    pods_per_node: float
    schedulers: Sequence[str]
    node_shape: str
    pod_shape: str
    make_pods: PodStream = real_pods
    devices: NodeDevices | None = None
    topology: Topology = TOPOLOGY
    settings: KubeletSettings | Sequence[KubeletSettings] | None = None
    """The nodes' kubelet settings (a sequence: node i has the i-th, round robin)."""
    dra: NodeDRA | None = None
    """Each node's DRA devices, published by its DRA driver."""
    judge: RunJudge | None = None
    """The scenario's own figures per run."""
    start: Callable[[Harness], Awaitable[None]] = placement.start_schedulers
    """Starts the schedulers the scenario compares (the NUMA scenarios' by default)."""
    strategies: Mapping[str, str] = field(default_factory=dict)
    """Extra toposched profiles to start (profile -> --strategy)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Figures of the scenario itself for the report."""


async def scenario(h: Harness, own: OwnPool, count: int, full: bool) -> dict[str, Any]:
    started = asyncio.get_running_loop().time()
    pool = await asyncio.to_thread(
        create_pool, count, "single-numa-node", own.devices, own.topology, own.settings, own.dra
    )
    created = round(asyncio.get_running_loop().time() - started, 1)
    try:
        await asyncio.to_thread(pool.start_exporters, False)
        out = await real_scenario(
            h,
            pool,
            policy="single-numa-node",
            pods=round(count * own.pods_per_node),
            repeats=5 if full else 3,
            stale=False,
            burst=10,
            interval=0.25,
            schedulers=own.schedulers,
            make_pods=own.make_pods,
            node_shape=own.node_shape,
            judge=own.judge,
        )
    finally:
        await asyncio.to_thread(pool.remove)
    total = round(asyncio.get_running_loop().time() - started, 1)
    return out | {"pod_shape": own.pod_shape, **own.extra, "created_seconds": created, "total_seconds": total}


def run(kubeconfig: Path, work: Path, own: OwnPool, full: bool, real_nodes: int) -> dict[str, Any]:
    """The scenario on ``real_nodes`` new real nodes, with the schedulers it compares."""
    logs = work / own.section  # beside the other sections' logs of the same names
    logs.mkdir(parents=True, exist_ok=True)

    async def main() -> dict[str, Any]:
        async with Harness(kubeconfig, logs) as h:
            for profile, strategy in own.strategies.items():
                await h.start_toposched(["--strategy", strategy], profile=profile)
            await own.start(h)
            return await scenario(h, own, real_nodes, full)

    return asyncio.run(main())
