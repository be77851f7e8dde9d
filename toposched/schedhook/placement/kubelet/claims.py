"""What each of the kubelet's resource managers takes from a container, or from the pod in pod scope. Pure.

The static CPU manager takes the integral CPUs of Guaranteed pods, the Static Memory Manager the
memory and hugepages of Guaranteed pods, the device manager every device-plugin resource of any
pod. Only what a manager takes gets a topology hint and an exclusive allocation.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal

from toposched.schedhook.placement.model import HOST_LEVEL, Container, Pod, container_request

CPU = "cpu"
STATIC_CPU = "static"
STATIC_MEMORY = "Static"
FULL_PCPUS_ONLY = "full-pcpus-only"
DISTRIBUTE_ACROSS_NUMA = "distribute-cpus-across-numa"
ALIGN_BY_SOCKET = "align-by-socket"
ALIGN_BY_UNCORE_CACHE = "prefer-align-cpus-by-uncorecache"


def numa_memory(resource: str) -> bool:
    return resource == "memory" or resource.startswith("hugepages-")


def device(resource: str) -> bool:
    """A resource the device manager hands out (a device plugin's): neither CPU, memory nor host-level."""
    return resource != CPU and not numa_memory(resource) and resource not in HOST_LEVEL


@dataclass(frozen=True)
class Claims:
    """One hint merge's worth of requests: a container's, or the pod's in pod scope."""

    cpus: int = 0
    """Exclusive CPUs, should the static CPU manager run."""
    memory: Mapping[str, Decimal] = field(default_factory=dict)
    """Memory and hugepages, should the Static Memory Manager run."""
    devices: Mapping[str, Decimal] = field(default_factory=dict)
    """Device-plugin resources (a hint only where the node's zones report the resource)."""

    def exclusive(self, cpu_manager: str | None, memory_manager: str | None) -> bool:
        """Does a manager allocate anything of it exclusively (devices: always)?"""
        return bool(
            (self.cpus and cpu_manager == STATIC_CPU)
            or (self.memory and memory_manager == STATIC_MEMORY)
            or self.devices
        )


def guaranteed_cpus(pod: Pod, container: Container) -> int:
    """Exclusive CPUs the static CPU manager gives the container: its integral request in a
    Guaranteed pod, else none."""
    amount = container_request(container).get(CPU, Decimal(0))
    if pod.qos != "Guaranteed" or pod.pod_level or amount <= 0 or amount != amount.to_integral_value():
        return 0
    return int(amount)


def memory_request(pod: Pod, container: Container) -> dict[str, Decimal]:
    """Memory and hugepages the Static Memory Manager pins for the container (Guaranteed pods
    without pod-level resources only)."""
    if pod.qos != "Guaranteed" or pod.pod_level:
        return {}
    return {r: q for r, q in container_request(container).items() if numa_memory(r) and q > 0}


def devices(request: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """Device-plugin requests, in whole devices (the device manager rounds a quantity up)."""
    return {r: q.to_integral_value(ROUND_CEILING) for r, q in request.items() if q > 0 and device(r)}


def container_claims(pod: Pod, container: Container) -> Claims:
    return Claims(
        guaranteed_cpus(pod, container), memory_request(pod, container), devices(container_request(container))
    )


def pod_guaranteed_cpus(pod: Pod) -> int:
    """The pod's exclusive CPUs as the CPU manager counts them in pod scope: the larger of the app
    and sidecar containers' sum and, per regular init container, it plus the sidecars before it."""
    sidecars = peak = 0
    for c in pod.init_containers:
        if CPU not in container_request(c):
            continue
        cpus = guaranteed_cpus(pod, c)
        if c.sidecar:
            sidecars += cpus
        else:
            peak = max(peak, sidecars + cpus)
    return max(peak, sidecars + sum(guaranteed_cpus(pod, c) for c in pod.containers))


def pod_memory_request(pod: Pod) -> dict[str, Decimal]:
    """The pod's pinned memory in pod scope (the Memory Manager's own sum, like ``pod_guaranteed_cpus``)."""
    if pod.qos != "Guaranteed" or pod.pod_level:
        return {}
    sidecars: dict[str, Decimal] = {}
    peak: dict[str, Decimal] = {}
    for c in pod.init_containers:
        for r, q in memory_request(pod, c).items():
            peak.setdefault(r, Decimal(0))
            if c.sidecar:
                sidecars[r] = sidecars.get(r, Decimal(0)) + q
            else:
                peak[r] = max(peak[r], sidecars.get(r, Decimal(0)) + q)
    apps: dict[str, Decimal] = {}
    for c in pod.containers:
        for r, q in memory_request(pod, c).items():
            apps[r] = apps.get(r, Decimal(0)) + q
    return {r: max(q + sidecars.get(r, Decimal(0)), peak.get(r, Decimal(0))) for r, q in apps.items()}


def pod_claims(pod: Pod) -> Claims:
    """The pod's claims in pod scope (for a pod of one container and no init containers, exactly
    that container's: each sum runs over it alone)."""
    return Claims(pod_guaranteed_cpus(pod), pod_memory_request(pod), devices(pod.effective()))


def holds_exclusive(pod: Pod, cpu_manager: str | None, memory_manager: str | None) -> bool:
    """Would the kubelet give this pod exclusive CPUs, NUMA-pinned memory or devices?"""
    return any(
        container_claims(pod, c).exclusive(cpu_manager, memory_manager) for c in (*pod.init_containers, *pod.containers)
    )
