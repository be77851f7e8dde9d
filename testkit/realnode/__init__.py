"""Real kubelet nodes with fake NUMA topologies in the local cluster (dev and test only).

    from testkit.realnode import KubeletSettings, Topology, add_node, remove_node

    node = add_node("numa-a", Topology.uniform(zones=2, cores_per_zone=4), KubeletSettings())
    pod = workload_pod("p", node="numa-a", cpu=2, memory="256Mi")  # Guaranteed, tolerates the taint
    ...  # create it; node.assigned_cpus(uid), node.pod_resources_socket, node.cpu_manager_state()
    remove_node("numa-a")

    gpus = NodeDevices.parse(["example.com/gpu=0,0,1,1"])  # served by a real device plugin
    node = add_node("numa-b", devices=gpus)  # returns once the Node shows them
    node.device_plugin.set_health("example.com/gpu", "gpu-0", healthy=False)  # restart(), stop(), calls()

    dra = NodeDRA.parse(["gpu.example.com=0,0,1,1"])  # published by a real DRA driver
    node = add_node("numa-c", dra=dra)  # returns once the kubelet registered it and its slices are up
    ensure_device_class("gpu.example.com")  # claims ask for the driver's devices through it
    node.dra_driver.calls("NodePrepareResources")  # restart(), stop(), set_devices(), slices()

CLI: ``python -m testkit.realnode add|remove|reset|list|down`` (``hack/cluster.sh`` uses it).
"""

from testkit.realnode.devices import Device, DeviceResource, DevicesError, NodeDevices
from testkit.realnode.dra import DRAError, NodeDRA, resource_claim_template
from testkit.realnode.dra_driver import ensure_device_class
from testkit.realnode.errors import KubeletDiedError, MissingToolError, RealNodeError
from testkit.realnode.images import PAUSE_IMAGE, WORKLOAD_IMAGE
from testkit.realnode.node import (
    NODE_LABEL,
    NODE_TOLERATION,
    RealNode,
    add_node,
    default_topology,
    down,
    get_node,
    leftovers,
    list_nodes,
    missing_tools,
    remove_node,
    reset_node,
)
from testkit.realnode.pods import scheduled_pod, workload_pod
from testkit.realnode.settings import KubeletSettings, SettingsError
from testkit.realnode.topology import GIB, MIB, Topology, Zone

__all__ = [
    "GIB",
    "MIB",
    "NODE_LABEL",
    "NODE_TOLERATION",
    "PAUSE_IMAGE",
    "WORKLOAD_IMAGE",
    "DRAError",
    "Device",
    "DeviceResource",
    "DevicesError",
    "KubeletDiedError",
    "KubeletSettings",
    "MissingToolError",
    "NodeDRA",
    "NodeDevices",
    "RealNode",
    "RealNodeError",
    "SettingsError",
    "Topology",
    "Zone",
    "add_node",
    "default_topology",
    "down",
    "ensure_device_class",
    "get_node",
    "leftovers",
    "list_nodes",
    "missing_tools",
    "remove_node",
    "reset_node",
    "resource_claim_template",
    "scheduled_pod",
    "workload_pod",
]
