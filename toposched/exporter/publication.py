"""What the exporter publishes at each refresh: the node's NRT, built from the machine, the
kubelet's files and what PodResources last said; the Node's Topology Manager labels; and, when
asked, the NICs' bandwidth. A problem with an input is logged once, not at every refresh.
"""

import logging
import time
from decimal import Decimal
from typing import Any

from prometheus_client import Counter, Gauge

from toposched.apis.constants import (
    NRT_ATTR_KUBELET_RESTART,
    TOPOLOGY_MANAGER_POLICY_LABEL,
    TOPOLOGY_MANAGER_SCOPE_LABEL,
)
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.apis.quantity import parse_quantity
from toposched.exporter import checkpoints
from toposched.exporter.checkpoints import Checkpoints
from toposched.exporter.kubeletconfig import KubeletConfig, load
from toposched.exporter.publisher import Publisher
from toposched.exporter.restarts import RestartHold
from toposched.exporter.settings import ExporterSettings
from toposched.exporter.sysfs import read_machine
from toposched.exporter.topology import Allocatable, Inputs, PodUse, build, device_problems
from toposched.kube.nodeclient import ApiError

logger = logging.getLogger(__name__)

WRITES = Counter("toposched_exporter_writes_total", "NRT writes (creates and replaces).")
ZONE_FIGURES = {
    which: Gauge(
        f"toposched_exporter_zone_{which}",
        f"The {which} amount of each resource of each NUMA zone of this node's NRT (CPUs, bytes, devices).",
        ["node", "zone", "resource"],
    )
    for which in ("allocatable", "available")
}
"""Per exporter, its own node's zones x resources: series grow with the nodes alone."""


def zone_figures(nrt: NodeResourceTopology) -> None:
    """The zones' allocatable and available figures as gauges (a resource gone goes from them too)."""
    for gauge in ZONE_FIGURES.values():
        gauge.clear()
    for zone in nrt.zones:
        for r in zone.resources or []:
            for which, gauge in ZONE_FIGURES.items():
                gauge.labels(nrt.name, zone.name, r.name).set(float(parse_quantity(getattr(r, which))))


class Publication:
    """Publishes for one node, remembering which problems it has told of."""

    def __init__(self, settings: ExporterSettings) -> None:
        self.settings = settings
        self.device_problem = ""
        self.label_refused = ""
        self.checkpoint_problems: set[str] = set()

    async def publish(
        self,
        publisher: Publisher,
        allocatable: Allocatable | None,
        pods: list[PodUse] | None,
        restart: RestartHold | None = None,
    ) -> bool:
        """One refresh, from PodResources' last answers (None: none yet); True when the NRT was
        written. While ``restart`` holds, what pods the kubelet no longer runs hold counts as held."""
        node = await publisher.read_node()
        owner = {"apiVersion": "v1", "kind": "Node", "name": self.settings.node, "uid": node["metadata"]["uid"]}
        node_allocatable = node.get("status", {}).get("allocatable") or {}
        inputs = self.inputs(owner, {k: parse_quantity(v) for k, v in node_allocatable.items()}, allocatable, pods)
        inputs.hold_stale = restart is not None and restart.holding(time.time())
        nrt = build(inputs)
        if restart is not None and inputs.hold_stale and nrt.attribute(NRT_ATTR_KUBELET_RESTART) is None:
            restart.dropped()  # the checkpoints hold nothing stale: no hold for this kubelet
        written = await publisher.publish(nrt)
        if written:
            WRITES.inc()
        zone_figures(nrt)
        await self.label(publisher, node, inputs.kubelet)
        if self.settings.advertise_bandwidth:
            speeds = [nic.speed_bps for nic in inputs.machine.nics if nic.speed_bps]
            if speeds:
                await publisher.advertise_bandwidth(sum(speeds))
        return written

    def inputs(
        self,
        owner: dict[str, str],
        node_allocatable: dict[str, Decimal],
        allocatable: Allocatable | None,
        pods: list[PodUse] | None,
    ) -> Inputs:
        machine = read_machine(self.settings.sysfs)
        for warning in machine.warnings:
            logger.debug("sysfs: %s", warning)
        problem = device_problems(machine, allocatable) if allocatable is not None else ""
        if problem and problem != self.device_problem:  # once per kind of garbage, not every refresh
            logger.warning("the kubelet's device list: %s; left out of the NRT", problem)
        self.device_problem = problem
        return Inputs(
            node=self.settings.node,
            machine=machine,
            kubelet=load(self.settings.kubelet_config),
            allocatable=allocatable,
            pods=pods,
            node_allocatable=node_allocatable,
            fingerprint_method=self.settings.fingerprint_method,
            owner=owner,
            checkpoints=self.checkpoints(),
        )

    def checkpoints(self) -> Checkpoints:
        found = checkpoints.read(self.settings.kubelet_state_dir)
        for problem in found.problems:
            if problem not in self.checkpoint_problems:  # said once, not at every refresh
                logger.warning("ignoring a kubelet checkpoint: %s", problem)
        self.checkpoint_problems = set(found.problems)
        return found

    async def label(self, publisher: Publisher, node: dict[str, Any], kubelet: KubeletConfig) -> None:
        """The Node says its kubelet's Topology Manager policy and scope (labels), so that the
        scheduler side knows a NUMA-managed node even while its NRT is missing. Best effort: a
        refusal (RBAC, an admission policy) is said once and publishing goes on."""
        labels = {
            TOPOLOGY_MANAGER_POLICY_LABEL: kubelet.topology_manager_policy,
            TOPOLOGY_MANAGER_SCOPE_LABEL: kubelet.topology_manager_scope,
        }
        try:
            await publisher.label_node(node, labels)
            self.label_refused = ""
        except ApiError as exc:
            if str(exc) != self.label_refused:
                logger.warning("cannot label node %s with its Topology Manager policy: %s", self.settings.node, exc)
            self.label_refused = str(exc)
