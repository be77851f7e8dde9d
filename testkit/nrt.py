"""A random NRT and a pod to place on it, for tests and benchmarks that need many nodes."""

import random
from typing import Any

from testkit.builders import Figures, nrt_body, pod_body


def nrt(name: str, rng: random.Random) -> dict[str, Any]:
    """Two zones of 32 CPUs, 120 GiB and 4 NICs each, with random amounts of them free; the
    kubelet's static CPU and Memory Managers under single-numa-node."""
    zones: list[dict[str, Figures]] = []
    for _ in range(2):
        cpu = rng.randint(0, 32)
        memory = f"{rng.randint(1, 120)}Gi"
        zones.append(
            {"cpu": (32, 32, cpu), "memory": ("128Gi", "120Gi", memory), "example.com/nic": (4, 4, rng.randint(0, 4))}
        )
    return nrt_body(name, zones, memory_manager="Static", distances=[[10, 21], [21, 10]])


POD: dict[str, Any] = pod_body("p", namespace="default", uid="u", cpu=8, memory="16Gi", devices={"example.com/nic": 1})
"""A Guaranteed pod of 8 CPUs, 16 GiB and one NIC."""


def nrt8(name: str, rng: random.Random) -> dict[str, Any]:
    """Eight zones of 16 CPUs, 60 GiB, 2 GPUs and 2 NICs each, random amounts of them free (a
    GPU machine with sub-NUMA clustering); the same managers and policy as :func:`nrt`."""
    zones: list[dict[str, Figures]] = []
    for _ in range(8):
        zones.append(
            {
                "cpu": (16, 16, rng.randint(0, 16)),
                "memory": ("64Gi", "60Gi", f"{rng.randint(1, 60)}Gi"),
                "example.com/gpu": (2, 2, rng.randint(0, 2)),
                "example.com/nic": (2, 2, rng.randint(0, 2)),
            }
        )
    distances = [[10 if i == j else 12 if i // 4 == j // 4 else 21 for j in range(8)] for i in range(8)]
    return nrt_body(name, zones, memory_manager="Static", distances=distances)
