"""The kubelet settings the NRT depends on, from its configuration file (KubeletConfiguration v1beta1).

Absent fields take the kubelet's own defaults; an unreadable or malformed file is an error
that names the file.
"""

from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from toposched.apis.quantity import parse_quantity
from toposched.exporter.sysfs import SysfsError, parse_cpulist

DEFAULT_EVICTION_MEMORY = Decimal(100 * 2**20)
"""The kubelet's default evictionHard memory.available."""


class KubeletConfigError(ValueError):
    pass


@dataclass(frozen=True)
class KubeletConfig:
    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"
    topology_manager_policy_options: dict[str, str] = field(default_factory=dict)
    cpu_manager_policy: str = "none"
    memory_manager_policy: str = "None"
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
        return {str(k): parse_quantity(v) for k, v in raw.items()}
    except ValueError as exc:
        raise KubeletConfigError(f"{where}: {exc}") from None


def parse(data: dict[str, Any], source: str = "config") -> KubeletConfig:
    reserved_memory: dict[int, dict[str, Decimal]] = {}
    for i, entry in enumerate(data.get("reservedMemory") or []):
        try:
            numa = int(entry["numaNode"])
        except (KeyError, TypeError, ValueError):
            raise KubeletConfigError(f"{source}: reservedMemory[{i}] has no numaNode") from None
        reserved_memory[numa] = _quantities(entry.get("limits"), f"{source}: reservedMemory[{i}].limits")
    # The kubelet's default threshold applies only when evictionHard is absent, or when
    # mergeDefaultEvictionSettings fills in the signals it leaves out.
    hard = data.get("evictionHard")
    eviction = DEFAULT_EVICTION_MEMORY
    if isinstance(hard, dict):
        if "memory.available" in hard:
            value = str(hard["memory.available"])
            eviction = Decimal(0) if value.endswith("%") else parse_quantity(value)
        elif not data.get("mergeDefaultEvictionSettings"):
            eviction = Decimal(0)
    options = data.get("topologyManagerPolicyOptions") or {}
    try:
        reserved_cpus = parse_cpulist(str(data.get("reservedSystemCPUs") or ""), f"{source}: reservedSystemCPUs")
    except SysfsError as exc:
        raise KubeletConfigError(str(exc)) from None
    return KubeletConfig(
        topology_manager_policy=str(data.get("topologyManagerPolicy") or "none"),
        topology_manager_scope=str(data.get("topologyManagerScope") or "container"),
        topology_manager_policy_options={str(k): str(v) for k, v in options.items()},
        cpu_manager_policy=str(data.get("cpuManagerPolicy") or "none"),
        memory_manager_policy=str(data.get("memoryManagerPolicy") or "None"),
        reserved_system_cpus=reserved_cpus,
        reserved_memory=reserved_memory,
        system_reserved=_quantities(data.get("systemReserved"), f"{source}: systemReserved"),
        kube_reserved=_quantities(data.get("kubeReserved"), f"{source}: kubeReserved"),
        eviction_memory=eviction,
        source=source,
    )


def load(path: Path | None) -> KubeletConfig:
    """The configuration in ``path``; the kubelet's defaults when no path is given."""
    if path is None:
        return KubeletConfig()
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise KubeletConfigError(f"{path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise KubeletConfigError(f"{path}: not YAML: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") not in (None, "KubeletConfiguration"):
        raise KubeletConfigError(f"{path}: not a KubeletConfiguration")
    return parse(data, str(path))
