from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from schedhook.placement.fast import admit_zone, applies, hinted
from schedhook.placement.numa import Container, NodeTopology, Pod, Zone, predict

RESOURCES = ["cpu", "memory", "hugepages-1Gi", "example.com/nic"]


@st.composite
def nodes(draw: st.DrawFn) -> NodeTopology:
    count = draw(st.integers(1, 4))
    zones = []
    for i in range(count):
        capacity = {r: Decimal(draw(st.integers(0, 16))) for r in RESOURCES if draw(st.booleans()) or r == "cpu"}
        available = {r: Decimal(draw(st.integers(0, int(v)))) for r, v in capacity.items()}
        zones.append(Zone(i, capacity, capacity, available))
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


@settings(max_examples=400, deadline=None)
@given(nodes(), pods())
def test_fast_path_agrees_with_the_full_prediction(node: NodeTopology, pod: Pod) -> None:
    assert applies(pod, node)
    requests = hinted(pod, node)
    assert requests is not None
    admitted, zones = admit_zone(pod, node, requests)
    verdict = predict(node, pod)
    assert admitted == verdict.admit
    if admitted:
        assert zones == verdict.numa["pod" if node.scope == "pod" else "c"]
