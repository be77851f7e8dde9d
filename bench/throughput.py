"""Scheduling throughput: kube-scheduler alone vs kube-scheduler + the toposched extender.

The same kube-scheduler binary and client limits run twice against the same kwok nodes (with
NRTs): once with a plain profile, once with the toposched profile and the extender. Pods/s is
measured from the first create to the last bind seen through a watch.
"""

import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from string import Template
from typing import Any

from kubernetes_asyncio import client, config

from bench.schedhook import nrt
from tests.integration.kube import free_port
from tests.paths import REPO

PLAIN = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: $kubeconfig}
leaderElection: {leaderElect: false}
profiles: [{schedulerName: plain}]
"""


async def _create_nodes(api: client.ApiClient, count: int, tag: str) -> list[str]:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    rng = random.Random(7)
    names = [f"tp-{tag}-{i:04d}" for i in range(count)]

    async def one(name: str) -> None:
        meta = client.V1ObjectMeta(
            name=name, labels={"toposched-bench": tag}, annotations={"kwok.x-k8s.io/node": "fake"}
        )
        status = client.V1NodeStatus(
            allocatable={"cpu": "64", "memory": "256Gi", "pods": "250"},
            capacity={"cpu": "64", "memory": "256Gi", "pods": "250"},
        )
        node = await core.create_node(client.V1Node(metadata=meta, status=status))
        body = nrt(name, rng)
        body["apiVersion"], body["kind"] = "topology.node.k8s.io/v1alpha2", "NodeResourceTopology"
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node.metadata.uid}
        ]
        await custom.create_cluster_custom_object("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", body)

    for start in range(0, count, 50):
        await asyncio.gather(*(one(n) for n in names[start : start + 50]))
    return names


async def _round(api: client.ApiClient, namespace: str, scheduler: str, pods: int, tag: str) -> float:
    core = client.CoreV1Api(api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    for _ in range(100):
        accounts = await core.list_namespaced_service_account(namespace)
        if accounts.items:
            break
        await asyncio.sleep(0.1)
    limits = {"cpu": "1", "memory": "1Gi"}
    started = time.perf_counter()
    for start in range(0, pods, 25):
        batch = []
        for i in range(start, min(pods, start + 25)):
            spec = client.V1PodSpec(
                scheduler_name=scheduler,
                node_selector={"toposched-bench": tag},
                containers=[
                    client.V1Container(
                        name="c", image="example.invalid/c:1", resources=client.V1ResourceRequirements(limits=limits)
                    )
                ],
            )
            batch.append(
                core.create_namespaced_pod(
                    namespace, client.V1Pod(metadata=client.V1ObjectMeta(name=f"p{i}"), spec=spec)
                )
            )
        await asyncio.gather(*batch)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        listed = await core.list_namespaced_pod(namespace)
        if sum(1 for p in listed.items if p.spec.node_name) >= pods:
            break
        await asyncio.sleep(0.05)
    else:
        raise TimeoutError(f"{scheduler}: not all {pods} pods bound in 600 s")
    elapsed = time.perf_counter() - started
    await core.delete_namespace(namespace)
    return pods / elapsed


def _start(args: list[str], log: Path, env: dict[str, str]) -> "subprocess.Popen[bytes]":
    with log.open("wb") as out:
        return subprocess.Popen(args, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


def _bin_dir() -> str:
    done = subprocess.run(
        [str(REPO / "hack" / "build-binaries.sh"), "--print"], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


async def _measure(kubeconfig: Path, nodes: int, pods: int, bin_dir: str) -> dict[str, Any]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    work = Path(tempfile.mkdtemp(prefix="toposched-throughput-"))
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    tag = uuid.uuid4().hex[:6]
    async with client.ApiClient(configuration) as api:
        names = await _create_nodes(api, nodes, tag)
        try:
            (work / "plain.yaml").write_text(Template(PLAIN).substitute(kubeconfig=kubeconfig))
            plain = _start(
                [f"{bin_dir}/kube-scheduler", f"--config={work / 'plain.yaml'}", "--secure-port=0"],
                work / "plain.log",
                env,
            )
            await asyncio.sleep(3)
            alone = await _round(api, f"tp-plain-{tag}", "plain", pods, tag)
            plain.terminate()
            plain.wait(15)

            port = free_port()
            extender = _start(
                [
                    sys.executable,
                    "-m",
                    "toposched",
                    "schedhook",
                    "--address",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--metrics-port",
                    "0",
                    "--no-remediation",
                ],
                work / "extender.log",
                env,
            )
            conf = Template((REPO / "deploy" / "kube-scheduler-config.yaml").read_text()).substitute(
                KUBECONFIG=kubeconfig,
                LEADER_ELECT="false",
                LEASE_NAMESPACE="kube-system",
                EXTENDER_URL=f"http://127.0.0.1:{port}",
            )
            (work / "toposched.yaml").write_text(conf)
            scheduler = _start(
                [f"{bin_dir}/kube-scheduler", f"--config={work / 'toposched.yaml'}", "--secure-port=0"],
                work / "toposched.log",
                env,
            )
            await asyncio.sleep(5)
            with_extender = await _round(api, f"tp-ext-{tag}", "toposched", pods, tag)
            for proc in (scheduler, extender):
                proc.terminate()
                proc.wait(15)
        finally:
            core = client.CoreV1Api(api)
            for start in range(0, len(names), 50):
                await asyncio.gather(*(core.delete_node(n) for n in names[start : start + 50]))
    return {
        "nodes": nodes,
        "pods": pods,
        "pods_per_second_alone": round(alone, 1),
        "pods_per_second_with_extender": round(with_extender, 1),
        "ratio": round(with_extender / alone, 2),
    }


def run(kubeconfig: Path, nodes: int = 200, pods: int = 200) -> dict[str, Any]:
    return asyncio.run(_measure(kubeconfig, nodes, pods, _bin_dir()))


if __name__ == "__main__":
    import json

    print(json.dumps(run(REPO / ".cluster" / "kubeconfig", int(sys.argv[1]) if len(sys.argv) > 1 else 200), indent=2))
