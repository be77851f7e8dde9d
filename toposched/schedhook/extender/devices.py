"""DRA devices in the extender: the allocator's pick predicted per node at filter, checked against
the claim's allocation at bind.

kube-scheduler allocates a pod's ResourceClaims in its Filter, before it calls the extender, and
writes the allocation in PreBind, before the extender's bind. So the filter asks the allocator
the scheduler links (``allocatorproc``) which devices it picks on each candidate node and judges
them against the zones predicted for the pod's pinned CPUs (``placement.dra``); the bind reads
what was written and refuses a misaligned allocation, deallocating the claim where the scheduler
would leave it stuck (a cluster of one node).

The pick itself is predicted by ``devicepicks``. A node's verdict is kept while the helper's
answer for it, the CPU zones and the devices' zones stay the same: a workload's pods ask the same
of thousands of nodes, and between two of them one node changes.
"""

import asyncio
import logging
from collections import Counter as Tally
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

import aiohttp
import numpy as np
import orjson
from prometheus_client import Counter

from toposched.apis.constants import DRA_ALIGNMENT_ANNOTATION
from toposched.apis.kubelet import POLICIES
from toposched.apis.resourceslice import RESOURCE_GROUP, RESOURCE_VERSION
from toposched.kube import rest
from toposched.schedhook.extender.allocatorproc import AllocatorProcess, NodePick
from toposched.schedhook.extender.devicepicks import PickPredictor, PodPicks
from toposched.schedhook.extender.eventsink import EventSink
from toposched.schedhook.extender.store import ObjectStore
from toposched.schedhook.placement.dra import (
    ALIGNED,
    AUTO,
    MISALIGNED,
    PREFER,
    STRICT,
    UNKNOWN,
    UNPINNED,
    Alignment,
    ClaimRef,
    DeviceVerdict,
    Pick,
    allocation_picks,
    check_mode,
    cpu_zones,
    judge,
    judge_devices,
    mode_of,
    pins_cpus,
    pod_claims,
)
from toposched.schedhook.placement.evaluate import Results
from toposched.schedhook.placement.model import NodeTopology

