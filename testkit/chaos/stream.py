"""A steady stream of pods through toposched, and what became of each.

Every ``interval`` seconds one pod, in turn for the real nodes (Guaranteed, 1-3 exclusive CPUs:
their kubelets judge them) and for the kwok nodes (Burstable, nothing exclusive). A pod runs for
``lifetime`` seconds and is deleted; one its kubelet rejects is counted and deleted at once; one
left unbound for ``patience`` seconds is deleted too. A watch of the namespace says where each pod
went, whether the extender predicted its NUMA zones (the annotation it writes at bind) and what its
kubelet decided.

A pod that needs exclusive CPUs and was bound without predicted zones was passed on a node the
extender could not see into: a *blind pass*. Without kwok labels every pod is for the real nodes,
which ``nodes`` may narrow mid-run (to those a fault will spare); given ``zones``, the NUMA zones
its kubelet gave each running pod are held against those predicted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kubernetes_asyncio import client

from testkit.builders import KWOK_TOLERATION, pod_body
from testkit.realnode import NODE_LABEL, workload_pod
from toposched.apis.constants import NUMA_ZONES_ANNOTATION, REQUEUED_AT_ANNOTATION
from toposched.kube.watch import follow

logger = logging.getLogger(__name__)
TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"
HOSTNAME = "kubernetes.io/hostname"


@dataclass
class Record:
    name: str
    exclusive: bool
    """For a real node (Guaranteed, exclusive CPUs)."""
    created: float
    """When it was created (monotonic)."""
    node: str | None = None
    bound: float | None = None
    """When the watch first showed it bound (monotonic)."""
    predicted: str | None = None
    """The NUMA zones the extender predicted, as its bind annotation records them (None: none)."""
    verdict: str = "pending"
    """``running``, the reason its kubelet rejected it (``TopologyAffinityError``...), or ``pending``."""
    running_since: float | None = None
    deleted: bool = False
    message: str = ""
    """Its kubelet's message when it rejected it."""
    actual: list[str] | None = None
    """The NUMA zones its kubelet gave it, once running (with the stream's ``zones``)."""
    rebound: str | None = None
    """Another node the watch showed it on after the first (never, unless bound twice)."""
    woken: bool = False
    """The extender woke it after refusing it (it carries the requeued-at annotation)."""


