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

# NodeResourceTopology conventions.
NRT_ZONE_TYPE_NODE: Final = "Node"
NRT_ZONE_PREFIX: Final = "node-"
NRT_ATTR_TOPOLOGY_MANAGER_POLICY: Final = "topologyManagerPolicy"
NRT_ATTR_TOPOLOGY_MANAGER_SCOPE: Final = "topologyManagerScope"
