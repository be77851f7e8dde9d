"""Running toposched day to day, checked by real parts on real kubelet nodes.

Capacity judged by the kubelets: ``toposched capacity`` says N pods of a shape fit on a node; N
such pods created through kube-scheduler + toposched are all admitted by the node's kubelet, and
pod N+1 stays Pending for the reason the count gave. Three shapes, each on a node of its own: one
whose CPUs the zones split, one with a GPU (the testkit device plugin), one under
``full-pcpus-only`` with SMT.

Monitoring: a real Prometheus (Debian's package, from ``make test-tools``) scrapes the extender,
the operator, the capacity counter and every node's exporter, and runs the chart's alert rules as
helm renders them (``promtool check rules`` passes). Every dashboard panel's query and every alert
expression returns series; deleting a node's NRT takes the blind-node alert (``for`` shortened)
from pending to firing, and it resolves when the NRT returns; a pod placed by kube-scheduler alone
that its kubelet rejects with TopologyAffinityError shows in the metric.
"""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from testkit.cluster import OperatorProcess, free_port, skip_or_fail, wait_default_service_account, wait_for
from testkit.paths import REPO
from testkit.realnode import (
    KubeletSettings,
    NodeDevices,
    RealNode,
    Topology,
    add_node,
    leftovers,
    remove_node,
    scheduled_pod,
    workload_pod,
)
from testkit.realnode.exporter import NodeExporter, start_exporter, wait_agreement
from testkit.schedstack import SchedulerStack, bin_dir, scheduler_stack
from toposched.apis.constants import NRT_GROUP, NRT_PLURAL, NRT_VERSION

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds", "real_nodes"), pytest.mark.timeout(480)]

GPU = "example.com/gpu"
RELEASE = "toposched"  # the chart's fullname, so the rules' job names are the jobs scraped here
SMT = Topology.uniform(2, 2, "4Gi", threads_per_core=2)


@dataclass(frozen=True)
class Case:
    """A shape (one container ``app``, Guaranteed) and the node that takes it."""

    name: str
    cpu: int
    topology: Topology
    settings: KubeletSettings = field(default_factory=KubeletSettings)
    devices: tuple[str, ...] = ()
    gpus: int = 0

    def pod(self, name: str) -> dict[str, Any]:
        return workload_pod(name, cpu=self.cpu, memory="256Mi", devices={GPU: self.gpus} if self.gpus else None)


CASES = (
    # 4 + 5 free CPUs: one copy of 3 per zone, though kube-scheduler's fit leaves room for three.
    Case("split", 3, Topology.uniform(2, 5, "4Gi")),
    # Two GPUs on zone 0, one on zone 1: CPUs end the count on zone 0, the GPU on zone 1.
    Case("gpu", 2, Topology.uniform(2, 4, "4Gi"), devices=(f"{GPU}=0,0,1",), gpus=1),
    # Whole cores only, core 0 (CPUs 0 and its sibling) reserved: 1 + 2 cores free.
    Case(
        "pcpus",
        2,
        SMT,
        KubeletSettings(
            cpu_manager_policy_options={"full-pcpus-only": "true"},
            reserved_system_cpus=",".join(map(str, SMT.siblings(0))),
        ),
    ),
)


@dataclass
class Plant:
    """Real nodes with their exporters, the extender and kube-scheduler, the operator, the
    capacity counter and Prometheus scraping them all."""

    tag: str
    nodes: dict[str, RealNode]
    exporters: dict[str, NodeExporter]
    stack: SchedulerStack
    prometheus: int = 0
    work: Path = Path()
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def node(self, case: str) -> RealNode:
        return self.nodes[f"{case}-{self.tag}"]


def _nodes(tag: str) -> dict[str, RealNode]:
    added: dict[str, RealNode] = {}
    for case in CASES:
        devices = NodeDevices.parse(list(case.devices)) if case.devices else None
        added[f"{case.name}-{tag}"] = add_node(f"{case.name}-{tag}", case.topology, case.settings, devices=devices)
    # The monitoring test's own node: 1 + 2 free CPUs, so a pod of 3 fits its total but no zone.
    added[f"mon-{tag}"] = add_node(f"mon-{tag}", Topology.uniform(2, 2, "2Gi"))
    return added


