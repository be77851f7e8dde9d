"""One node's resource managers while a pod's containers are admitted: their hints and allocations. Pure.

The CPU, Memory and device managers (``cpumanager``, ``memorymanager``, ``devicemanager``) start
from the node's facts (``facts``) and share the zones' free amounts (``allocation.ZonePool``), so
that later containers of the pod see what earlier ones took.
"""

from toposched.apis.kubelet import STATIC_CPU, STATIC_MEMORY
from toposched.schedhook.placement.kubelet.allocation import RejectedError, ZonePool
from toposched.schedhook.placement.kubelet.claims import CPU, Claims
from toposched.schedhook.placement.kubelet.cpumanager import CpuManager
from toposched.schedhook.placement.kubelet.devicemanager import DeviceManager
from toposched.schedhook.placement.kubelet.facts import facts_of
from toposched.schedhook.placement.kubelet.memorymanager import MemoryManager
from toposched.schedhook.placement.kubelet.topologymanager import Hint, ProviderHints, bits
from toposched.schedhook.placement.model import NodeTopology

__all__ = ["NodeState", "RejectedError"]


class NodeState:
    """The node's managers as one pod's containers are placed on it, one after another (and, for
    the capacity count, pod after pod: ``next_pod``)."""

    def __init__(self, node: NodeTopology) -> None:
        self.node = node
        self.facts = facts_of(node)
        self.pool = ZonePool(self.facts)
        self.cpu = CpuManager(self.pool)
        self.memory = MemoryManager(self.pool)
        self.devices = DeviceManager(self.facts)

    def next_pod(self) -> None:
        """The admitted pod keeps what its containers took; what its regular init containers held
        for reuse stays taken too (the kubelet frees it only when it drops their state, later), but
        no longer counts as the next pod's own."""
        self.cpu.cpus.reusable.clear()
        self.memory.reusable.clear()
        self.memory.forget_hints()
        self.devices.next_pod()

    def providers(self, claims: Claims, singles: bool = False) -> list[ProviderHints]:
        """The CPU, memory and device managers' hints for one container (or the pod, in pod
        scope); ``singles``: only the single-zone ones (all that single-numa-node keeps)."""
        node = self.node
        cpu: ProviderHints = {}
        if node.cpu_manager == STATIC_CPU and claims.cpus:
            cpu = {CPU: self.cpu.hints(claims.cpus, singles)}
        pinned: ProviderHints = {}
        if node.memory_manager == STATIC_MEMORY and claims.memory:
            found = self.memory.hints(claims.memory, singles)
            pinned = {r: list(found) for r in claims.memory}
        plugged = {r: self.devices.hints(r, q, singles) for r, q in claims.devices.items()}
        return [cpu, pinned, plugged]

    def allocate(self, claims: Claims, decided: Hint, init: bool) -> set[int]:
        """What the managers hand out exclusively to one container (or the pod) leaves the zones;
        returns the zones it actually got (the aligned mask may not hold all its CPUs: the rest
        spills over). Raises RejectedError where a manager's allocation fails."""
        node = self.node
        zones: set[int] = set()
        if node.cpu_manager == STATIC_CPU and claims.cpus:
            self.cpu.check_smt_alignment(claims.cpus)
            zones.update(self.cpu.take(claims.cpus, decided.affinity, init))
        if node.memory_manager == STATIC_MEMORY and claims.memory:
            zones.update(bits(self.memory.take(claims.memory, decided, init)))
        zones.update(self.devices.take(claims.devices, decided.affinity, init))
        return zones
