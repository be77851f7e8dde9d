"""A fast path for the commonest case: one container, a single-numa-node node that says which
resource managers run. Same answer as ``numa.predict`` (a property test checks it), an order of
magnitude cheaper: plain float comparisons per zone instead of hint lists and their merge.

Under single-numa-node the kubelet keeps only preferred single-NUMA hints, so a one-container
pod is admitted on the lowest zone that holds every hinted request, provided some single zone
is big enough for each (else no hint is preferred and the pod is rejected).
"""

from toposched.schedhook.placement.model import HOST_LEVEL, NodeTopology, Pod, container_request, numa_affine
from toposched.schedhook.placement.topologymanager import SINGLE_NUMA_NODE


def hinted(pod: Pod, node: NodeTopology) -> list[tuple[str, float, str]] | None:
    """(resource, amount, which capacity bounds its hint) of the requests that get hints."""
    if len(pod.containers) != 1 or pod.init_containers:
        return None
    guaranteed = pod.qos == "Guaranteed"
    out: list[tuple[str, float, str]] = []
    for resource, amount in container_request(pod.containers[0]).items():
        if amount <= 0 or resource in HOST_LEVEL:
            continue
        if resource == "cpu":
            if node.cpu_manager == "static" and guaranteed and amount == amount.to_integral_value():
                out.append((resource, float(amount), "capacity"))
        elif numa_affine(resource):
            if node.memory_manager == "Static" and guaranteed:
                out.append((resource, float(amount), "allocatable"))
        elif resource in node.reported:
            out.append((resource, float(amount), "allocatable"))
    return out


def hint_key(pod: Pod, node: NodeTopology) -> tuple[object, ...]:
    """What ``hinted`` depends on besides the pod: two nodes with the same key get the same hints."""
    devices = tuple(r in node.reported for r in container_request(pod.containers[0]) if not numa_affine(r))
    return node.cpu_manager, node.memory_manager, devices


def applies(pod: Pod, node: NodeTopology) -> bool:
    return (
        node.policy == SINGLE_NUMA_NODE and node.knows_managers and len(pod.containers) == 1 and not pod.init_containers
    )


def admit_zone(pod: Pod, node: NodeTopology, requests: list[tuple[str, float, str]]) -> tuple[bool, tuple[int, ...]]:
    """(admitted, NUMA ids the kubelet would use) for a node where ``applies`` holds."""
    if not requests:
        return True, tuple(z.numa for z in node.zones)
    zones = [(z.numa, z.floats) for z in node.zones]
    for resource, amount, bound in requests:
        if not any(f[bound].get(resource, 0.0) >= amount for _, f in zones):
            return False, ()
    for numa, f in zones:
        available = f["available"]
        if all(available.get(resource, 0.0) >= amount for resource, amount, _ in requests):
            return True, (numa,)
    return False, ()
