"""What a fault run runs: on its own control plane, real kubelet nodes and kwok nodes, an exporter
for each, the operators, and the extender with a real kube-scheduler; a probe node whose NRT only
the run writes (to see when the extender follows again) and a node with the largest NRT.

Real nodes' exporters are ``testkit.realnode.exporter``'s; a kwok node's exporter is the same
daemon on a two-socket sysfs tree, asking a fake kubelet (``testkit.podresources``) that reports
no pods (the pods sent to kwok nodes hold nothing exclusive, so its NRT stays current).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client, config

from testkit.builders import appgroup_body, nrt_body
from testkit.chaos.plane import Plane
from testkit.cluster import OperatorProcess, ensure_kwok_node, free_port, wait_default_service_account
from testkit.large_nrt import NRTS, largest_nrt
from testkit.paths import CRDS, EXAMPLES, REPO
from testkit.podresources import FakeKubelet
from testkit.realnode import KubeletSettings, RealNode, Topology, add_node, remove_node
from testkit.realnode.exporter import NodeExporter, health_status, start_exporter
from testkit.schedstack import SchedulerStack
from testkit.sysfs import two_socket
from toposched.apis.appgroup import AppGroup
from toposched.exporter.podresources._generated import api_pb2

NAMESPACE = "chaos"
APPGROUPS = (AppGroup.GROUP, AppGroup.VERSION, NAMESPACE, AppGroup.PLURAL)
PROFILE = "toposched"
TOPOLOGY = Topology.uniform(zones=2, cores_per_zone=4, memory_per_zone="4Gi")
SETTINGS = KubeletSettings(topology_manager_policy="single-numa-node")
KWOK_LABELS = {"toposched-chaos": "kwok"}
PROBE = "chaos-probe"
LARGE = "chaos-huge"
KWOK_KUBELET = {"kind": "KubeletConfiguration", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0,32"}
KWOK_KUBELET |= {"topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "container"}


def probe_nrt(free: int, owner_uid: str) -> dict[str, Any]:
    """The probe node's NRT: two zones of 16 CPUs, ``free`` of them free on each."""
    return nrt_body(PROBE, [{"cpu": (16, 16, free), "memory": ("64Gi", "60Gi", "60Gi")}] * 2, owner_uid=owner_uid)


@dataclass
class KwokExporter:
    """``toposched exporter`` of a kwok node, asking a fake kubelet of its own."""

    node: str
    work: Path
    kubeconfig: Path
    period: float
    kubelet: FakeKubelet | None = None
    proc: subprocess.Popen[bytes] | None = None
    health_port: int = 0

    @property
    def log(self) -> Path:
        return self.work / "exporter.log"

    async def start_kubelet(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        # unix socket paths are limited to 107 bytes: a short directory for it
        socket = Path("/tmp") / f"tsk-{os.getpid()}-{self.node}.sock"
        self.kubelet = FakeKubelet(socket)
        self.kubelet.allocatable = api_pb2.AllocatableResourcesResponse(
            cpu_ids=[c for c in range(64) if c not in (0, 32)]
        )
        await self.kubelet.start()

    def start(self) -> None:
        """Start the daemon; returns once it answers /healthz (at most 30 s)."""
        assert self.kubelet is not None
        (self.work / "kubelet.yaml").write_text(yaml.safe_dump(KWOK_KUBELET))
        sysfs = self.work / "sys" if (self.work / "sys").is_dir() else two_socket(self.work)
        self.health_port = free_port()
        args = [
            *("--node", self.node, "--sysfs", str(sysfs), "--podresources", str(self.kubelet.socket)),
            *("--kubelet-config", str(self.work / "kubelet.yaml"), "--kubelet-state-dir", str(self.work)),
            *("--period", f"{self.period:g}", "--metrics-port", "0", "--health-port", str(self.health_port)),
        ]
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PYTHONUNBUFFERED": "1"}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "toposched", "exporter", *args],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while health_status(self.health_port, "/healthz") != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the exporter of {self.node} did not start; see {self.log}")
            time.sleep(0.1)

    def ready(self) -> bool:
        return health_status(self.health_port, "/readyz") == 200

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    async def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            await asyncio.to_thread(self.proc.wait, 15)
        if self.kubelet is not None:
            await self.kubelet.stop()


@dataclass
class RealExporter:
    """A real node's exporter (``testkit.realnode.exporter``), which a fault may kill and start again."""

    node: RealNode
    period: float
    running: NodeExporter | None = None

    @property
    def log(self) -> Path:
        return self.node.layout.root / "exporter" / "exporter.log"

    def start(self) -> None:
        self.running = start_exporter(self.node, period=self.period)

    def ready(self) -> bool:
        return self.running is not None and self.running.ready()

    def kill(self) -> None:
        if self.running is not None and self.running.running():
            self.running.proc.kill()
            self.running.proc.wait(10)

    async def stop(self) -> None:
        if self.running is not None:
            await asyncio.to_thread(self.running.stop)


Exporter = KwokExporter | RealExporter