@pytest.fixture(scope="module")
def plant(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plant]:
    if not (shutil.which("prometheus") and shutil.which("promtool")):
        skip_or_fail("the monitoring test needs prometheus and promtool: run `make test-tools` as root")
    tag, work = uuid.uuid4().hex[:6], tmp_path_factory.mktemp("plant")
    nodes: dict[str, RealNode] = {}
    exporters: dict[str, NodeExporter] = {}  # the test may replace one: stopped from here at the end
    try:
        nodes = _nodes(tag)
        exporters.update((name, start_exporter(node, metrics=True)) for name, node in nodes.items())
        metrics = free_port()
        with scheduler_stack(kubeconfig, work / "stack", ["--metrics-port", str(metrics)]) as stack:
            plant = Plant(tag, nodes, exporters, stack, work=work)
            try:
                _start_monitoring(plant, kubeconfig, metrics)
                yield plant
            finally:
                for proc in plant.processes:
                    proc.terminate()
                    proc.wait(15)
    finally:
        for exporter in exporters.values():
            exporter.stop()
        for name in nodes:
            remove_node(name)
            assert leftovers(name) == []


def _start_monitoring(plant: Plant, kubeconfig: Path, extender_metrics: int) -> None:
    """The operator, the capacity counter (the chart's shapes) and Prometheus over all of them."""
    env = {"KUBECONFIG": str(kubeconfig)}
    operator = OperatorProcess(kubeconfig, "default", plant.work / "operator.log", "op-ops", f"ops-{plant.tag}")
    operator.start()
    assert operator.proc is not None
    plant.processes.append(operator.proc)
    counter = free_port()
    shapes = [f"--shape={s['name']}={s['requests']}" for s in SHAPES]
    args = [sys.executable, "-m", "toposched", "capacity", "--serve", str(counter), "--every", "5", *shapes]
    plant.processes.append(_spawn(args, plant.work / "capacity.log", env))
    rules = plant.work / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rendered("PrometheusRule")["spec"]["groups"]}))
    targets = {
        f"{RELEASE}-schedhook": [extender_metrics],
        f"{RELEASE}-operator": [operator.metrics_port],
        f"{RELEASE}-capacity": [counter],
        f"{RELEASE}-exporter": [e.metrics_port for e in plant.exporters.values()],
    }
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports]}]}
            for job, ports in targets.items()
        ],
    }
    (plant.work / "prometheus.yml").write_text(yaml.safe_dump(config))
    plant.prometheus = free_port()
    storage = tempfile.mkdtemp(prefix="prom-", dir=plant.work)
    command = ["prometheus", f"--config.file={plant.work / 'prometheus.yml'}", f"--storage.tsdb.path={storage}"]
    command += [f"--web.listen-address=127.0.0.1:{plant.prometheus}"]
    plant.processes.append(_spawn(command, plant.work / "prometheus.log", {}))
    deadline = time.monotonic() + 60
    while not _prometheus_ready(plant.prometheus):
        assert time.monotonic() < deadline, (plant.work / "prometheus.log").read_text()[-3000:]
        time.sleep(0.5)


SHAPES = [
    {"name": "split", "requests": "cpu:3,memory:256Mi", "alertBelow": 1},
    {"name": "gpu", "requests": f"cpu:2,memory:256Mi,{GPU}:1"},
]
"""The chart's ``capacity.shapes`` in this test (an alert threshold on one)."""


