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

from toposched.schedhook.placement.kubelet.claims import (
    STATIC_CPU,
    STATIC_MEMORY,
    container_claims,
    pod_claims,
)
from toposched.schedhook.placement.kubelet.state import NodeState, RejectedError
from toposched.schedhook.placement.kubelet.topologymanager import NONE, SINGLE_NUMA_NODE, Hint, bits, mask, merge
from toposched.schedhook.placement.model import (
    HOST_LEVEL,
    Container,
    NodeTopology,
    Pod,
    Verdict,
    container_request,
    numa_affine,
)


def predict(node: NodeTopology, pod: Pod) -> Verdict:
    """The kubelet's admission decision for ``pod`` on ``node`` and the NUMA nodes it would use."""
    if not node.zones:
        return Verdict(True, "no NUMA zones published")
    if not node.knows_managers:
        return upstream_filter(node, pod)
    state = NodeState(node)
    singles = node.policy == SINGLE_NUMA_NODE  # the policy keeps single-zone hints alone
    distances = node.distances if node.prefer_closest else None
    everything = mask(*node.numa_ids)
    placed: dict[str, tuple[int, ...]] = {}
    if node.scope == "pod" and node.policy != NONE:
        decision = merge(
            state.providers(pod_claims(pod), singles),
            node.numa_ids,
            node.policy,
            distances,
        )
        if not decision.admit:
            return Verdict(False, "cannot align pod")
        used = set(bits(decision.affinity or everything))
        try:
            for c in (*pod.init_containers, *pod.containers):
                used.update(_allocate(state, pod, c, Hint(decision.affinity, decision.preferred)))
        except RejectedError as exc:
            return Verdict(False, f"cannot allocate for pod: {exc}")
        return Verdict(True, numa={"pod": tuple(sorted(used))})
    for c in (*pod.init_containers, *pod.containers):
        what = ("sidecar" if c.sidecar else "init") if c in pod.init_containers else ""
        name = f"{what} container {c.name}".strip()
        if node.policy == NONE:  # no hints asked for: the managers allocate with an empty, unpreferred hint
            decided = Hint(None, False)
        else:
            decision = merge(
                state.providers(container_claims(pod, c), singles),
                node.numa_ids,
                node.policy,
                distances,
            )
            if not decision.admit:
                return Verdict(False, f"cannot align {name}", placed)
            decided = Hint(decision.affinity, decision.preferred)
        try:
            zones = _allocate(state, pod, c, decided)
        except RejectedError as exc:
            return Verdict(False, f"cannot allocate for {name}: {exc}", placed)
        if node.policy != NONE:
            placed[c.name] = tuple(sorted(set(bits(decided.affinity or everything)) | set(zones)))
    return Verdict(True, numa=placed)


def _allocate(state: NodeState, pod: Pod, container: Container, decided: Hint) -> set[int]:
    """What the resource managers hand out exclusively to one container leaves the zones; returns
    the zones it actually got (the aligned mask may not hold all its CPUs: the rest spills over)."""
    node = state.node
    init = container in pod.init_containers and not container.sidecar
    zones: set[int] = set()
    claims = container_claims(pod, container)
    if node.cpu_manager == STATIC_CPU and claims.cpus:
        state.check_smt_alignment(claims.cpus)
        zones.update(state.take_cpus(claims.cpus, decided.affinity, init))
    if node.memory_manager == STATIC_MEMORY and claims.memory:
        zones.update(bits(state.take_memory(claims.memory, decided, init)))
    zones.update(state.take_devices(claims.devices, decided.affinity, init))
    return zones


def upstream_filter(node: NodeTopology, pod: Pod) -> Verdict:
    """NodeResourceTopologyMatch's filter: only single-numa-node filters; NUMA-affine requests fit one zone."""
    qos = pod.qos
    everything = [*pod.init_containers, *pod.containers]
    if qos == "BestEffort" and not any(
        not numa_affine(r) and r not in HOST_LEVEL for c in everything for r in container_request(c)
    ):
        return Verdict(True)
    if node.policy != SINGLE_NUMA_NODE:
        return Verdict(True)
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
            relaxed = qos != "Guaranteed" and numa_affine(resource)
            candidates &= {n for n in reporting if relaxed or free[n][resource] >= amount}
            if not candidates:
                return None
        return min(candidates) if candidates else None

    if node.scope == "pod":
        chosen = fits(pod.effective())
        return Verdict(True, numa={"pod": (chosen,)}) if chosen is not None else Verdict(False, "cannot align pod")
    placed: dict[str, tuple[int, ...]] = {}
    for c in pod.init_containers:
        chosen = fits(container_request(c))
        if chosen is None:
            kind = "sidecar" if c.sidecar else "init"
            return Verdict(False, f"cannot align {kind} container {c.name}", placed)
        placed[c.name] = (chosen,)
    for c in pod.containers:
        request = container_request(c)
        chosen = fits(request)
        if chosen is None:
            return Verdict(False, f"cannot align container {c.name}", placed)
        placed[c.name] = (chosen,)
        for resource, amount in request.items():
            if resource in free[chosen] and not (qos != "Guaranteed" and numa_affine(resource)):
                free[chosen][resource] -= amount
    return Verdict(True, numa=placed)