logger = logging.getLogger(__name__)

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
    pins: bool = False
    """Does the pod get exclusive CPUs (``pins_cpus``)?"""
    nrts: Mapping[str, NodeTopology] = field(default_factory=dict)
    """The nodes as the filter saw them (the snapshot's, not copied)."""


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
        self.predictor = PickPredictor(store, allocator or AllocatorProcess(), timeout)
        self.zones = self.predictor.zones
        self._verdicts: dict[str, tuple[NodePick, list[int] | None, int, DeviceVerdict]] = {}
        """Node -> the verdict of an answer of the helper's for some CPU zones and zones generation:
        a workload's next pod gets the same answer on all nodes but one."""
        self._asked: OrderedDict[str, Asked] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    async def close(self) -> None:
        await self.predictor.allocator.close()

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
        fitting = np.flatnonzero(results.fit).tolist()
        found = await self.predictor.predict(namespace, refs, [results.names[i] for i in fitting])
        if found.unknown:  # the nodes pass: said here, in the verdicts metric and by explain
            logger.info("pod %s/%s: DRA devices unknown on every node: %s", namespace, meta.get("name"), found.unknown)
        asked.pins, asked.nrts = pins_cpus(results.pod), nrts
        modes = {policy: mode_of(annotation, self.default_mode, policy) for policy in (*POLICIES, "")}
        unknown = DeviceVerdict(UNKNOWN, -1, found.failure())
        said: dict[int, DeviceVerdict] = {}
        zones = results.numa_zone.tolist()  # the columnar path's zone, -1 elsewhere
        for i in fitting:  # thousands of nodes a call: the per-node work is kept to look-ups
            name = results.names[i]
            predicted = [zones[i]] if zones[i] >= 0 else results.numa_ids(i)
            cpus = cpu_zones(asked.pins, nrts.get(name), predicted)
            said[i] = self._verdict(found, name, cpus) or unknown
        self._apply(results, found, said, modes, nrts)

    def _apply(
        self,
        results: Results,
        found: PodPicks,
        said: Mapping[int, DeviceVerdict],
        modes: Mapping[str, str],
        nrts: Mapping[str, NodeTopology],
    ) -> None:
        """Record each node's verdict, fail the misaligned nodes that apply strict and score lowest
        those that apply prefer."""
        counts = Tally(v.verdict for v in said.values())
        for kind, count in counts.items():
            PREDICTIONS.labels(kind).inc(count)
        aligned = {v: Alignment(v) for v in (ALIGNED, UNPINNED)}
        failing: list[int] = []
        reasons: list[str] = []
        for i, verdict in said.items():
            if verdict.verdict in aligned:
                results.devices[i] = aligned[verdict.verdict]
                continue
            name = results.names[i]
            reason = verdict.reason(partial(found.describe, name))
            results.devices[i] = Alignment(verdict.verdict, reason)
            nrt = nrts.get(name)
            mode = modes.get(nrt.policy if nrt is not None else "", STRICT)
            if verdict.verdict == MISALIGNED and mode == STRICT:
                failing.append(i)
                reasons.append(reason)
            elif verdict.verdict == MISALIGNED and mode == PREFER:
                results.score[i] = 0
        if failing:
            results.fail_many(np.array(failing, dtype=np.int64), reasons, np.arange(len(failing), dtype=np.int64))

    def _verdict(self, found: PodPicks, node: str, cpus: list[int] | None) -> DeviceVerdict | None:
        """``judge_devices`` of the node's devices (None: not known), from the verdict kept for the
        node when the helper's answer, the CPU zones and the devices' zones are the ones it was for."""
        answer = found.answers.get(node) if found.answers is not None and not found.fixed else None
        if answer is None or answer.error or answer.unsuitable:
            picks = found.of(node)
            if picks is None:
                return None
            return judge_devices([(p.driver, p.pool, p.device) for p in picks], self.zones, cpus)
        kept = self._verdicts.get(node)
        if kept is not None and kept[0] is answer and kept[1] == cpus and kept[2] == self.zones.generation:
            return kept[3]
        verdict = judge_devices([(d[2], d[3], d[4]) for d in answer.devices], self.zones, cpus)
        self._verdicts[node] = (answer, cpus, self.zones.generation, verdict)
        return verdict

    async def picks(
        self,
        namespace: str,
        refs: Sequence[ClaimRef],
        nodes: Sequence[str],
        left_out: dict[str, NodePick] | None = None,
    ) -> tuple[dict[str, list[Pick]], str]:
        """Per node, the devices the pod's claims (``pod_claims``) get there: those allocated
        already, then the allocator's pick for the others. A node the claims do not fit, or where
        the allocator fails, is left out (with its answer, into ``left_out`` when given); when
        nothing is known, why (else "")."""
        found = await self.predictor.predict(namespace, refs, nodes)
        picks: dict[str, list[Pick]] = {}
        for node in nodes:
            devices = found.of(node)
            if devices is not None:
                picks[node] = devices
            elif left_out is not None and not found.unknown:
                left_out[node] = found.answer(node)
        return picks, found.unknown

    def _remember(self, uid: str, asked: Asked) -> Asked:
        self._asked[uid] = asked
        self._asked.move_to_end(uid)
        while len(self._asked) > KEEP_PODS:
            self._asked.popitem(last=False)
        return asked

    # -- bind -----------------------------------------------------------------------------------

    async def check_bind(self, uid: str, name: str, node: str, numa: Sequence[int]) -> str:
        """Why the pod's bind to ``node`` must be refused ("" to go on): the allocation written for
        its claims lies off ``numa``, the zones predicted for its CPUs, where the node applies strict."""
        asked = self._asked.pop(uid, None)
        if asked is None or self.api is None:
            return ""
        nrt = asked.nrts.get(node)
        if mode_of(asked.annotation, self.default_mode, nrt.policy if nrt is not None else "") != STRICT:
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
        verdict = judge(picks, self.zones, cpu_zones(asked.pins, nrt, numa))
        if verdict.verdict != MISALIGNED:
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
