"""Will the kubelet admit this pod on this node? A prediction from the node's NodeResourceTopology.

When the NRT says which resource managers are active (the toposched exporter publishes
cpuManagerPolicy and memoryManagerPolicy), the prediction follows the kubelet: each manager's
claims (``claims``), its hints (``hints``, through ``state.NodeState``), the Topology Manager's
merge (``topologymanager``) in container or pod scope, and the allocations that follow. Without
those attributes (older exporters) it falls back to the upstream NodeResourceTopologyMatch
filter, which is stricter (it treats CPU and memory as NUMA-bound).
"""

from collections.abc import Mapping
from decimal import Decimal

from toposched.apis.kubelet import NONE, POD_SCOPE, SINGLE_NUMA_NODE
from toposched.schedhook.placement.kubelet.claims import (
    BEST_EFFORT_QOS,
    GUARANTEED,
    container_claims,
    effective,
    numa_affine,
    pod_claims,
    qos,
)
from toposched.schedhook.placement.kubelet.reasons import cannot_align, cannot_allocate, shortfall, subject
from toposched.schedhook.placement.kubelet.state import NodeState, RejectedError
from toposched.schedhook.placement.kubelet.topologymanager import Hint, bits, mask, merge
from toposched.schedhook.placement.model import HOST_LEVEL, POD, Container, NodeTopology, Pod, Verdict


def predict(node: NodeTopology, pod: Pod, state: NodeState | None = None) -> Verdict:
    """The kubelet's admission decision for ``pod`` on ``node``, the NUMA nodes it would use, and
    why it would reject it. ``state``: the node's managers as earlier pods admitted through it
    left them (an admitted pod's allocations stay in it; a rejected one leaves it unusable)."""
    if not node.zones:
        return Verdict(True, "no NUMA zones published")
    state = state or NodeState(node)
    if not node.knows_managers:
        return upstream_filter(node, pod, state.pool.free)
    if node.scope == POD_SCOPE and node.policy != NONE:
        return _pod_scope(node, pod, state)
    singles = node.policy == SINGLE_NUMA_NODE  # the policy keeps single-zone hints alone
    distances = node.distances if node.prefer_closest else None
    everything = mask(*node.numa_ids)
    placed: dict[str, tuple[int, ...]] = {}
    for c in (*pod.init_containers, *pod.containers):
        who = subject(pod, c)
        claims = container_claims(pod, c)
        if node.policy == NONE:  # no hints asked for: the managers allocate with an empty, unpreferred hint
            decided = Hint(None, False)
        else:
            decision = merge(state.providers(claims, singles), node.numa_ids, node.policy, distances)
            if not decision.admit:
                return Verdict(False, _misaligned(node, pod, who), placed)
            decided = Hint(decision.affinity, decision.preferred)
        try:
            zones = state.allocate(claims, decided, _reused(pod, c))
        except RejectedError as exc:
            return Verdict(False, cannot_allocate(who, str(exc)), placed)
        if node.policy != NONE:
            placed[c.name] = tuple(sorted(set(bits(decided.affinity or everything)) | set(zones)))
    return Verdict(True, numa=placed)


def _pod_scope(node: NodeTopology, pod: Pod, state: NodeState) -> Verdict:
    """The pod scope: one merge for the pod's summed claims, then each container's allocations."""
    distances = node.distances if node.prefer_closest else None
    decision = merge(
        state.providers(pod_claims(pod), node.policy == SINGLE_NUMA_NODE), node.numa_ids, node.policy, distances
    )
    if not decision.admit:
        return Verdict(False, _misaligned(node, pod, POD))
    used = set(bits(decision.affinity or mask(*node.numa_ids)))
    try:
        for c in (*pod.init_containers, *pod.containers):
            hint = Hint(decision.affinity, decision.preferred)
            used.update(state.allocate(container_claims(pod, c), hint, _reused(pod, c)))
    except RejectedError as exc:
        return Verdict(False, cannot_allocate(POD, str(exc)))
    return Verdict(True, numa={POD: tuple(sorted(used))})


def _reused(pod: Pod, container: Container) -> bool:
    """A regular init container: what it gets waits for the app containers to reuse it."""
    return container in pod.init_containers and not container.sidecar


def _misaligned(node: NodeTopology, pod: Pod, who: str) -> str:
    """Why the Topology Manager rejects ``who`` on ``node``: under single-numa-node, with the first
    request no zone can hold."""
    return cannot_align(who, node.policy, shortfall(pod, node) if node.policy == SINGLE_NUMA_NODE else "")


def upstream_filter(node: NodeTopology, pod: Pod, free: dict[int, dict[str, Decimal]] | None = None) -> Verdict:
    """NodeResourceTopologyMatch's filter: only single-numa-node filters; NUMA-affine requests fit one zone.
    ``free``: the zones' free amounts as earlier pods left them (taken from as this one is placed)."""
    guaranteed = qos(pod) == GUARANTEED
    everything = [*pod.init_containers, *pod.containers]
    if qos(pod) == BEST_EFFORT_QOS and not any(
        not numa_affine(r) and r not in HOST_LEVEL for c in everything for r in c.request
    ):
        return Verdict(True)
    if node.policy != SINGLE_NUMA_NODE:
        return Verdict(True)
    if free is None:
        free = {z.numa: dict(z.available) for z in node.zones}

    def fits(request: Mapping[str, Decimal]) -> int | None:
        candidates = set(free)
        for resource, amount in request.items():
            if amount <= 0:
                continue
            if node.node_allocatable and resource not in node.node_allocatable:
                return None
            reporting = {n for n, z in free.items() if resource in z}
            if not reporting:
                if resource in HOST_LEVEL or not numa_affine(resource):
                    continue
                return None
            relaxed = not guaranteed and numa_affine(resource)
            candidates &= {n for n in reporting if relaxed or free[n][resource] >= amount}
            if not candidates:
                return None
        return min(candidates) if candidates else None

    if node.scope == POD_SCOPE:
        chosen = fits(effective(pod))
        return (
            Verdict(True, numa={POD: (chosen,)}) if chosen is not None else Verdict(False, _misaligned(node, pod, POD))
        )
    placed: dict[str, tuple[int, ...]] = {}
    for c in everything:
        chosen = fits(c.request)
        if chosen is None:
            return Verdict(False, _misaligned(node, pod, subject(pod, c)), placed)
        placed[c.name] = (chosen,)
        if c in pod.init_containers:
            continue
        for resource, amount in c.request.items():
            if resource in free[chosen] and not (not guaranteed and numa_affine(resource)):
                free[chosen][resource] -= amount
    return Verdict(True, numa=placed)
