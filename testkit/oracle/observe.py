"""Run oracle cases on a real kubelet node: what toposched predicts for each pod, then what the
kubelet does with it.

Before each pod the node's NRT is built the way the exporter builds it (the same fake sysfs tree
the kubelet reads, its KubeletConfiguration, its PodResources answers) and the extender's
predictor (``placement.kubelet.predict``) judges the pod against it. Then the pod is bound to the
node and the kubelet decides: rejected (``TopologyAffinityError``, or the Memory Manager's
``UnexpectedAdmissionError``) or admitted, and then on which NUMA zones it put the container's
exclusive CPUs, pinned memory and devices (PodResources ``List``). The node's devices come
from a real device plugin (``testkit.deviceplugin``) that the kubelet's device manager calls.

The pods use a RuntimeClass whose handler no runtime has: the kubelet admits them and allocates
their CPUs and memory as for any pod, but never starts a sandbox, which keeps the hundreds of
pods of a run cheap on a small machine. A pod that would not fit the node as a whole (what the
scheduler's NodeResourcesFit checks, not a NUMA question) is not bound; the step says so.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from kubernetes_asyncio import client

from testkit.oracle.cases import Case, Spec
from testkit.oracle.deadline import decision_deadline
from testkit.realnode import (
    NODE_TOLERATION,
    WORKLOAD_IMAGE,
    RealNode,
    RealNodeError,
    add_node,
    get_node,
    remove_node,
    reset_node,
)
from toposched.apis.quantity import parse_quantity
from toposched.exporter import checkpoints
from toposched.exporter.kubeletconfig import load
from toposched.exporter.podresources.client import PodResourcesClient, PodResourcesError
from toposched.exporter.sysfs import read_machine
from toposched.exporter.topology import Inputs, PodUse, build
from toposched.schedhook.placement.kubelet.admission import predict
from toposched.schedhook.placement.kubelet.claims import effective
from toposched.schedhook.placement.model import Pod
from toposched.schedhook.placement.parse import from_nrt, pod_from_spec

NAMESPACE = "toposched-oracle"
RUNTIME_CLASS = "toposched-oracle"
REJECTIONS = ("TopologyAffinityError", "UnexpectedAdmissionError", "SMTAlignmentError")
_DENIED = re.compile(r'"Pod admission denied" podUID="(?P<uid>[^"]+)".* reason="(?P<reason>[^"]*)"')


@dataclass(frozen=True)
class Prediction:
    admit: bool
    reason: str = ""
    zones: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Container (``pod`` in pod scope) -> the NUMA zones predicted for it."""
    nrt: Mapping[str, Any] = field(default_factory=dict)
    """The NRT the prediction was made from."""


@dataclass(frozen=True)
class Observation:
    admit: bool
    reason: str = ""
    message: str = ""
    cpu_zones: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Container -> NUMA zones of its exclusive CPUs (containers without any are absent)."""
    memory_zones: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Container -> NUMA zones of its pinned memory and hugepages (Static Memory Manager)."""
    device_zones: Mapping[str, tuple[tuple[str, tuple[int, ...]], ...]] = field(default_factory=dict)
    """Container -> (resource, NUMA zones) of each device it got (() : the device has no topology)."""


@dataclass(frozen=True)
class Step:
    """A pod of the case: predicted and observed; or skipped (not bound, ``skipped`` says why); or
    predicted only, when the kubelet did not decide on it in time (the case is then not judged)."""

    index: int
    kind: str
    spec: Spec
    prediction: Prediction | None = None
    observation: Observation | None = None
    skipped: str = ""


@dataclass
class CaseRun:
    case: Case
    node: str
    steps: list[Step] = field(default_factory=list)
    error: str = ""
    """Why the case could not run (a node that did not start, a kubelet that died, a cut stream)."""
    not_judged: str = ""
    """Why the case was not judged to its end: the kubelet, alive, did not decide on a pod in time."""
    seconds: float = 0.0

    @property
    def outcome(self) -> Literal["judged", "not judged", "error"]:
        """``error``, ``not judged`` or ``judged``."""
        return "error" if self.error else "not judged" if self.not_judged else "judged"


class UndecidedError(Exception):
    """The kubelet, still running, had not decided on a pod by the deadline (its hint merge on a
    machine of many zones can take longer than any run could wait)."""

    def __init__(self, pod: str, seconds: float, zones: int) -> None:
        super().__init__(f"the kubelet took {seconds:.0f} s and had not decided on pod {pod} ({zones} NUMA zones)")


