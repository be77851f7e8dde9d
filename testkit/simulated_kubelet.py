"""The kubelets of kwok nodes, as far as NUMA admission goes: our admission simulator. Pure.

kwok runs no kubelet, so the benchmarks decide what each node's Topology Manager would do with
the pods bound to it, in binding order: ``placement.kubelet.admission.predict`` on the node's
current zones (the same kubelet rules the extender predicts with), then the request is taken
from the chosen zones.
A rejected pod is a TopologyAffinityError and holds nothing. ``nrt`` renders the node's NRT as
an exporter would publish it.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from testkit.builders import Figures, nrt_body
from toposched.apis.constants import NRT_ATTR_PODS_FINGERPRINT, NRT_ATTR_PODS_FINGERPRINT_METHOD
from toposched.apis.fingerprint import METHOD_EXCLUSIVE, fingerprint
from toposched.schedhook.placement.kubelet.admission import predict
from toposched.schedhook.placement.kubelet.claims import effective
from toposched.schedhook.placement.model import NodeTopology, NumaZone, Pod

GPU = "example.com/gpu"


@dataclass
class Node:
    name: str
    policy: str
    zones: list[dict[str, Decimal]]
    """Per NUMA zone: allocatable per resource."""
    scope: str = "container"
    available: list[dict[str, Decimal]] = field(default_factory=list)
    admitted: int = 0
    rejected: int = 0
    pods: list[tuple[str, str]] = field(default_factory=list)
    """(namespace, name) of the admitted pods, for the NRT's pods fingerprint."""

    def __post_init__(self) -> None:
        if not self.available:
            self.available = [dict(z) for z in self.zones]

    def topology(self) -> NodeTopology:
        zones = tuple(NumaZone(i, z, z, dict(self.available[i])) for i, z in enumerate(self.zones))
        return NodeTopology(self.name, zones, self.policy, self.scope, "static", "Static")

    def admit(self, pod: Pod, key: tuple[str, str] = ("", "")) -> tuple[bool, tuple[int, ...]]:
        """The kubelet's decision; on admission the request is taken from the chosen zones."""
        verdict = predict(self.topology(), pod)
        if not verdict.admit:
            self.rejected += 1
            return False, ()
        if self.scope == "pod":
            requests = [(effective(pod), verdict.numa.get("pod", ()))]
        else:
            requests = [(c.request, verdict.numa.get(c.name, ())) for c in pod.containers]
        used: set[int] = set()
        for request, zones in requests:
            used.update(zones)
            for resource, amount in request.items():
                for z in sorted(zones):
                    free = self.available[z].get(resource)
                    if free is None or amount <= 0:
                        continue
                    take = min(free, amount)
                    self.available[z][resource] = free - take
                    amount -= take
        self.admitted += 1
        self.pods.append(key)
        return True, tuple(sorted(used))

    def nrt(self) -> dict[str, Any]:
        zones: list[dict[str, Figures]] = [
            {r: (_q(v), _q(v), _q(self.available[i][r])) for r, v in sorted(allocatable.items())}
            for i, allocatable in enumerate(self.zones)
        ]
        distances = [[10 if i == j else 21 for j in range(len(zones))] for i in range(len(zones))]
        # Every bench pod holds exclusive CPUs, so "all" and "with-exclusive-resources" agree.
        pods = {NRT_ATTR_PODS_FINGERPRINT: fingerprint(self.pods), NRT_ATTR_PODS_FINGERPRINT_METHOD: METHOD_EXCLUSIVE}
        return nrt_body(
            self.name,
            zones,
            policy=self.policy,
            scope=self.scope,
            memory_manager="Static",
            attributes=pods,
            distances=distances,
        )

    def totals(self) -> dict[str, str]:
        out: dict[str, Decimal] = {}
        for zone in self.zones:
            for r, v in zone.items():
                out[r] = out.get(r, Decimal(0)) + v
        return {r: _q(v) for r, v in out.items()} | {"pods": "250"}


def _q(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral_value() else str(value)


def two_numa(name: str, policy: str, cpu: int = 16, memory_gi: int = 64, gpus: int = 2) -> Node:
    zone = {"cpu": Decimal(cpu), "memory": Decimal(memory_gi * 2**30), GPU: Decimal(gpus)}
    return Node(name, policy, [dict(zone), dict(zone)])


def replay(nodes: Mapping[str, Node], binds: list[tuple[str, Pod]]) -> tuple[int, int]:
    """(admitted, TopologyAffinityErrors) of pods bound in this order."""
    ok = errors = 0
    for node, pod in binds:
        admitted, _ = nodes[node].admit(pod)
        ok, errors = ok + admitted, errors + (not admitted)
    return ok, errors
