"""A real node's kubelet resource-manager settings, checked against its topology the way kubelet
1.36 checks them (so a bad combination fails here, with a reason, rather than as a kubelet that
exits at start).

The rules restated from ``pkg/kubelet/cm/{cpumanager,memorymanager,topologymanager}`` and
``pkg/kubelet/apis/config/validation`` of Kubernetes 1.36:

* CPU Manager ``static`` needs at least one reserved CPU (``reservedSystemCPUs`` here).
* Memory Manager ``Static`` needs ``reservedMemory`` whose per-type sum equals what Node
  Allocatable reserves: ``systemReserved`` + ``kubeReserved`` + the ``memory.available`` hard
  eviction threshold; each entry non-zero, on an existing NUMA node. (``BestEffort`` exists only
  on Windows.)
* Topology Manager options (all GA in 1.36): ``prefer-closest-numa-nodes`` (bool) and
  ``max-allowable-numa-nodes`` (int >= 8; needed above 8 NUMA nodes unless the policy is none).
* CPU Manager options: GA ``full-pcpus-only``, ``strict-cpu-reservation``,
  ``prefer-align-cpus-by-uncorecache``; beta (on by default) ``distribute-cpus-across-numa``;
  alpha (feature gate ``CPUManagerPolicyAlphaOptions``) ``align-by-socket``,
  ``distribute-cpus-across-cores``. Pairs the kubelet refuses are refused here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from testkit.realnode.topology import MIB, Topology, format_bytes, format_cpulist, parse_bytes, parse_cpulist
from toposched.schedhook.placement.parse import CPU_OPTION_CONFLICTS

CPU_MANAGER_POLICIES = ("none", "static")
MEMORY_MANAGER_POLICIES = ("None", "Static")
TOPOLOGY_MANAGER_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_MANAGER_SCOPES = ("container", "pod")

TOPOLOGY_MANAGER_OPTIONS = ("prefer-closest-numa-nodes", "max-allowable-numa-nodes")
DEFAULT_MAX_ALLOWABLE_NUMA_NODES = 8

# option -> feature gate that must be on (None: GA, or beta and on by default)
CPU_MANAGER_OPTIONS: Mapping[str, str | None] = {
    "full-pcpus-only": None,
    "strict-cpu-reservation": None,
    "prefer-align-cpus-by-uncorecache": None,
    "distribute-cpus-across-numa": None,
    "align-by-socket": "CPUManagerPolicyAlphaOptions",
    "distribute-cpus-across-cores": "CPUManagerPolicyAlphaOptions",
}


class SettingsError(ValueError):
    """Settings the kubelet would refuse (or that do not fit the topology)."""


def _is_true(value: str) -> bool:
    lowered = value.lower()
    if lowered not in ("true", "false", "1", "0", "t", "f"):
        raise SettingsError(f"not a boolean: {value!r}")
    return lowered in ("true", "1", "t")


@dataclass(frozen=True)
class KubeletSettings:
    """The resource-manager part of a node's KubeletConfiguration.

    The defaults are the local cluster's default real node: static CPU manager with CPU 0
    reserved, Static memory manager (so the PodResources API reports memory), single-numa-node
    at container scope. ``reserved_memory`` maps NUMA node -> bytes; when None, the whole
    reservation (system + kube reserved + eviction threshold) goes to the first zone with memory.
    ``eviction_hard_memory`` is 0 by default, which leaves ``memory.available`` out of
    ``evictionHard`` altogether: the kubelet compares that signal with the whole machine's working
    set, and a fake topology smaller than what the host uses would put the node under memory
    pressure and evict its pods. ``extra`` is merged last into the generated KubeletConfiguration.
    """

    cpu_manager_policy: str = "static"
    cpu_manager_policy_options: Mapping[str, str] = field(default_factory=dict)
    reserved_system_cpus: str = "0"
    memory_manager_policy: str = "Static"
    system_reserved_memory: int = 256 * MIB
    kube_reserved_memory: int = 0
    eviction_hard_memory: int = 0
    reserved_memory: Mapping[int, int] | None = None
    topology_manager_policy: str = "single-numa-node"
    topology_manager_scope: str = "container"
    topology_manager_policy_options: Mapping[str, str] = field(default_factory=dict)
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    max_pods: int = 110
    extra: Mapping[str, Any] = field(default_factory=dict)

    # -- checks ----------------------------------------------------------------------------------

    def validate(self, topology: Topology) -> None:
        """Raise :class:`SettingsError` for what kubelet 1.36 would refuse on ``topology``."""
        self._validate_cpu(topology)
        self._validate_memory(topology)
        self._validate_topology_manager(topology)

    def _validate_cpu(self, topology: Topology) -> None:
        if self.cpu_manager_policy not in CPU_MANAGER_POLICIES:
            raise SettingsError(f"cpuManagerPolicy must be one of {CPU_MANAGER_POLICIES}")
        try:
            reserved = parse_cpulist(self.reserved_system_cpus)
        except ValueError as exc:
            raise SettingsError(f"reservedSystemCPUs {self.reserved_system_cpus!r}: {exc}") from exc
        missing = [c for c in reserved if c >= topology.cpu_count]
        if missing:
            raise SettingsError(f"reservedSystemCPUs {missing} do not exist ({topology.cpu_count} CPUs)")
        if self.cpu_manager_policy == "static":
            if not reserved:
                raise SettingsError("the static CPU manager needs at least one reserved CPU (reserved_system_cpus)")
            if len(reserved) >= topology.cpu_count:
                raise SettingsError("every CPU is reserved: the static CPU manager would have none to assign")
        options = dict(self.cpu_manager_policy_options)
        if options and self.cpu_manager_policy != "static":
            raise SettingsError("cpuManagerPolicyOptions need cpuManagerPolicy static")
        for name, value in options.items():
            if name not in CPU_MANAGER_OPTIONS:
                raise SettingsError(
                    f"unknown CPU Manager policy option {name!r} (known: {sorted(CPU_MANAGER_OPTIONS)})"
                )
            gate = CPU_MANAGER_OPTIONS[name]
            if gate and not self.feature_gates.get(gate, False):
                raise SettingsError(f"CPU Manager policy option {name!r} is alpha: it needs feature gate {gate}")
            _is_true(value)
        enabled = {name for name, value in options.items() if _is_true(value)}
        for a, b in CPU_OPTION_CONFLICTS:
            if a in enabled and b in enabled:
                raise SettingsError(f"CPU Manager policy options {a} and {b} cannot be used together")
        if "align-by-socket" in enabled and self.topology_manager_policy == "single-numa-node":
            raise SettingsError("align-by-socket is incompatible with the single-numa-node Topology Manager policy")

    def _validate_memory(self, topology: Topology) -> None:
        if self.memory_manager_policy not in MEMORY_MANAGER_POLICIES:
            raise SettingsError(
                f"memoryManagerPolicy must be one of {MEMORY_MANAGER_POLICIES} (BestEffort is Windows-only)"
            )
        for name in ("system_reserved_memory", "kube_reserved_memory", "eviction_hard_memory"):
            if getattr(self, name) < 0:
                raise SettingsError(f"{name} must not be negative")
        if self.memory_manager_policy != "Static":
            return
        total = self.node_reserved_memory
        if total == 0:
            raise SettingsError("the Static memory manager needs reserved memory (system/kube reserved or eviction)")
        per_node = self.reserved_memory_per_node(topology)
        for node, amount in per_node.items():
            if node >= len(topology.zones):
                raise SettingsError(f"reservedMemory names NUMA node {node}; the topology has {len(topology.zones)}")
            if amount <= 0:
                raise SettingsError(f"reservedMemory for NUMA node {node} must be greater than zero")
            zone = topology.zones[node]
            if amount > zone.memory - zone.hugepages_bytes:
                raise SettingsError(
                    f"reservedMemory for NUMA node {node} ({format_bytes(amount)}) exceeds its non-hugepage memory"
                )
        if sum(per_node.values()) != total:
            raise SettingsError(
                f"reservedMemory adds up to {format_bytes(sum(per_node.values()))}; the kubelet requires exactly "
                f"systemReserved + kubeReserved + evictionHard memory.available = {format_bytes(total)}"
            )

    def _validate_topology_manager(self, topology: Topology) -> None:
        if self.topology_manager_policy not in TOPOLOGY_MANAGER_POLICIES:
            raise SettingsError(f"topologyManagerPolicy must be one of {TOPOLOGY_MANAGER_POLICIES}")
        if self.topology_manager_scope not in TOPOLOGY_MANAGER_SCOPES:
            raise SettingsError(f"topologyManagerScope must be one of {TOPOLOGY_MANAGER_SCOPES}")
        limit = DEFAULT_MAX_ALLOWABLE_NUMA_NODES
        for name, value in self.topology_manager_policy_options.items():
            if name not in TOPOLOGY_MANAGER_OPTIONS:
                raise SettingsError(
                    f"unknown Topology Manager policy option {name!r} (known: {TOPOLOGY_MANAGER_OPTIONS})"
                )
            if name == "prefer-closest-numa-nodes":
                _is_true(value)
            else:
                try:
                    limit = int(value)
                except ValueError as exc:
                    raise SettingsError(f"max-allowable-numa-nodes must be an integer, not {value!r}") from exc
                if limit < DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
                    raise SettingsError(f"max-allowable-numa-nodes must be at least {DEFAULT_MAX_ALLOWABLE_NUMA_NODES}")
        if self.topology_manager_policy != "none" and len(topology.zones) > limit:
            raise SettingsError(
                f"{len(topology.zones)} NUMA nodes: the Topology Manager refuses more than {limit} "
                "(set topology_manager_policy_options max-allowable-numa-nodes)"
            )

    # -- derived ---------------------------------------------------------------------------------

    @property
    def node_reserved_memory(self) -> int:
        """What Node Allocatable holds back: system + kube reserved + the hard eviction threshold."""
        return self.system_reserved_memory + self.kube_reserved_memory + self.eviction_hard_memory

    def reserved_memory_per_node(self, topology: Topology) -> dict[int, int]:
        if self.reserved_memory is not None:
            return {int(k): int(v) for k, v in self.reserved_memory.items()}
        first = next(i for i, z in enumerate(topology.zones) if z.memory)
        return {first: self.node_reserved_memory}

    def kubelet_config(self, topology: Topology) -> dict[str, Any]:
        """The KubeletConfiguration (v1beta1) fields these settings own."""
        config: dict[str, Any] = {
            "cpuManagerPolicy": self.cpu_manager_policy,
            "memoryManagerPolicy": self.memory_manager_policy,
            "topologyManagerPolicy": self.topology_manager_policy,
            "topologyManagerScope": self.topology_manager_scope,
            "maxPods": self.max_pods,
            "systemReserved": {"memory": format_bytes(self.system_reserved_memory)},
            # Disk signals low, so a nearly full developer disk does not evict the test pods; with
            # mergeDefaultEvictionSettings off (the default) the kubelet adds no signal of its own.
            "evictionHard": {"nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%"},
        }
        if self.eviction_hard_memory:
            config["evictionHard"]["memory.available"] = format_bytes(self.eviction_hard_memory)
        if self.kube_reserved_memory:
            config["kubeReserved"] = {"memory": format_bytes(self.kube_reserved_memory)}
        if self.reserved_system_cpus:
            config["reservedSystemCPUs"] = format_cpulist(parse_cpulist(self.reserved_system_cpus))
        if self.cpu_manager_policy_options:
            config["cpuManagerPolicyOptions"] = dict(self.cpu_manager_policy_options)
        if self.topology_manager_policy_options:
            config["topologyManagerPolicyOptions"] = dict(self.topology_manager_policy_options)
        if self.memory_manager_policy == "Static":
            config["reservedMemory"] = [
                {"numaNode": node, "limits": {"memory": format_bytes(amount)}}
                for node, amount in sorted(self.reserved_memory_per_node(topology).items())
            ]
        if self.feature_gates:
            config["featureGates"] = dict(self.feature_gates)
        return config

    # -- (de)serialisation -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cpuManagerPolicy": self.cpu_manager_policy,
            "reservedSystemCPUs": self.reserved_system_cpus,
            "memoryManagerPolicy": self.memory_manager_policy,
            "systemReservedMemory": format_bytes(self.system_reserved_memory),
            "kubeReservedMemory": format_bytes(self.kube_reserved_memory),
            "evictionHardMemory": format_bytes(self.eviction_hard_memory),
            "topologyManagerPolicy": self.topology_manager_policy,
            "topologyManagerScope": self.topology_manager_scope,
            "maxPods": self.max_pods,
        }
        if self.cpu_manager_policy_options:
            out["cpuManagerPolicyOptions"] = dict(self.cpu_manager_policy_options)
        if self.topology_manager_policy_options:
            out["topologyManagerPolicyOptions"] = dict(self.topology_manager_policy_options)
        if self.reserved_memory is not None:
            out["reservedMemory"] = {str(k): format_bytes(v) for k, v in self.reserved_memory.items()}
        if self.feature_gates:
            out["featureGates"] = dict(self.feature_gates)
        if self.extra:
            out["extra"] = dict(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KubeletSettings:
        """Inverse of :meth:`to_dict`; absent fields keep their defaults."""
        known = {
            "cpuManagerPolicy": "cpu_manager_policy",
            "cpuManagerPolicyOptions": "cpu_manager_policy_options",
            "reservedSystemCPUs": "reserved_system_cpus",
            "memoryManagerPolicy": "memory_manager_policy",
            "systemReservedMemory": "system_reserved_memory",
            "kubeReservedMemory": "kube_reserved_memory",
            "evictionHardMemory": "eviction_hard_memory",
            "reservedMemory": "reserved_memory",
            "topologyManagerPolicy": "topology_manager_policy",
            "topologyManagerScope": "topology_manager_scope",
            "topologyManagerPolicyOptions": "topology_manager_policy_options",
            "featureGates": "feature_gates",
            "maxPods": "max_pods",
            "extra": "extra",
        }
        unknown = set(data) - set(known)
        if unknown:
            raise SettingsError(f"unknown kubelet settings: {sorted(unknown)} (known: {sorted(known)})")
        kwargs: dict[str, Any] = {}
        for key, attr in known.items():
            if key not in data:
                continue
            value = data[key]
            if attr in ("system_reserved_memory", "kube_reserved_memory", "eviction_hard_memory"):
                value = parse_bytes(value)
            elif attr == "reserved_memory":
                value = {int(k): parse_bytes(v) for k, v in value.items()}
            elif attr in ("cpu_manager_policy_options", "topology_manager_policy_options"):
                value = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
            elif attr == "reserved_system_cpus":
                value = str(value)
            kwargs[attr] = value
        return cls(**kwargs)