def bound_pod(name: str, node: str, spec: Spec) -> dict[str, Any]:
    """The pod as created: bound to ``node``, with the workload image and the oracle's RuntimeClass."""
    containers = [{**c, "image": WORKLOAD_IMAGE, "imagePullPolicy": "Never"} for c in spec.get("containers", [])]
    init = [{**c, "image": WORKLOAD_IMAGE, "imagePullPolicy": "Never"} for c in spec.get("initContainers", [])]
    body: dict[str, Any] = {
        "containers": containers,
        "nodeName": node,
        "runtimeClassName": RUNTIME_CLASS,
        "tolerations": [dict(NODE_TOLERATION)],
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }
    if init:
        body["initContainers"] = init
    if "resources" in spec:  # pod-level resources
        body["resources"] = spec["resources"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": body}


async def prepare(api: client.ApiClient) -> None:
    """The namespace and the RuntimeClass the oracle's pods use (idempotent)."""
    core, nodes = client.CoreV1Api(api), client.NodeV1Api(api)
    for create, body in (
        (core.create_namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        (
            nodes.create_runtime_class,
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": RUNTIME_CLASS},
                # No containerd of a real node knows this handler: admitted pods never start.
                "handler": "toposched-oracle-none",
            },
        ),
    ):
        try:
            await create(body)
        except client.ApiException as exc:
            if exc.status != 409:
                raise


def sysfs_view(node: RealNode) -> Path:
    """A /sys for the exporter's reader: the node's generated trees, linked where sysfs has them."""
    fakehost = node.layout.fakehost
    root = node.layout.root / "sysview"
    links = {
        root / "devices" / "system" / "node": fakehost / "node",
        root / "devices" / "system" / "cpu": fakehost / "cpu",
        root / "kernel" / "mm" / "hugepages": fakehost / "hugepages",
    }
    for link, target in links.items():
        if not link.is_symlink():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target)
    return root


class Observer:
    """Runs cases one after another on one real node (created on first use)."""

    def __init__(self, node: str, api: client.ApiClient) -> None:
        self.node_name = node
        self.api = api
        self.core = client.CoreV1Api(api)

    async def run(self, case: Case) -> CaseRun:
        started = time.monotonic()
        run = CaseRun(case, self.node_name)
        try:
            node = await asyncio.to_thread(self._fresh_node, case)
        except (RealNodeError, OSError):
            try:  # once more: a daemon of the node may have lost a race with the machine's load
                node = await asyncio.to_thread(self._fresh_node, case)
            except (RealNodeError, OSError) as exc:
                run.error = f"the node could not start with this case: {exc}"
                run.seconds = time.monotonic() - started
                return run
        resources = PodResourcesClient(node.pod_resources_socket, timeout=10)
        try:
            await self._steps(node, resources, run)
        except UndecidedError as exc:
            run.not_judged = str(exc)
        except (RealNodeError, OSError, client.ApiException, TimeoutError, PodResourcesError) as exc:
            # One node's failure (a dead kubelet, a PodResources stream cut or slow under load) ends this case,
            # not the run.
            run.error = f"{type(exc).__name__}: {exc}"
        finally:
            await resources.close()
            run.seconds = time.monotonic() - started
        return run

    async def _steps(self, node: RealNode, resources: PodResourcesClient, run: CaseRun) -> None:
        """The case's pods one after another, each step added to ``run`` as it is judged."""
        case = run.case
        log = _LogTail(node.layout.logs / "kubelet.log")
        allocatable = await self._node_allocatable()
        admitted: list[Pod] = []
        for index, (kind, spec) in enumerate(zip(case.kinds, case.pods, strict=True)):
            pod = pod_from_spec(spec)
            missing = _does_not_fit(pod, admitted, allocatable)
            if missing:
                run.steps.append(Step(index, kind, spec, skipped=f"does not fit the node: {missing}"))
                continue
            prediction = await self._predict(node, resources, pod, allocatable)
            try:
                observation = await self._observe(node, resources, log, f"c{case.number}-{index}", spec)
            except UndecidedError:
                run.steps.append(Step(index, kind, spec, prediction))  # what toposched said, unanswered
                raise
            run.steps.append(Step(index, kind, spec, prediction, observation))
            if observation.admit:
                admitted.append(pod)

    def _fresh_node(self, case: Case) -> RealNode:
        try:
            get_node(self.node_name)
        except RealNodeError:
            return add_node(self.node_name, case.topology, case.settings, devices=case.devices)
        try:
            return reset_node(self.node_name, case.topology, case.settings, devices=case.devices)
        except RealNodeError:
            remove_node(self.node_name)  # a node that failed to restart is left stopped
            raise

    async def _node_allocatable(self) -> dict[str, Decimal]:
        node = await self.core.read_node(self.node_name)
        return {k: parse_quantity(v) for k, v in (node.status.allocatable or {}).items()}

    async def _predict(
        self, node: RealNode, resources: PodResourcesClient, pod: Pod, allocatable: Mapping[str, Decimal]
    ) -> Prediction:
        machine = read_machine(sysfs_view(node), proc=node.layout.fakehost)
        inputs = Inputs(
            node=node.name,
            machine=machine,
            kubelet=load(node.layout.kubelet_config),
            allocatable=await resources.allocatable(),
            pods=await resources.list_pods(),
            node_allocatable=dict(allocatable),
            checkpoints=checkpoints.read(node.layout.kubelet_root),
        )
        nrt = build(inputs)
        verdict = predict(from_nrt(nrt, allocatable), pod)
        return Prediction(verdict.admit, verdict.reason, dict(verdict.numa), nrt.to_dict())

    async def _observe(
        self, node: RealNode, resources: PodResourcesClient, log: _LogTail, name: str, spec: Spec
    ) -> Observation:
        created = await self.core.create_namespaced_pod(NAMESPACE, bound_pod(name, node.name, spec))
        uid = created.metadata.uid
        zones = len(node.topology.zones)
        asked = time.monotonic()
        deadline = asked + decision_deadline(zones)
        while time.monotonic() < deadline:
            # The kubelet's log says a rejection at once; its status write can lag a resync behind.
            denied = log.denied(uid)
            if denied is not None:
                return Observation(False, denied)
            status = (await self.core.read_namespaced_pod(name, NAMESPACE)).status
            if status.phase == "Failed":
                return Observation(False, status.reason or "", status.message or "")
            if any(c.type in ("Initialized", "PodReadyToStartContainers") for c in status.conditions or []):
                use = next((p for p in await resources.list_pods() if p.name == name), None)
                return _admitted(node, use)
            if not node.kubelet_running():
                raise RealNodeError(f"the kubelet of {node.name} died:\n{node.log_tail()}")
            await asyncio.sleep(0.05)
        raise UndecidedError(name, time.monotonic() - asked, zones)


