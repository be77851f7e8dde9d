"""NRT and pod bodies (plain dicts, as the API returns them) for tests and benchmarks."""

import random
from typing import Any

from toposched.apis.constants import (
    NRT_ATTR_CPU_MANAGER_POLICY,
    NRT_ATTR_MEMORY_MANAGER_POLICY,
    NRT_ATTR_TOPOLOGY_MANAGER_POLICY,
    NRT_ATTR_TOPOLOGY_MANAGER_SCOPE,
)


def nrt(name: str, rng: random.Random) -> dict[str, Any]:
    zones = []
    for i in range(2):
        cpu = rng.randint(0, 32)
        resources = [
            {"name": "cpu", "capacity": 32, "allocatable": 32, "available": cpu},
            {"name": "memory", "capacity": "128Gi", "allocatable": "120Gi", "available": f"{rng.randint(1, 120)}Gi"},
            {"name": "example.com/nic", "capacity": 4, "allocatable": 4, "available": rng.randint(0, 4)},
        ]
        zones.append(
            {
                "name": f"node-{i}",
                "type": "Node",
                "resources": resources,
                "costs": [
                    {"name": "node-0", "value": 10 if i == 0 else 21},
                    {"name": "node-1", "value": 21 if i == 0 else 10},
                ],
            }
        )
    attributes = [
        {"name": NRT_ATTR_TOPOLOGY_MANAGER_POLICY, "value": "single-numa-node"},
        {"name": NRT_ATTR_TOPOLOGY_MANAGER_SCOPE, "value": "container"},
        {"name": NRT_ATTR_CPU_MANAGER_POLICY, "value": "static"},
        {"name": NRT_ATTR_MEMORY_MANAGER_POLICY, "value": "Static"},
    ]
    return {"metadata": {"name": name}, "zones": zones, "attributes": attributes}


POD: dict[str, Any] = {
    "metadata": {"name": "p", "namespace": "default", "uid": "u"},
    "spec": {
        "containers": [{"name": "app", "resources": {"limits": {"cpu": "8", "memory": "16Gi", "example.com/nic": "1"}}}]
    },
}
