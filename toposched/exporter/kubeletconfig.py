"""The kubelet settings the NRT depends on, from its configuration file (KubeletConfiguration v1beta1).

Absent fields take the kubelet's own defaults; an unreadable or malformed file is an error
that names the file.
"""

from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from toposched.apis.kubelet import (
    CONTAINER_SCOPE,
    CPU_POLICIES,
    MEMORY_POLICIES,
    NO_CPU_POLICY,
    NO_MEMORY_POLICY,
    NONE,
    POLICIES,
    SCOPES,
)
from toposched.apis.limits import MAX_NUMA_NODES, check_amount
from toposched.apis.quantity import parse_quantity
from toposched.exporter.sysfs import SysfsError, parse_cpulist
from toposched.localfiles import InputError, load_yaml, read_text

DEFAULT_EVICTION_MEMORY = Decimal(100 * 2**20)
"""The kubelet's default evictionHard memory.available."""


class KubeletConfigError(ValueError):
    pass


@dataclass(frozen=True)
class KubeletConfig:
    topology_manager_policy: str = NONE
    topology_manager_scope: str = CONTAINER_SCOPE
    topology_manager_policy_options: dict[str, str] = field(default_factory=dict)
    cpu_manager_policy: str = NO_CPU_POLICY
    cpu_manager_policy_options: dict[str, str] = field(default_factory=dict)
    memory_manager_policy: str = NO_MEMORY_POLICY
    reserved_system_cpus: tuple[int, ...] = ()
    reserved_memory: dict[int, dict[str, Decimal]] = field(default_factory=dict)
    """NUMA node -> resource -> amount the Memory Manager keeps back there."""
    system_reserved: dict[str, Decimal] = field(default_factory=dict)
    kube_reserved: dict[str, Decimal] = field(default_factory=dict)
    eviction_memory: Decimal = DEFAULT_EVICTION_MEMORY
    """evictionHard memory.available (100Mi when evictionHard is absent; 0 when it is set without it)."""
    source: str = "defaults"

    def reserved(self, resource: str) -> Decimal:
        """What the node keeps back from pods for ``resource`` (system + kube reserved, eviction)."""
        total = self.system_reserved.get(resource, Decimal(0)) + self.kube_reserved.get(resource, Decimal(0))
        return total + (self.eviction_memory if resource == "memory" else Decimal(0))


def _quantities(raw: Any, where: str) -> dict[str, Decimal]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise KubeletConfigError(f"{where}: expected a map of resource quantities")
    try:
        return {str(k): check_amount(str(k), parse_quantity(v)) for k, v in raw.items()}
    except ValueError as exc:
        raise KubeletConfigError(f"{where}: {exc}") from None


def _choice(data: dict[str, Any], key: str, choices: tuple[str, ...], source: str) -> str:
    """The field's value, which must be one the kubelet knows (it refuses to start otherwise)."""
    value = data.get(key) or choices[0]
    if value not in choices:
        shown = repr(value) if isinstance(value, str) and len(value) <= 40 else f"a {type(value).__name__}"
        raise KubeletConfigError(f"{source}: {key}: {shown} is not one of {', '.join(choices)}")
    return str(value)


def _map(data: dict[str, Any], key: str, source: str) -> dict[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise KubeletConfigError(f"{source}: {key}: expected a map")
    return value


def parse(data: dict[str, Any], source: str = "config") -> KubeletConfig:
    reserved_memory: dict[int, dict[str, Decimal]] = {}
    entries = data.get("reservedMemory") or []
    if not isinstance(entries, list):
        raise KubeletConfigError(f"{source}: reservedMemory: expected a list")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or entry.get("numaNode") is None:
            raise KubeletConfigError(f"{source}: reservedMemory[{i}] has no numaNode")
        numa = entry["numaNode"]
        if isinstance(numa, bool) or not isinstance(numa, int) or not 0 <= numa < MAX_NUMA_NODES:
            raise KubeletConfigError(f"{source}: reservedMemory[{i}].numaNode: {numa!r:.40} is not a NUMA node id")
        reserved_memory[numa] = _quantities(entry.get("limits"), f"{source}: reservedMemory[{i}].limits")
    # The kubelet's default threshold applies only when evictionHard is absent, or when
    # mergeDefaultEvictionSettings fills in the signals it leaves out.
    eviction = DEFAULT_EVICTION_MEMORY
    if data.get("evictionHard") is not None:
        hard = _map(data, "evictionHard", source)
        if "memory.available" in hard:
            value = hard["memory.available"]
            if isinstance(value, str) and value.endswith("%"):
                eviction = Decimal(0)
            else:
                eviction = _quantities({"memory": value}, f"{source}: evictionHard.memory.available")["memory"]
        elif not data.get("mergeDefaultEvictionSettings"):
            eviction = Decimal(0)
    options = _options(data, "topologyManagerPolicyOptions", source)
    cpu_options = _options(data, "cpuManagerPolicyOptions", source)
    cpus = data.get("reservedSystemCPUs") or ""
    if not isinstance(cpus, str | int) or isinstance(cpus, bool):
        raise KubeletConfigError(f"{source}: reservedSystemCPUs: expected a CPU list such as 0-1")
    try:
        reserved_cpus = parse_cpulist(str(cpus), f"{source}: reservedSystemCPUs")
    except SysfsError as exc:
        raise KubeletConfigError(str(exc)) from None
    return KubeletConfig(
        topology_manager_policy=_choice(data, "topologyManagerPolicy", POLICIES, source),
        topology_manager_scope=_choice(data, "topologyManagerScope", SCOPES, source),
        # As the kubelet spells them: a YAML true is the string "true".
        topology_manager_policy_options=options,
        cpu_manager_policy=_choice(data, "cpuManagerPolicy", CPU_POLICIES, source),
        cpu_manager_policy_options=cpu_options,
        memory_manager_policy=_choice(data, "memoryManagerPolicy", MEMORY_POLICIES, source),
        reserved_system_cpus=reserved_cpus,
        reserved_memory=reserved_memory,
        system_reserved=_quantities(data.get("systemReserved"), f"{source}: systemReserved"),
        kube_reserved=_quantities(data.get("kubeReserved"), f"{source}: kubeReserved"),
        eviction_memory=eviction,
        source=source,
    )


def _options(data: dict[str, Any], key: str, source: str) -> dict[str, str]:
    """A policy's options, as the kubelet spells them (a YAML true is the string "true")."""
    options = _map(data, key, source)
    if not all(isinstance(v, str | int | float | bool) for v in options.values()):
        raise KubeletConfigError(f"{source}: {key}: expected a map of strings")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()}


def load(path: Path | None) -> KubeletConfig:
    """The configuration in ``path``; the kubelet's defaults when no path is given."""
    if path is None:
        return KubeletConfig()
    try:
        documents = load_yaml(read_text(path), str(path))
    except InputError as exc:
        raise KubeletConfigError(str(exc)) from None
    data = documents[0] if len(documents) == 1 else None
    if not isinstance(data, dict) or data.get("kind") not in (None, "KubeletConfiguration"):
        raise KubeletConfigError(f"{path}: not a KubeletConfiguration")
    return parse(data, str(path))
