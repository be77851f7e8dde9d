"""Exporter: full scan of a large machine (pure), allocation change -> NRT via watch, footprint."""

import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
from kubernetes_asyncio import client, config, watch

from bench.stats import summary
from testkit.cluster import ensure_kwok_node
from testkit.paths import REPO
from testkit.podresources import FakeKubelet
from testkit.sysfs import eight_node, two_socket
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.exporter.kubeletconfig import KubeletConfig
from toposched.exporter.podresources._generated import api_pb2
from toposched.exporter.sysfs import read_machine
from toposched.exporter.topology import Inputs, build

G, V, P = NodeResourceTopology.GROUP, NodeResourceTopology.VERSION, NodeResourceTopology.PLURAL


def run_scan(repeats: int = 21) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        sysfs = eight_node(Path(tmp))
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            build(Inputs("bench", read_machine(sysfs), KubeletConfig()))
            times.append((time.perf_counter() - t0) * 1000)
    return {"numa_nodes": 8, "cpus": 256, "scan_and_build_ms": summary(times, "ms")}


async def _daemon(kubeconfig: Path, samples: int, idle_seconds: float) -> dict[str, Any]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    work = Path(tempfile.mkdtemp(prefix="tsb-", dir="/tmp"))
    kubelet = FakeKubelet(work / "kubelet.sock")
    kubelet.allocatable = api_pb2.AllocatableResourcesResponse(cpu_ids=list(range(64)))
    await kubelet.start()
    async with client.ApiClient(configuration) as api:
        node = f"bench-nrt-{uuid.uuid4().hex[:6]}"
        await ensure_kwok_node(api, node)
        sysfs = two_socket(work)
        conf = work / "config.yaml"
        conf.write_text("kind: KubeletConfiguration\ncpuManagerPolicy: static\n")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "NODE_NAME": node}
        args = ["--sysfs", str(sysfs), "--kubelet-config", str(conf), "--podresources", str(kubelet.socket)]
        args += ["--kubelet-state-dir", str(work), "--metrics-port", "0", "--health-port", "0", "--period", "10"]
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "toposched",
            "exporter",
            *args,
            cwd=REPO,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        seen: dict[str, float] = {}
        arrived = asyncio.Event()

        async def follow() -> None:
            objects = client.CustomObjectsApi(api)
            async with watch.Watch().stream(
                objects.list_cluster_custom_object, G, V, P, field_selector=f"metadata.name={node}", timeout_seconds=900
            ) as events:
                async for event in events:
                    for r in event["object"]["zones"][1]["resources"]:
                        if r["name"] == "cpu" and r["available"] not in seen:
                            seen[r["available"]] = time.perf_counter()
                            arrived.set()

        follower = asyncio.create_task(follow())
        try:
            while "32" not in seen:
                await asyncio.wait_for(arrived.wait(), 60)
                arrived.clear()
            latencies = []
            await asyncio.sleep(1.1)  # the exporter writes at most once per second
            for i in range(samples):
                # Alternate between 1 and 2 exclusive CPUs taken on NUMA 1 (CPU 16, 17): a new value each time.
                cpus = [16] if i % 2 == 0 else [16, 17]
                expected = str(32 - len(cpus))
                seen.pop(expected, None)
                kubelet.pods = [
                    api_pb2.PodResources(
                        name=f"p{i}", namespace="bench", containers=[api_pb2.ContainerResources(cpu_ids=cpus)]
                    )
                ]
                started = time.perf_counter()
                while expected not in seen:
                    await asyncio.wait_for(arrived.wait(), 10)
                    arrived.clear()
                latencies.append((seen[expected] - started) * 1000)
                await asyncio.sleep(1.1)  # the exporter writes at most once per second
            process = psutil.Process(proc.pid)
            cpu_before = sum(process.cpu_times()[:2])
            await asyncio.sleep(idle_seconds)
            cpu_after = sum(process.cpu_times()[:2])
            rss = process.memory_info().rss
        finally:
            follower.cancel()
            proc.terminate()
            await proc.wait()
            await kubelet.stop()
            await client.CoreV1Api(api).delete_node(node)
    return {
        "allocation_to_nrt_ms": summary(latencies, "ms"),
        "rss_mib": round(rss / 2**20, 1),
        "cpu_millicores_idle": round((cpu_after - cpu_before) / idle_seconds * 1000, 1),
        "idle_seconds": idle_seconds,
    }


def run_daemon(kubeconfig: Path, samples: int = 30, idle_seconds: float = 30) -> dict[str, Any]:
    return asyncio.run(_daemon(kubeconfig, samples, idle_seconds))
