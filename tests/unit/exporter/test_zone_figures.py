"""The exporter's per-zone gauges follow its NRT: each zone's allocatable and available amounts
per resource, a resource gone from the NRT gone from the gauges."""

from prometheus_client import REGISTRY

from testkit.builders import nrt_body
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.exporter.publication import zone_figures

GPU = "example.com/gpu"


def sample(which: str, zone: str, resource: str) -> float | None:
    labels = {"node": "n1", "zone": zone, "resource": resource}
    return REGISTRY.get_sample_value(f"toposched_exporter_zone_{which}", labels)


def test_zone_gauges_follow_the_nrt() -> None:
    zones = [{"cpu": (8, 7, 3), "memory": ("16Gi", "15Gi", "4Gi"), GPU: (2, 2, 1)}, {"cpu": (8, 8, 8)}]
    zone_figures(NodeResourceTopology.model_validate(nrt_body("n1", zones)))
    assert (sample("allocatable", "node-0", "cpu"), sample("available", "node-0", "cpu")) == (7, 3)
    assert sample("available", "node-0", "memory") == 4 * 2**30
    assert sample("available", "node-0", GPU) == 1
    assert sample("available", "node-1", "cpu") == 8
    zone_figures(NodeResourceTopology.model_validate(nrt_body("n1", zones[1:])))
    assert sample("available", "node-0", GPU) is None