def _admitted(node: RealNode, use: PodUse | None) -> Observation:
    cpu: dict[str, tuple[int, ...]] = {}
    memory: dict[str, tuple[int, ...]] = {}
    devices: dict[str, tuple[tuple[str, tuple[int, ...]], ...]] = {}
    for container in use.containers if use is not None else ():
        if container.cpu_ids:
            cpu[container.name] = tuple(sorted({node.topology.zone_of_cpu(c) for c in container.cpu_ids}))
        pinned = sorted({n for block in container.memory for n in block.numa})
        if pinned:
            memory[container.name] = tuple(pinned)
        attached: dict[tuple[str, str], set[int]] = {}  # listed once per NUMA node of the device
        for d in container.devices:
            for device_id in d.ids:
                attached.setdefault((d.resource, device_id), set()).update(d.numa)
        if attached:
            devices[container.name] = tuple(sorted((r, tuple(sorted(z))) for (r, _), z in attached.items()))
    return Observation(True, cpu_zones=cpu, memory_zones=memory, device_zones=devices)


def _does_not_fit(pod: Pod, admitted: Sequence[Pod], allocatable: Mapping[str, Decimal]) -> str:
    """What NodeResourcesFit would say of the pod on this node ("" when it fits)."""
    used: dict[str, Decimal] = {}
    for other in admitted:
        for resource, amount in effective(other).items():
            used[resource] = used.get(resource, Decimal(0)) + amount
    if Decimal(len(admitted) + 1) > allocatable.get("pods", Decimal(110)):
        return "pods"
    for resource, amount in effective(pod).items():
        if amount > 0 and used.get(resource, Decimal(0)) + amount > allocatable.get(resource, Decimal(0)):
            return (
                f"{resource} {amount} requested, {allocatable.get(resource, Decimal(0)) - used.get(resource, 0)} left"
            )
    return ""


class _LogTail:
    """The kubelet's admission rejections, read from its log as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0
        self.rejected: dict[str, str] = {}

    def denied(self, uid: str) -> str | None:
        if uid not in self.rejected and self.path.exists():
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
            end = chunk.rfind(b"\n") + 1  # a line still being written is read next time
            self.offset += end
            for line in chunk[:end].decode(errors="replace").splitlines():
                match = _DENIED.search(line)
                if match:
                    self.rejected[match["uid"]] = match["reason"]
        return self.rejected.get(uid)