@dataclass
class Stream:
    api: client.ApiClient
    namespace: str
    scheduler: str
    kwok_labels: dict[str, str] | None
    """None: every pod for the real nodes."""
    seed: int
    interval: float = 2.0
    lifetime: float = 30.0
    patience: float = 120.0
    cpus: tuple[int, ...] = (1, 1, 2, 2, 3)
    """The exclusive CPUs of a pod for the real nodes, drawn from these."""
    nodes: list[str] | None = None
    """The real nodes the next pods may go to (None: any)."""
    zones: Callable[[str, str], list[str] | None] | None = None
    """(node, pod uid) -> the NUMA zones the node's kubelet gave the pod (None: not known)."""
    force: bool = True
    """Delete pods at once (grace 0); False: as a user would, so that a pod is gone only once its
    kubelet has stopped it and freed its CPUs."""
    pods: dict[str, Record] = field(default_factory=dict)
    create_failures: int = 0

    def _body(self, name: str, exclusive: bool, rng: random.Random) -> dict[str, Any]:
        if exclusive:
            body = workload_pod(name, cpu=rng.choice(self.cpus), memory="128Mi")
            body["spec"]["nodeSelector"] = {NODE_LABEL: "true"}
            if self.nodes is not None:
                term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": list(self.nodes)}]}
                required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
                body["spec"]["affinity"] = {"nodeAffinity": required}
        else:
            body = pod_body(
                name,
                cpu="100m",
                memory="64Mi",
                guaranteed=False,
                node_selector=self.kwok_labels,
                tolerations=[KWOK_TOLERATION],
                image="example.invalid/app:1",
            )
        body["spec"]["schedulerName"] = self.scheduler
        body["spec"]["terminationGracePeriodSeconds"] = 0
        return body

    async def run(self, stop: asyncio.Event, settle: float = 30.0) -> None:
        """Create pods and delete the ones done until ``stop`` is set; then, for up to ``settle``
        seconds more, until every pod is bound and its kubelet has decided (deleting those done)."""
        rng = random.Random(self.seed)
        core = client.CoreV1Api(self.api)
        watching = asyncio.create_task(self._watch())
        count = 0
        try:
            while not stop.is_set():
                name = f"s-{count:05d}"
                exclusive = count % 2 == 0 or self.kwok_labels is None
                try:
                    await core.create_namespaced_pod(self.namespace, self._body(name, exclusive, rng))
                    self.pods[name] = Record(name, exclusive, time.monotonic())
                except Exception as exc:  # the apiserver away: the stream goes on without this pod
                    self.create_failures += 1
                    logger.debug("pod %s not created: %s", name, exc)
                count += 1
                await self._delete_done(core)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval)
            ends = time.monotonic() + settle
            while time.monotonic() < ends and self.unsettled():
                await self._delete_done(core)
                await asyncio.sleep(0.5)
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)

    async def _delete_done(self, core: client.CoreV1Api) -> None:
        now = time.monotonic()
        for record in self.pods.values():
            done = (
                (record.running_since is not None and now - record.running_since > self.lifetime)
                or record.verdict not in ("pending", "running")
                or (record.node is None and now - record.created > self.patience)
            )
            if done and not record.deleted:
                try:
                    grace = 0 if self.force else None
                    await core.delete_namespaced_pod(record.name, self.namespace, grace_period_seconds=grace)
                    record.deleted = True
                except client.ApiException as exc:
                    record.deleted = exc.status == 404
                except Exception as exc:  # the apiserver away: next time
                    logger.debug("pod %s not deleted yet: %s", record.name, exc)

    async def _watch(self) -> None:
        lister = partial(client.CoreV1Api(self.api).list_namespaced_pod, self.namespace)
        await follow(lister, self._listed, lambda _, obj: self._seen(obj), "pods")

    def _listed(self, items: list[dict[str, Any]]) -> None:
        for item in items:
            self._seen(item)

    def _seen(self, pod: dict[str, Any]) -> None:
        record = self.pods.get(pod["metadata"]["name"])
        if record is None:
            return
        node = (pod.get("spec") or {}).get("nodeName")
        record.woken = record.woken or REQUEUED_AT_ANNOTATION in (pod["metadata"].get("annotations") or {})
        if node and record.node is None:
            record.node, record.bound = node, time.monotonic()
            record.predicted = (pod["metadata"].get("annotations") or {}).get(NUMA_ZONES_ANNOTATION)
        elif node and node != record.node:
            record.rebound = node
        status = pod.get("status") or {}
        if status.get("phase") == "Running" and record.running_since is None:
            record.verdict, record.running_since = "running", time.monotonic()
            if self.zones is not None and record.node:
                record.actual = self.zones(record.node, pod["metadata"]["uid"])
        elif status.get("phase") == "Failed" and record.verdict == "pending":
            record.verdict = str(status.get("reason") or "Failed")
            record.message = str(status.get("message") or "")

    def unsettled(self) -> bool:
        """Some pod is bound and its kubelet has not decided yet, or is not bound yet."""
        return any(r.verdict == "pending" and (r.node or not r.deleted) for r in self.pods.values())

    def last_bound_before(self, at: float) -> float | None:
        """When (monotonic) the last bind before ``at`` was seen (None: none)."""
        return max((r.bound for r in self.pods.values() if r.bound is not None and r.bound <= at), default=None)

    def first_bound_after(self, at: float) -> float | None:
        """Seconds from ``at`` (monotonic) to the first bind after it (None: none)."""
        after = [r.bound - at for r in self.pods.values() if r.bound is not None and r.bound > at]
        return min(after, default=None)

    def tally(self, began: float) -> dict[str, Any]:
        """The figures of the stream; ``began`` (monotonic) is when the run began."""
        records = list(self.pods.values())
        rejected: dict[str, int] = {}
        for r in records:
            if r.verdict not in ("pending", "running"):
                rejected[r.verdict] = rejected.get(r.verdict, 0) + 1
        return {
            "created": len(records),
            "createFailures": self.create_failures,
            "placed": sum(1 for r in records if r.node is not None),
            "running": sum(1 for r in records if r.running_since is not None),
            "topologyAffinityErrors": rejected.get(TOPOLOGY_AFFINITY_ERROR, 0),
            "rejected": rejected,
            "blindPasses": sorted(r.name for r in records if r.exclusive and r.node is not None and not r.predicted),
            "neverPlaced": sum(1 for r in records if r.node is None),
            "boundTwice": sorted(r.name for r in records if r.rebound),
            "woken": sum(1 for r in records if r.woken),
            "mispredicted": [
                {"pod": r.name, "node": r.node, "predicted": r.predicted, "kubelet": r.actual}
                for r in records
                if r.actual is not None and json.loads(r.predicted or "null") != r.actual
            ],
            "rejectedPods": [
                {"pod": r.name, "node": r.node, "boundAt": round((r.bound or began) - began, 1)}
                | {"reason": r.verdict, "message": r.message, "predicted": r.predicted}
                for r in records
                if r.verdict not in ("pending", "running")
            ],
        }