def rendered(kind: str, name: str = RELEASE) -> dict[str, Any]:
    """The chart's object of ``kind`` named ``name`` as helm renders it with the rules and the
    dashboard on, the blind-node alert's ``for`` shortened to 5 s."""
    values = {
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True, "blindFor": "5s"},
        "grafanaDashboard": {"enabled": True},
        "capacity": {"shapes": SHAPES},
    }
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
        yaml.safe_dump(values, file)
        file.flush()
        helm = [str(bin_dir() / "helm"), "template", RELEASE, str(REPO / "charts" / "toposched"), "-f", file.name]
        done = subprocess.run(helm, capture_output=True, text=True, check=True)
    return next(d for d in yaml.safe_load_all(done.stdout) if d and (d["kind"], d["metadata"]["name"]) == (kind, name))


def _spawn(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(args, cwd=REPO, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT)


def _prometheus_ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _api(port: int, path: str, **params: str) -> Any:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/{path}{query}", timeout=10) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return body["data"]


# -- capacity judged by the kubelets ------------------------------------------------------------


def capacity_of(kubeconfig: Path, case: Case, work: Path) -> dict[str, Any]:
    """``toposched capacity --pod`` against the live cluster: the shape's JSON."""
    manifest = work / f"{case.name}.yaml"
    manifest.write_text(yaml.safe_dump(case.pod(case.name)))
    command = [sys.executable, "-m", "toposched", "capacity", "--pod", str(manifest), "-o", "json"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=_env(kubeconfig))
    assert done.returncode == 0, done.stderr
    [shape] = json.loads(done.stdout)["shapes"]
    return dict(shape)


def _env(kubeconfig: Path) -> dict[str, str]:
    return {**os.environ, "KUBECONFIG": str(kubeconfig)}


def placed(case: Case, name: str, node: str) -> dict[str, Any]:
    """The case's pod through kube-scheduler + toposched, allowed on ``node`` only."""
    body = case.pod(name)
    affinity = scheduled_pod(name, case.cpu, "toposched", [node])["spec"]["affinity"]
    body["spec"].update(schedulerName="toposched", affinity=affinity)
    return body


async def _pending_message(core: client.CoreV1Api, namespace: str, name: str) -> str:
    async def unschedulable() -> str | None:
        pod = await core.read_namespaced_pod(name, namespace)
        assert pod.status.phase == "Pending", f"{name}: {pod.status}"
        for c in pod.status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False" and c.message:
                return str(c.message)
        return None

    return await wait_for(unschedulable, within=60, what=f"{name} unschedulable")


async def test_capacity_is_what_the_kubelets_admit(
    api: client.ApiClient, namespace: str, plant: Plant, kubeconfig: Path
) -> None:
    await wait_default_service_account(api, namespace)
    core = client.CoreV1Api(api)
    for exporter in plant.exporters.values():
        await asyncio.to_thread(wait_agreement, exporter, 15)
    said = {}
    for case in CASES:
        shape = await asyncio.to_thread(capacity_of, kubeconfig, case, plant.work)
        said[case.name] = next(n for n in shape["nodes"] if n["node"] == plant.node(case.name).name)
        assert said[case.name]["fits"] > 0, said[case.name]
    print({name: (fit["fits"], fit["limitedBy"], fit["reason"]) for name, fit in said.items()})

    async def admitted(case: Case) -> None:
        node, fits = plant.node(case.name), said[case.name]["fits"]
        names = [f"{case.name}-{i}" for i in range(fits)]
        for name in names:
            await core.create_namespaced_pod(namespace, placed(case, name, node.name))

        async def running() -> bool:
            pods = [await core.read_namespaced_pod(n, namespace) for n in names]
            failed = [p for p in pods if p.status.phase == "Failed"]
            assert not failed, [(p.metadata.name, p.status.reason, p.status.message) for p in failed]
            return all(p.status.phase == "Running" and p.spec.node_name == node.name for p in pods)

        await wait_for(running, within=90, what=f"{fits} {case.name} pods admitted by {node.name}'s kubelet")
        await asyncio.to_thread(wait_agreement, plant.exporters[node.name], 15)
        one_more = f"{case.name}-{fits}"
        await core.create_namespaced_pod(namespace, placed(case, one_more, node.name))
        message = await _pending_message(core, namespace, one_more)
        assert said[case.name]["reason"] in message, (said[case.name], message)
        await asyncio.sleep(3)
        assert (await core.read_namespaced_pod(one_more, namespace)).status.phase == "Pending"

    await asyncio.gather(*(admitted(case) for case in CASES))


# -- Prometheus, the rules and the dashboard ------------------------------------------------------


def alert_expressions() -> dict[str, str]:
    rules = rendered("PrometheusRule")["spec"]["groups"][0]["rules"]
    return {r["alert"]: r["expr"] for r in rules}


def panel_queries() -> dict[str, str]:
    dashboard = json.loads(rendered("ConfigMap", f"{RELEASE}-dashboard")["data"]["toposched.json"])
    return {f"{p['title']} ({t['refId']})": t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])}


