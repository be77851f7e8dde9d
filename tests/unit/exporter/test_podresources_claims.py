"""PodResources List's DRA devices (``dynamic_resources``) in the exporter's model."""

from toposched.exporter.podresources._generated import api_pb2
from toposched.exporter.podresources.client import to_pods
from toposched.exporter.topology import ClaimDevice


def test_a_container_s_claimed_devices_are_read() -> None:
    claimed = api_pb2.DynamicResource(
        claim_name="p-gpu-x1",
        claim_namespace="ns",
        claim_resources=[
            api_pb2.ClaimResource(driver_name="gpu.example.com", pool_name="n1", device_name="gpu-0"),
            api_pb2.ClaimResource(driver_name="gpu.example.com", pool_name="n1", device_name="gpu-1"),
        ],
    )
    response = api_pb2.ListPodResourcesResponse(
        pod_resources=[
            api_pb2.PodResources(
                name="p",
                namespace="ns",
                containers=[
                    api_pb2.ContainerResources(name="app", cpu_ids=[3], dynamic_resources=[claimed]),
                    api_pb2.ContainerResources(name="side"),
                ],
            )
        ]
    )
    (pod,) = to_pods(response)
    app, side = pod.containers
    assert app.claims == (
        ClaimDevice("ns", "p-gpu-x1", "gpu.example.com", "n1", "gpu-0"),
        ClaimDevice("ns", "p-gpu-x1", "gpu.example.com", "n1", "gpu-1"),
    )
    assert app.cpu_ids == (3,)
    assert side.claims == ()
