from hypothesis import given, settings

from testkit.placement import nodes, pods
from toposched.schedhook.placement.kubelet import predict
from toposched.schedhook.placement.model import NodeTopology, Pod
from toposched.schedhook.placement.single_numa import admit_zone, applies, hinted


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
