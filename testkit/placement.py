"""Builders of placement models for tests: quantities, nodes and containers by hand, and hypothesis
strategies for random nodes and pods."""

from decimal import Decimal

from hypothesis import strategies as st

from toposched.apis.quantity import parse_quantity
from toposched.schedhook.placement.model import Container, NodeTopology, NumaZone, Pod


def q(values: dict[str, str | int]) -> dict[str, Decimal]:
    return {k: parse_quantity(v) for k, v in values.items()}


def node(
    zones: list[dict[str, str | int]],
    policy: str = "single-numa-node",
    scope: str = "container",
    cpu: str | None = None,
    memory: str | None = None,
    extra: dict[str, str | int] | None = None,
    capacity: list[dict[str, str | int]] | None = None,
    allocatable: list[dict[str, str | int]] | None = None,
    distances: list[list[int]] | None = None,
    prefer_closest: bool = False,
    memory_groups: tuple[int, ...] = (),
    free_cores: list[int] | None = None,
    threads_per_core: int | None = None,
    memory_cells: list[int | None] | None = None,
) -> NodeTopology:
    """Zones given by their available amounts (allocatable = capacity = available unless told)."""
    built = []
    for i, z in enumerate(zones):
        cap = q(capacity[i]) if capacity else q(z)
        pinnable = q(allocatable[i]) if allocatable else cap
        cores = free_cores[i] if free_cores else None
        cells = memory_cells[i] if memory_cells else None
        built.append(NumaZone(i, cap, pinnable, q(z), free_cores=cores, memory_cells=cells))
    node_allocatable: dict[str, Decimal] = {}
    for z in zones:
        for k, v in q(z).items():
            node_allocatable[k] = node_allocatable.get(k, Decimal(0)) + v
    node_allocatable.update(q(extra or {}))
    node_allocatable.setdefault("ephemeral-storage", Decimal(10**12))
    table = {i: dict(enumerate(row)) for i, row in enumerate(distances or [])}
    return NodeTopology(
        "n",
        tuple(built),
        policy,
        scope,
        cpu,
        memory,
        node_allocatable,
        distances=table,
        prefer_closest=prefer_closest,
        memory_groups=memory_groups,
        threads_per_core=threads_per_core,
    )


def g(name: str = "c", **resources: str | int) -> Container:
    """A Guaranteed container: requests == limits."""
    values = q({k.replace("_", "-").replace("nic", "example.com/nic"): v for k, v in resources.items()})
    return Container(name, values, values)


RESOURCES = ["cpu", "memory", "hugepages-1Gi", "example.com/nic"]


@st.composite
def nodes(draw: st.DrawFn) -> NodeTopology:
    count = draw(st.integers(1, 4))
    zones = []
    for i in range(count):
        capacity = {r: Decimal(draw(st.integers(0, 16))) for r in RESOURCES if draw(st.booleans()) or r == "cpu"}
        available = {r: Decimal(draw(st.integers(0, int(v)))) for r, v in capacity.items()}
        zones.append(NumaZone(i, capacity, capacity, available))
    cpu = draw(st.sampled_from(["static", "none"]))
    memory = draw(st.sampled_from(["Static", "None"]))
    return NodeTopology("n", tuple(zones), "single-numa-node", draw(st.sampled_from(["container", "pod"])), cpu, memory)


@st.composite
def pods(draw: st.DrawFn) -> Pod:
    requests = {r: Decimal(draw(st.integers(0, 12))) for r in RESOURCES if draw(st.booleans())}
    if draw(st.booleans()):
        requests["cpu"] = Decimal(draw(st.sampled_from(["0.5", "1", "2", "5", "9"])))
    guaranteed = draw(st.booleans())
    limits = dict(requests) if guaranteed else {}
    if guaranteed:
        limits.setdefault("cpu", Decimal(1))
        limits.setdefault("memory", Decimal(1))
    return Pod((Container("c", requests if not guaranteed else {}, limits),))