def with_bool(expr: str) -> str:
    """The expression with its outermost comparison made a ``bool`` one: a series whether or not
    the alert's condition holds (0 or 1), none only where the metrics are missing."""
    depth = 0
    for i in range(len(expr) - 1, -1, -1):
        depth += (expr[i] in ")]}") - (expr[i] in "([{")
        if depth == 0 and expr[i] in "<>=":
            return f"{expr[: i + 1]} bool{expr[i + 1 :]}"
    return expr


def _series(port: int, expr: str) -> list[Any]:
    return list(_api(port, "query", query=expr)["result"])


async def _alert_state(port: int, name: str) -> str:
    alerts = (await asyncio.to_thread(_api, port, "alerts"))["alerts"]
    return next((a["state"] for a in alerts if a["labels"]["alertname"] == name), "inactive")


async def test_prometheus_runs_the_rules_and_the_dashboard_on_the_real_parts(
    api: client.ApiClient, namespace: str, plant: Plant
) -> None:
    await wait_default_service_account(api, namespace)
    rules = plant.work / "rules.yaml"
    promtool = ["promtool", "check", "rules", str(rules)]
    checked = await asyncio.to_thread(subprocess.run, promtool, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    node = plant.node("mon")
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)

    # kube-scheduler alone sends a pod of 3 CPUs to a node whose zones hold 1 and 2: rejected.
    await core.create_namespaced_pod(namespace, scheduled_pod("alone", 3, "default-scheduler", [node.name]))

    async def reported() -> bool:
        found = await asyncio.to_thread(_series, plant.prometheus, "toposched_topology_affinity_errors_total")
        return sum(float(s["value"][1]) for s in found) >= 1

    await wait_for(reported, within=90, what="the TopologyAffinityError in the metric")

    # A pod through toposched: kube-scheduler calls the extender (its latency, its errors).
    await core.create_namespaced_pod(namespace, scheduled_pod("placed", 1, "toposched", [node.name]))
    queries = {**panel_queries(), **{a: with_bool(e) for a, e in alert_expressions().items()}}
    empty = list(queries)
    deadline = time.monotonic() + 90
    while empty and time.monotonic() < deadline:
        await asyncio.sleep(2)
        empty = [name for name in empty if not await asyncio.to_thread(_series, plant.prometheus, queries[name])]
    assert not empty, {name: queries[name] for name in empty}

    # The blind-node alert: the NRT deleted (its exporter stopped, which would write it again).
    blind = "ToposchedNodeNumaBlind"

    async def resolved() -> bool:
        return await _alert_state(plant.prometheus, blind) == "inactive"

    await wait_for(resolved, within=30, what=f"{blind} inactive before (no other node blind)")
    plant.exporters[node.name].stop()
    await custom.delete_cluster_custom_object(NRT_GROUP, NRT_VERSION, NRT_PLURAL, node.name)
    states: list[str] = []

    async def fired() -> bool:
        state = await _alert_state(plant.prometheus, blind)
        if not states or states[-1] != state:
            states.append(state)
        return state == "firing"

    await wait_for(fired, within=60, what=f"{blind} firing")
    assert states[-2:] == ["pending", "firing"], states
    plant.exporters[node.name] = await asyncio.to_thread(start_exporter, node, metrics=True)
    await wait_for(resolved, within=60, what=f"{blind} resolved once the NRT is back")