@dataclass
class Scene:
    plane: Plane
    work: Path
    period: float
    real_names: list[str]
    kwok_names: list[str]
    real: dict[str, RealNode] = field(default_factory=dict)
    exporters: dict[str, Exporter] = field(default_factory=dict)
    api: client.ApiClient | None = None
    stack: SchedulerStack | None = None
    operator: OperatorProcess | None = None
    probe_uid: str = ""

    @property
    def kube(self) -> client.ApiClient:
        assert self.api is not None
        return self.api

    def logs(self) -> list[Path]:
        """Every log of toposched's components in the run."""
        found = [e.log for e in self.exporters.values()]
        if self.stack is not None:
            found.append(self.stack.log("extender"))
        if self.operator is not None:
            found.append(self.operator.log)
        return found

    async def start(self, say: Callable[[str], None]) -> None:
        say(f"control plane of the run's own in {self.plane.root}")
        await asyncio.to_thread(self.plane.up)
        await asyncio.to_thread(self._apply_crds)
        configuration = client.Configuration()
        await config.load_kube_config(config_file=str(self.plane.kubeconfig), client_configuration=configuration)
        self.api = client.ApiClient(configuration)
        core = client.CoreV1Api(self.api)
        try:
            await core.create_namespace({"metadata": {"name": NAMESPACE}})
        except client.ApiException as exc:
            if exc.status != 409:
                raise
        await wait_default_service_account(self.api, NAMESPACE)
        say(f"real nodes {', '.join(self.real_names)}; kwok nodes {', '.join(self.kwok_names)}")
        with ThreadPoolExecutor(4) as pool:
            nodes = await asyncio.gather(
                *(asyncio.get_running_loop().run_in_executor(pool, self._real_node, n) for n in self.real_names)
            )
        self.real = {n.name: n for n in nodes}
        for name in [*self.kwok_names, PROBE, LARGE]:
            await ensure_kwok_node(self.api, name, KWOK_LABELS if name in self.kwok_names else None)
        await self._extra_nrts()
        say(f"exporters (period {self.period:g} s), the operators, the extender and kube-scheduler")
        for name, node in self.real.items():
            self.exporters[name] = RealExporter(node, self.period)
        for name in self.kwok_names:
            kwok = KwokExporter(name, self.work / "kwok" / name, self.plane.kubeconfig, self.period)
            await kwok.start_kubelet()
            self.exporters[name] = kwok
        await asyncio.gather(*(asyncio.to_thread(e.start) for e in self.exporters.values()))
        self.operator = OperatorProcess(
            self.plane.kubeconfig, NAMESPACE, self.work / "operator.log", identity="chaos", lease="chaos"
        )
        self.operator.start()
        self.stack = SchedulerStack(self.plane.kubeconfig, self.work / "stack", profile=PROFILE)
        await asyncio.to_thread(self.stack.start)

    def _apply_crds(self) -> None:
        kubectl = [str(self.plane.cluster.kubectl_path()), "--kubeconfig", str(self.plane.kubeconfig)]
        subprocess.run([*kubectl, "apply", "--server-side", "-f", str(CRDS)], check=True, capture_output=True)
        wait = [*kubectl, "wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS)]
        subprocess.run(wait, check=True, capture_output=True)

    def _real_node(self, name: str) -> RealNode:
        if (self.plane.cluster.nodes_dir / name).exists():
            remove_node(name, cluster=self.plane.cluster)  # a run that ended half-way
        return add_node(name, TOPOLOGY, SETTINGS, cluster=self.plane.cluster)

    async def _extra_nrts(self) -> None:
        core, custom = client.CoreV1Api(self.api), client.CustomObjectsApi(self.api)
        for name, body in ((PROBE, probe_nrt), (LARGE, lambda _, uid: largest_nrt(LARGE, uid))):
            uid = (await core.read_node(name)).metadata.uid
            if name == PROBE:
                self.probe_uid = uid
            try:
                await custom.delete_cluster_custom_object(*NRTS, name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
            await custom.create_cluster_custom_object(*NRTS, body(0, uid))
        spec = yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text())["spec"]
        try:
            await client.CustomObjectsApi(self.api).create_namespaced_custom_object(
                *APPGROUPS, appgroup_body("boutique", spec=spec)
            )
        except client.ApiException as exc:
            if exc.status != 409:
                raise

    async def stop(self) -> None:
        """Everything the run started, its real nodes and its control plane."""
        if self.stack is not None:
            await asyncio.to_thread(self.stack.stop)
        if self.operator is not None:
            self.operator.stop()
        for exporter in self.exporters.values():
            await exporter.stop()
        if self.api is not None:
            await self.api.close()
        for name, node in self.real.items():  # they go with the node
            kept = self.work / "nodes" / name
            kept.mkdir(parents=True, exist_ok=True)
            for found in (node.layout.logs / "kubelet.log", node.layout.root / "exporter" / "exporter.log"):
                if found.is_file():
                    shutil.copy(found, kept / found.name)
        await asyncio.to_thread(self.plane.down, self.real_names)
