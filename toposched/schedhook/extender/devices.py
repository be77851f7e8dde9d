"""DRA devices in the extender: the allocator's pick predicted per node at filter, checked against
the claim's allocation at bind.

kube-scheduler allocates a pod's ResourceClaims in its Filter, before it calls the extender, and
writes the allocation in PreBind, before the extender's bind. So the filter asks the allocator
the scheduler links (``allocatorproc``) which devices it picks on each candidate node and judges
them against the zones predicted for the pod's pinned CPUs (``placement.dra``); the bind reads
what was written and refuses a misaligned allocation, deallocating the claim where the scheduler
would leave it stuck (a cluster of one node).

The slices, device classes and claims come from the store's watches; they are sent to the helper
as they change, at the next pod with claims. A cluster without ``resource.k8s.io`` has none, and
its pods have no claims.
"""

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import aiohttp
import orjson
from prometheus_client import Counter

from toposched.apis.constants import DRA_ALIGNMENT_ANNOTATION
from toposched.apis.resourceslice import RESOURCE_GROUP, RESOURCE_VERSION
from toposched.kube import rest
from toposched.schedhook.extender.allocatorproc import AllocatorGoneError, AllocatorProcess, NodePick
from toposched.schedhook.extender.eventsink import EventSink
from toposched.schedhook.extender.store import DRA_KINDS, ObjectStore, key_name, store_key
from toposched.schedhook.placement.dra import (
    AUTO,
    MISALIGNED,
    OFF,
    STRICT,
    UNKNOWN,
    Alignment,
    ClaimRef,
    DeviceZones,
    Pick,
    allocated_nodes,
    allocation_picks,
    check_mode,
    cpu_zones,
    judge,
    mode_of,
    pod_claims,
)
from toposched.schedhook.placement.evaluate import Results
from toposched.schedhook.placement.model import NodeTopology

logger = logging.getLogger(__name__)

HELPER_KINDS: Final = {
    "resourceslices": "ResourceSlice",
    "deviceclasses": "DeviceClass",
    "resourceclaims": "ResourceClaim",
}
KEEP_PODS: Final = 1024
"""Pods filtered and not bound yet whose claims the bind checks."""

PREDICTIONS = Counter(
    "toposched_extender_dra_predictions_total",
    "Candidate nodes of pods with ResourceClaims, by how the devices predicted there lie against the pod's "
    "pinned CPUs (aligned, misaligned, unknown, unpinned).",
    ["verdict"],
)
REFUSED = Counter(
    "toposched_extender_dra_binds_refused_total",
    "Binds refused because the claim's allocation lies off the NUMA zones predicted for the pod's CPUs.",
)
DEALLOCATED = Counter(
    "toposched_extender_dra_claims_deallocated_total",
    "Claims of refused binds whose allocation the extender cleared (the scheduler leaves it on one-node clusters).",
)


@dataclass
class Asked:
    """What a pod's filter found of its claims, for its bind."""

    namespace: str
    refs: list[ClaimRef]
    annotation: str | None
    modes: dict[str, str] = field(default_factory=dict)
    """Node -> the alignment it applies to the pod."""
    cpus: dict[str, list[int] | None] = field(default_factory=dict)
    """Node -> the zones predicted for the pod's pinned CPUs there (``cpu_zones``)."""


