"""API groups, label keys and annotation names: the one place these strings are spelled."""

from typing import Final

APPGROUP_GROUP: Final = "appgroup.diktyo.x-k8s.io"
APPGROUP_VERSION: Final = "v1alpha1"
APPGROUP_PLURAL: Final = "appgroups"

NETWORKTOPOLOGY_GROUP: Final = "networktopology.diktyo.x-k8s.io"
NETWORKTOPOLOGY_VERSION: Final = "v1alpha1"
NETWORKTOPOLOGY_PLURAL: Final = "networktopologies"

NRT_GROUP: Final = "topology.node.k8s.io"
NRT_VERSION: Final = "v1alpha2"
NRT_PLURAL: Final = "noderesourcetopologies"

# Pod labels that tie a pod to its AppGroup and to one workload of it (upstream spelling).
APPGROUP_LABEL: Final = "appgroup.diktyo.x-k8s.io"
WORKLOAD_LABEL: Final = "appgroup.diktyo.x-k8s.io.workload"

# Node labels the network costs are keyed by.
REGION_LABEL: Final = "topology.kubernetes.io/region"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"

# Extended resource with a node's NIC capacity in bits per second (the KEP's name; set by the exporter).
NODE_BANDWIDTH_RESOURCE: Final = "network.aware.com/bandwidth"

# Weight names with a meaning to the upstream NetworkOverhead plugin.
WEIGHT_USER_DEFINED: Final = "UserDefined"
WEIGHT_NETPERF: Final = "NetperfCosts"

# Pod-level NUMA policy annotation (koordinator's spelling, so its users need not relabel).
NUMA_TOPOLOGY_SPEC_ANNOTATION: Final = "scheduling.koordinator.sh/numa-topology-spec"

# The Node labels the exporter sets from its kubelet's configuration (a cluster's operator may set
# them too): a node labelled with a Topology Manager policy other than none is NUMA-managed, and the
# extender expects its NRT, whatever happened to the NRT itself.
TOPOLOGY_MANAGER_POLICY_LABEL: Final = "toposched.io/topology-manager-policy"
TOPOLOGY_MANAGER_SCOPE_LABEL: Final = "toposched.io/topology-manager-scope"

# NodeResourceTopology conventions.
NRT_ZONE_TYPE_NODE: Final = "Node"
NRT_ZONE_PREFIX: Final = "node-"

