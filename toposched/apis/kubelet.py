"""The kubelet's resource-manager settings as NRTs carry them: policy names, scopes and options. Pure.

The exporter publishes these values in the NRT's attributes (``constants.NRT_ATTR_*``) and the
predictor reads them back; both spell them from here.
"""

from typing import Final

# The Topology Manager (topologyManagerPolicy, topologyManagerScope).
NONE: Final = "none"
BEST_EFFORT: Final = "best-effort"
RESTRICTED: Final = "restricted"
SINGLE_NUMA_NODE: Final = "single-numa-node"
POLICIES: Final = (NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE)
CONTAINER_SCOPE: Final = "container"
POD_SCOPE: Final = "pod"
SCOPES: Final = (CONTAINER_SCOPE, POD_SCOPE)

# The CPU Manager (cpuManagerPolicy, cpuManagerPolicyOptions) and the Memory Manager (memoryManagerPolicy).
NO_CPU_POLICY: Final = "none"
STATIC_CPU: Final = "static"
CPU_POLICIES: Final = (NO_CPU_POLICY, STATIC_CPU)
NO_MEMORY_POLICY: Final = "None"
STATIC_MEMORY: Final = "Static"
MEMORY_POLICIES: Final = (NO_MEMORY_POLICY, STATIC_MEMORY)
FULL_PCPUS_ONLY: Final = "full-pcpus-only"
DISTRIBUTE_ACROSS_NUMA: Final = "distribute-cpus-across-numa"
ALIGN_BY_SOCKET: Final = "align-by-socket"
ALIGN_BY_UNCORE_CACHE: Final = "prefer-align-cpus-by-uncorecache"

# The one-word policy of older NRTs (``topologyPolicies``): the policy, then the scope's level.
_LEGACY_NAMES: Final = {SINGLE_NUMA_NODE: "SingleNUMANode", RESTRICTED: "Restricted", BEST_EFFORT: "BestEffort"}
_LEVELS: Final = {CONTAINER_SCOPE: "ContainerLevel", POD_SCOPE: "PodLevel"}
LEGACY_POLICIES: Final[dict[str, tuple[str, str]]] = {
    **{f"{name}{level}": (policy, scope) for policy, name in _LEGACY_NAMES.items() for scope, level in _LEVELS.items()},
    # Names of the first NRT versions, before the scope was part of them.
    "Restricted": (RESTRICTED, CONTAINER_SCOPE),
    "BestEffort": (BEST_EFFORT, CONTAINER_SCOPE),
    "None": (NONE, CONTAINER_SCOPE),
}
"""``topologyPolicies`` value -> (policy, scope)."""


def legacy_policy(policy: str, scope: str) -> str:
    """The ``topologyPolicies`` value of a kubelet's policy and scope (``None`` for none, or one unknown)."""
    name = _LEGACY_NAMES.get(policy)
    return "None" if name is None else f"{name}{_LEVELS.get(scope, _LEVELS[CONTAINER_SCOPE])}"