class Devices:
    def __init__(
        self,
        store: ObjectStore,
        api: rest.Kube | None,
        events: EventSink,
        default_mode: str = AUTO,
        allocator: AllocatorProcess | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.store = store
        self.api = api
        self.events = events
        self.default_mode = default_mode
        self.allocator = allocator or AllocatorProcess()
        self.timeout = timeout
        self.zones = DeviceZones()
        self._changes = store.changes(DRA_KINDS)
        self._generation = 0
        self._asked: OrderedDict[str, Asked] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    async def close(self) -> None:
        await self.allocator.close()

    # -- filter ---------------------------------------------------------------------------------

    async def align(self, pod: Mapping[str, Any], uid: str, results: Results, nrts: Mapping[str, NodeTopology]) -> None:
        """Judge the devices the scheduler picks on each node still fitting: a misaligned node fails
        (strict) or scores lowest (prefer); what is unknown is said and never called aligned."""
        refs = pod_claims(pod)
        if not refs or results.pod_error is not None:
            return
        meta = pod.get("metadata") or {}
        annotation = (meta.get("annotations") or {}).get(DRA_ALIGNMENT_ANNOTATION)
        if (bad := check_mode(annotation)) is not None:
            results.fail_all(f"invalid {DRA_ALIGNMENT_ANNOTATION}: {bad}")
            return
        namespace = meta.get("namespace", "")
        asked = self._remember(uid, Asked(namespace, refs, annotation))
        fitting = [i for i in range(len(results.names)) if results.fit[i]]
        picks, unknown = await self.picks(namespace, refs, [results.names[i] for i in fitting])
        for i in fitting:
            name = results.names[i]
            nrt = nrts.get(name)
            mode = mode_of(annotation, self.default_mode, nrt.policy if nrt is not None else "")
            asked.modes[name] = mode
            cpus = asked.cpus[name] = cpu_zones(results.pod, nrt, results.numa_ids(i))
            found = picks.get(name)
            verdict = Alignment(UNKNOWN, unknown) if found is None else judge(found, self.zones, cpus)
            PREDICTIONS.labels(verdict.verdict).inc()
            results.devices[i] = verdict
            if verdict.verdict == MISALIGNED and mode == STRICT:
                results.fail(i, verdict.reason)
            elif verdict.verdict == MISALIGNED and mode != OFF:
                results.score[i] = 0

    async def picks(
        self,
        namespace: str,
        refs: Sequence[ClaimRef],
        nodes: Sequence[str],
        left_out: dict[str, NodePick] | None = None,
    ) -> tuple[dict[str, list[Pick]], str]:
        """Per node, the devices the pod's claims (``pod_claims``) get there: those allocated
        already, then the allocator's pick for the others. A node the claims do not fit, or where
        the allocator fails, is left out (with the allocator's answer there, into ``left_out`` when
        given); when nothing is known, why."""
        if not all(self.store.has_listed(k) for k in DRA_KINDS):
            return {}, "DRA objects not listed yet (resource.k8s.io/v1 served? the extender allowed to list it?)"
        claims: list[dict[str, Any]] = []
        for ref in refs:
            claim = self.store.objects["resourceclaims"].get(store_key(namespace, ref.claim or ""))
            if claim is None:
                return {}, f"claim {ref.name} of the pod: {'not created yet' if ref.claim is None else 'not seen yet'}"
            claims.append(claim)
        fixed = [p for c in claims for p in allocation_picks(c) or ()]
        todo = [c for c in claims if allocation_picks(c) is None]
        answers = dict.fromkeys(nodes, NodePick())
        if todo:
            try:
                await self.sync()
                answers = await self.allocator.allocate(todo, nodes, per_node=self.timeout)
            except (AllocatorGoneError, ValueError, TimeoutError, OSError) as exc:
                logger.warning("DRA allocator: %s", exc)
                return {}, f"the DRA allocator did not answer ({exc})"
        keys = [f"{namespace}/{c['metadata']['name']}" for c in todo]
        allowed = [a for c in claims if allocation_picks(c) is not None and (a := allocated_nodes(c)) is not None]
        found = {}
        for node, answer in answers.items():
            # The scheduler allocates on a node before it checks that the pod's allocated claims can
            # be used there: an error there still aborts it.
            if not answer.error and not answer.unsuitable and not all(node in names for names in allowed):
                answer = NodePick(unsuitable=True, error="a claim of the pod is allocated for another node")
            if answer.error or answer.unsuitable:  # unsuitable without an error: the claims do not fit
                if left_out is not None:
                    left_out[node] = answer
            else:
                found[node] = [*fixed, *_picked(answer, keys)]
        return found, ""

    async def sync(self) -> None:
        """Send the helper what changed in the store since the last call (everything after it started)."""
        restarted = await self.allocator.ensure()
        taken = self._changes.take()
        for kind, model in HELPER_KINDS.items():
            objects = self.store.objects[kind]
            changed = taken[kind]
            if restarted or changed is None:
                if kind == "resourceslices":
                    self.zones.clear()
                keys: set[str] | Sequence[str] = list(objects)
            else:
                keys = changed
            for key in keys:
                obj = objects.get(key)
                name = key_name(key) if kind != "resourceclaims" else key
                if obj is None:
                    self.allocator.delete(model, name)
                    if kind == "resourceslices":
                        self.zones.delete(key)
                    continue
                self.allocator.put(model, obj)
                if kind == "resourceslices":
                    self.zones.put(key, obj)

    def _remember(self, uid: str, asked: Asked) -> Asked:
        self._asked[uid] = asked
        self._asked.move_to_end(uid)
        while len(self._asked) > KEEP_PODS:
            self._asked.popitem(last=False)
        return asked

    # -- bind -----------------------------------------------------------------------------------

    async def check_bind(self, uid: str, name: str, node: str) -> str:
        """Why the pod's bind to ``node`` must be refused ("" to go on): the allocation written for
        its claims lies off the zones predicted for its CPUs, where the node applies strict."""
        asked = self._asked.pop(uid, None)
        if asked is None or self.api is None:
            return ""
        claims = []
        for ref in asked.refs:
            if ref.claim is None:
                continue
            try:
                claim = await self.api.get(
                    rest.path(RESOURCE_GROUP, RESOURCE_VERSION, "resourceclaims", asked.namespace, ref.claim)
                )
            except (rest.ApiError, aiohttp.ClientError, OSError, TimeoutError, orjson.JSONDecodeError) as exc:
                logger.warning("bind of %s/%s: cannot read claim %s (%s)", asked.namespace, name, ref.claim, exc)
                continue
            claims.append(claim)
            self.store.event("resourceclaims", "MODIFIED", claim)  # the next pods see it taken now
        picks = [p for c in claims for p in allocation_picks(c) or ()]
        verdict = judge(picks, self.zones, asked.cpus.get(node))
        if verdict.verdict != MISALIGNED or asked.modes.get(node, STRICT) != STRICT:
            return ""
        REFUSED.inc()
        why = f"DRA devices off the pod's CPUs: {verdict.reason}"
        self.events.pod(asked.namespace, name, uid, "DRADevicesMisaligned", f"bind to {node} refused: {why}")
        for claim in claims:
            self._later(self._deallocate(claim, uid))
        return why

    def _later(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deallocate(self, claim: dict[str, Any], uid: str, wait: float = 30.0) -> None:
        """Clear the refused allocation once the scheduler has taken the pod out of ``reservedFor``
        (as its PostFilter does on clusters of more than one node), unless it is used or changed."""
        assert self.api is not None
        meta = claim["metadata"]
        path = rest.path(RESOURCE_GROUP, RESOURCE_VERSION, "resourceclaims", meta["namespace"], meta["name"])
        allocation = (claim.get("status") or {}).get("allocation")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while loop.time() < deadline:
            await asyncio.sleep(0.5)
            try:
                current = await self.api.get(path)
                status = current.get("status") or {}
                if status.get("allocation") != allocation:
                    return  # deallocated or allocated anew by someone else
                if any(r.get("uid") == uid for r in status.get("reservedFor") or ()):
                    continue  # the scheduler has not unreserved it yet
                if status.get("reservedFor"):
                    return  # another pod uses it
                current["status"] = {k: v for k, v in status.items() if k not in ("allocation", "reservedFor")}
                await self.api.replace(path + "/status", current)
            except (rest.ApiError, aiohttp.ClientError, OSError, TimeoutError, orjson.JSONDecodeError) as exc:
                logger.warning("claim %s/%s: not deallocated (%s)", meta["namespace"], meta["name"], exc)
                return
            DEALLOCATED.inc()
            logger.info("claim %s/%s: deallocated after a refused bind", meta["namespace"], meta["name"])
            return


def _picked(answer: NodePick, keys: Sequence[str]) -> list[Pick]:
    return [Pick(keys[c], request, driver, pool, device) for c, request, driver, pool, device in answer.devices]
