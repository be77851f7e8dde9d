"""Pod-level resources (spec.resources): the QoS class comes from them, the scheduler counts them,
and the kubelet's CPU and Memory Managers leave such a pod alone (1.36 default gates); its
devices are still aligned."""

from decimal import Decimal
from typing import Any

import pytest

from toposched.schedhook.placement.kubelet.claims import container_claims, effective, pod_claims
from toposched.schedhook.placement.kubelet.claims import qos as claims_qos
from toposched.schedhook.placement.parse import pod_from_spec


def spec(level: dict[str, Any] | None, container: dict[str, Any] | None = None) -> dict[str, Any]:
    app: dict[str, Any] = {"name": "app"}
    if container is not None:
        app["resources"] = container
    body: dict[str, Any] = {"containers": [app]}
    if level is not None:
        body["resources"] = level
    return body


GUARANTEED = {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}
GPU = {"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}}


@pytest.mark.parametrize(
    ("body", "qos", "cpus", "memory", "devices", "effective_cpu"),
    [
        pytest.param(spec(None, GUARANTEED), "Guaranteed", 2, True, {}, "2", id="container-level"),
        pytest.param(spec(GUARANTEED), "Guaranteed", 0, False, {}, "2", id="pod-level-guaranteed"),
        pytest.param(spec(GUARANTEED, GUARANTEED), "Guaranteed", 0, False, {}, "2", id="both-levels"),
        pytest.param(spec(GUARANTEED, GPU), "Guaranteed", 0, False, {"example.com/gpu": 1}, "2", id="pod-level-gpu"),
        pytest.param(
            spec({"limits": {"cpu": "4"}}, GUARANTEED), "Burstable", 0, False, {}, "4", id="pod-level-cpu-limit-only"
        ),
        pytest.param(spec({"requests": {"memory": "1Gi"}}, None), "Burstable", 0, False, {}, None, id="memory-only"),
    ],
)
def test_pod_level_resources(
    body: dict[str, Any],
    qos: str,
    cpus: int,
    memory: bool,
    devices: dict[str, int],
    effective_cpu: str | None,
) -> None:
    pod = pod_from_spec(body)
    assert claims_qos(pod) == qos
    claims = container_claims(pod, pod.containers[0])
    assert claims.cpus == cpus
    assert bool(claims.memory) == memory
    assert claims.devices == {r: Decimal(k) for r, k in devices.items()}
    assert pod_claims(pod).cpus == cpus
    got = effective(pod).get("cpu")
    assert got == (Decimal(effective_cpu) if effective_cpu is not None else None)


def test_pod_level_resources_must_be_an_object() -> None:
    with pytest.raises(ValueError, match=r"spec\.resources: expected an object"):
        pod_from_spec({"containers": [{"name": "app"}], "resources": ["cpu"]})
