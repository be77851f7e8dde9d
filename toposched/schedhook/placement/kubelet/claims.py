"""What each of the kubelet's resource managers takes from a container, or from the pod in pod scope. Pure.

The static CPU manager takes the integral CPUs of Guaranteed pods, the Static Memory Manager the
memory and hugepages of Guaranteed pods, the device manager every device-plugin resource of any
pod. Only what a manager takes gets a topology hint and an exclusive allocation. The pod's QoS
class and its pod-scope sums (the init and sidecar containers' peak) are written here once.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal
from typing import TypeVar, cast

from toposched.apis.kubelet import STATIC_CPU, STATIC_MEMORY
from toposched.schedhook.placement.model import HOST_LEVEL, Container, Pod

CPU = "cpu"
GUARANTEED, BURSTABLE, BEST_EFFORT_QOS = "Guaranteed", "Burstable", "BestEffort"
T = TypeVar("T")


def numa_memory(resource: str) -> bool:
    return resource == "memory" or resource.startswith("hugepages-")


def numa_affine(resource: str) -> bool:
    """CPU, memory or hugepages: what a NUMA zone holds, and what pod-level resources may set (the
    kubelet's IsSupportedPodLevelResource names the same three)."""
    return resource == CPU or numa_memory(resource)


def device(resource: str) -> bool:
    """A resource the device manager hands out (a device plugin's): neither CPU, memory nor host-level."""
    return resource != CPU and not numa_memory(resource) and resource not in HOST_LEVEL


def _kept(pod: Pod, key: str, compute: Callable[[Pod], T]) -> T:
    """``compute(pod)``, once per pod (it is predicted on many nodes)."""
    if key not in pod.memo:
        pod.memo[key] = compute(pod)
    return cast(T, pod.memo[key])


def pod_level(pod: Pod) -> bool:
    """Are pod-level resources set (CPU, memory or hugepages in ``spec.resources``)? The kubelet's
    CPU and Memory Managers then leave the pod alone (1.36, without the alpha
    PodLevelResourceManagers gate): no exclusive CPUs, no pinned memory, no hints from them."""
    return _kept(pod, "pod_level", _pod_level)


def _pod_level(pod: Pod) -> bool:
    level = pod.resources
    return level is not None and any(numa_affine(r) for r in (*level.requests, *level.limits))


def qos(pod: Pod) -> str:
    """The pod's QoS class as Kubernetes computes it (zero amounts count as unset); from the
    pod-level resources alone when the spec has them."""
    return _kept(pod, "qos", _qos)


def _qos(pod: Pod) -> str:
    if pod.resources is not None:
        return _pod_level_qos(pod.resources)
    everything = [*pod.init_containers, *pod.containers]

    def positive(values: Mapping[str, Decimal], resource: str) -> Decimal | None:
        amount = values.get(resource)
        return amount if amount is not None and amount > 0 else None

    if all(
        positive(c.requests, r) is None and positive(c.limits, r) is None for c in everything for r in (CPU, "memory")
    ):
        return BEST_EFFORT_QOS
    for c in everything:
        for r in (CPU, "memory"):
            limit = positive(c.limits, r)
            request = c.requests.get(r, limit)  # the apiserver defaults an absent request to the limit
            if limit is None or request != limit:
                return BURSTABLE
    return GUARANTEED


def _pod_level_qos(level: Container) -> str:
    """ComputePodQOS from pod-level resources: Guaranteed when CPU and memory limits are set and
    every request equals its limit."""
    requests = {r: q for r, q in level.request.items() if q > 0 and r in (CPU, "memory")}
    limits = {r: q for r, q in level.limits.items() if q > 0 and r in (CPU, "memory")}
    if not requests and not limits:
        return BEST_EFFORT_QOS
    if {CPU, "memory"} <= set(limits) and requests == limits:
        return GUARANTEED
    return BURSTABLE


def pod_total(
    pod: Pod, of: Callable[[Container], Mapping[str, Decimal]], apps_only: bool = False
) -> dict[str, Decimal]:
    """The pod's need of what ``of`` says each container needs: the larger of the app and sidecar
    containers' sum and, for each regular init container, its own plus the sidecars started before
    it. ``apps_only``: only the resources the app containers need (the Memory Manager's sum)."""
    sidecars: dict[str, Decimal] = {}
    peak: dict[str, Decimal] = {}
    for c in pod.init_containers:
        for r, q in of(c).items():
            if c.sidecar:
                sidecars[r] = sidecars.get(r, Decimal(0)) + q
            else:
                peak[r] = max(peak.get(r, Decimal(0)), sidecars.get(r, Decimal(0)) + q)
    apps: dict[str, Decimal] = {}
    for c in pod.containers:
        for r, q in of(c).items():
            apps[r] = apps.get(r, Decimal(0)) + q
    names = apps if apps_only else {**apps, **sidecars, **peak}
    zero = Decimal(0)
    return {r: max(apps.get(r, zero) + sidecars.get(r, zero), peak.get(r, zero)) for r in names}


def effective(pod: Pod) -> dict[str, Decimal]:
    """The pod-level request, as the apiserver and the scheduler count it (``pod_total`` of the
    containers' requests); a resource set at pod level counts as set there."""
    found = pod_total(pod, lambda c: c.request)
    if pod_level(pod) and pod.resources is not None:
        found.update((r, q) for r, q in pod.resources.request.items() if numa_affine(r))
    return found


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
    amount = container.request.get(CPU, Decimal(0))
    if qos(pod) != GUARANTEED or pod_level(pod) or amount <= 0 or amount != amount.to_integral_value():
        return 0
    return int(amount)


def memory_request(pod: Pod, container: Container) -> dict[str, Decimal]:
    """Memory and hugepages the Static Memory Manager pins for the container (Guaranteed pods
    without pod-level resources only)."""
    if qos(pod) != GUARANTEED or pod_level(pod):
        return {}
    return {r: q for r, q in container.request.items() if numa_memory(r) and q > 0}


def devices(request: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """Device-plugin requests, in whole devices (the device manager rounds a quantity up)."""
    return {r: q.to_integral_value(ROUND_CEILING) for r, q in request.items() if q > 0 and device(r)}


def container_claims(pod: Pod, container: Container) -> Claims:
    return Claims(guaranteed_cpus(pod, container), memory_request(pod, container), devices(container.request))


def pod_claims(pod: Pod) -> Claims:
    """The pod's claims in pod scope, as the CPU and Memory Managers sum them (for a pod of one
    container and no init containers, exactly that container's: each sum runs over it alone)."""
    cpus = pod_total(pod, lambda c: {CPU: Decimal(guaranteed_cpus(pod, c))} if CPU in c.request else {})
    memory = pod_total(pod, lambda c: memory_request(pod, c), apps_only=True)
    return Claims(int(cpus.get(CPU, 0)), memory, devices(effective(pod)))


def holds_exclusive(pod: Pod, cpu_manager: str | None, memory_manager: str | None) -> bool:
    """Would the kubelet give this pod exclusive CPUs, NUMA-pinned memory or devices?"""
    return any(
        container_claims(pod, c).exclusive(cpu_manager, memory_manager) for c in (*pod.init_containers, *pod.containers)
    )
