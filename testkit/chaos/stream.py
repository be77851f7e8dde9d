"""A steady stream of pods through toposched, and what became of each.

Every ``interval`` seconds one pod, in turn for the real nodes (Guaranteed, 1-3 exclusive CPUs:
their kubelets judge them) and for the kwok nodes (Burstable, nothing exclusive). A pod runs for
``lifetime`` seconds and is deleted; one its kubelet rejects is counted and deleted at once; one
left unbound for ``patience`` seconds is deleted too. A watch of the namespace says where each pod
went, whether the extender predicted its NUMA zones (the annotation it writes at bind) and what its
kubelet decided.

A pod that needs exclusive CPUs and was bound without predicted zones was passed on a node the
extender could not see into: a *blind pass*.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kubernetes_asyncio import client

from testkit.builders import KWOK_TOLERATION, pod_body
from testkit.realnode import NODE_LABEL, workload_pod
from toposched.apis.constants import NUMA_ZONES_ANNOTATION
from toposched.kube.watch import follow

logger = logging.getLogger(__name__)
TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"


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


@dataclass
class Stream:
    api: client.ApiClient
    namespace: str
    scheduler: str
    kwok_labels: dict[str, str]
    seed: int
    interval: float = 2.0
    lifetime: float = 30.0
    patience: float = 120.0
    pods: dict[str, Record] = field(default_factory=dict)
    create_failures: int = 0

    def _body(self, name: str, exclusive: bool, rng: random.Random) -> dict[str, Any]:
        if exclusive:
            body = workload_pod(name, cpu=rng.choice([1, 1, 2, 2, 3]), memory="128Mi")
            body["spec"]["nodeSelector"] = {NODE_LABEL: "true"}
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
        """Create pods and delete the ones done until ``stop`` is set; then follow the pods bound
        for up to ``settle`` seconds more, until their kubelets have decided."""
        rng = random.Random(self.seed)
        core = client.CoreV1Api(self.api)
        watching = asyncio.create_task(self._watch())
        count = 0
        try:
            while not stop.is_set():
                name = f"s-{count:05d}"
                exclusive = count % 2 == 0
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
            while time.monotonic() < ends and self.undecided():  # noqa: ASYNC110 -- the watch sets no event
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
                    await core.delete_namespaced_pod(record.name, self.namespace, grace_period_seconds=0)
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
        if node and record.node is None:
            record.node, record.bound = node, time.monotonic()
            record.predicted = (pod["metadata"].get("annotations") or {}).get(NUMA_ZONES_ANNOTATION)
        status = pod.get("status") or {}
        if status.get("phase") == "Running" and record.running_since is None:
            record.verdict, record.running_since = "running", time.monotonic()
        elif status.get("phase") == "Failed" and record.verdict == "pending":
            record.verdict = str(status.get("reason") or "Failed")
            record.message = str(status.get("message") or "")

    def undecided(self) -> bool:
        """Some pod is bound and its kubelet has not decided yet."""
        return any(r.node and r.verdict == "pending" for r in self.pods.values())

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
            "rejectedPods": [
                {"pod": r.name, "node": r.node, "boundAt": round((r.bound or began) - began, 1)}
                | {"reason": r.verdict, "message": r.message, "predicted": r.predicted}
                for r in records
                if r.verdict not in ("pending", "running")
            ],
        }