# NRT top-level attributes: the exporter writes them, the extender and explain read them.
NRT_ATTR_TOPOLOGY_MANAGER_POLICY: Final = "topologyManagerPolicy"
NRT_ATTR_TOPOLOGY_MANAGER_SCOPE: Final = "topologyManagerScope"
NRT_ATTR_TOPOLOGY_MANAGER_POLICY_OPTIONS: Final = "topologyManagerPolicyOptions"
"""``name=value`` pairs joined by commas, as in the kubelet's topologyManagerPolicyOptions."""
NRT_ATTR_TOPOLOGY_MANAGER_MAX_NUMA_NODES: Final = "topologyManagerMaxNUMANodes"
NRT_ATTR_CPU_MANAGER_POLICY: Final = "cpuManagerPolicy"
NRT_ATTR_CPU_MANAGER_POLICY_OPTIONS: Final = "cpuManagerPolicyOptions"
"""``name=value`` pairs joined by commas, as in the kubelet's cpuManagerPolicyOptions."""
NRT_ATTR_MEMORY_MANAGER_POLICY: Final = "memoryManagerPolicy"
NRT_ATTR_RESERVED_SYSTEM_CPUS: Final = "reservedSystemCPUs"
NRT_ATTR_PODS_FINGERPRINT: Final = "nodeTopologyPodsFingerprint"
"""The pfp0v001 fingerprint of the pods the NRT accounts for (see toposched.apis.fingerprint)."""
NRT_ATTR_PODS_FINGERPRINT_METHOD: Final = "nodeTopologyPodsFingerprintMethod"
# toposched's own attributes: where a figure came from, for people reading the NRT.
NRT_ATTR_CPU_SOURCE: Final = "toposched.io/cpu"
NRT_ATTR_MEMORY_SOURCE: Final = "toposched.io/memory"
NRT_ATTR_PODRESOURCES: Final = "toposched.io/podresources"
NRT_ATTR_NUMA: Final = "toposched.io/numa"
NRT_ATTR_MEMORY_NUMA_GROUPS: Final = "toposched.io/memory-numa-groups"
"""The NUMA node groups of the Static Memory Manager's multi-NUMA allocations, ``;``-separated
lists such as ``0-1;2,3``: the kubelet will not pin new memory across or into part of a group."""
NRT_ATTR_DEVICE_GROUPS: Final = "toposched.io/device-groups"
"""Devices the zones cannot show on their own (``toposched.apis.devicegroups``): those attached to
several NUMA zones, which every one of those zones counts, and those without topology, which no
zone counts."""
NRT_ATTR_THREADS_PER_CORE: Final = "toposched.io/threads-per-core"
"""CPUs per physical core (2 with SMT), published when every core has the same number."""
NRT_ATTR_POD_CPUS: Final = "toposched.io/pod-cpus"
"""The exclusive CPUs of each pod the NRT counts, by NUMA zone (``toposched.apis.podcpus``): a
placement that knows a pod has ended while its NRT still counts it gives those CPUs back on the
zones they were on, as the kubelet does at its next admission."""
NRT_ATTR_KUBELET_RESTART: Final = "toposched.io/kubelet-restart"
"""Present while the kubelet may still be handling its first pods since it (re)started: what the
pods it no longer runs hold counts as held (``toposched.exporter.restarts``)."""
# toposched's attributes of one NUMA zone, read from the kubelet's checkpoints (absent in estimate mode).
NRT_ZONE_ATTR_FREE_CORES: Final = "toposched.io/free-cores"
"""Physical cores of the zone whose every CPU is free: the CPU Manager hands these out whole
before it splits any (its packed allocator's takeFullCores)."""
NRT_ZONE_ATTR_SOCKET: Final = "toposched.io/socket"
"""The physical package (socket) of the zone's CPUs: the CPU Manager's align-by-socket option
prefers hints, and takes CPUs, by socket."""
NRT_ZONE_ATTR_MEMORY_CELLS: Final = "toposched.io/memory-numa-cells"
"""Set while the Static Memory Manager has memory assigned on the zone: the NUMA nodes it
groups the zone with (``0-1``; the zone alone after a single-NUMA allocation). The kubelet's
own per-zone state, which can differ between the members of one group."""
PREFER_CLOSEST_NUMA_NODES: Final = "prefer-closest-numa-nodes"
"""The Topology Manager policy option (in topologyManagerPolicyOptions) that weighs NUMA distances."""

# Set by the extender on the pods it binds: the NUMA zones the kubelet was predicted to use,
# e.g. ``["node-1"]``.
NUMA_ZONES_ANNOTATION: Final = "toposched.io/numa-zones"
# Set by the extender on a pending pod it refused, once room may have freed in its own view (an NRT,
# a reservation, a blind node, DRA devices): kube-scheduler does not watch those, and an update of
# the pod is what makes it try the pod again before its 5-minute retry. An RFC 3339 time; nothing
# reads it.
REQUEUED_AT_ANNOTATION: Final = "toposched.io/requeued-at"
# Whether a pod's DRA devices must lie on the NUMA zones of its pinned CPUs: strict, prefer or off
# (the cluster's default: strict on nodes under single-numa-node or restricted, prefer elsewhere).
DRA_ALIGNMENT_ANNOTATION: Final = "toposched.io/dra-alignment"
# The scheduling gate that holds an AppGroup's pods until their turn in the topology order.
ORDER_GATE: Final = "toposched.io/topology-order"

# Who toposched's Events come from (source.component / reportingComponent).
OPERATOR_COMPONENT: Final = "toposched-operator"
SCHEDHOOK_COMPONENT: Final = "toposched-schedhook"
