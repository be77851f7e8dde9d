"""``toposched capacity`` at scale: 3 shapes over N nodes, the count alone (objects already read:
the NRTs parsed, the nodes judged and counted). The goal is 2 s at 5,000 nodes; on a shared
machine the process's CPU time says what the count itself costs, the wall time what was waited.

Two clusters. "fleet": machines of two kinds whose zones hold a random number of pods of a few
workload shapes, as a cluster running Deployments does (few distinct node states). "random": the
extender benchmark's nodes, every zone's free amounts drawn at random (every node distinct: the
worst case for the count, which answers each distinct node state once).
"""

import json
import random
import sys
import time
from typing import Any

from bench.stats import summary
from testkit.builders import Figures, nrt_body
from testkit.nrt import nrt
from toposched.schedhook.capacityreport import Objects, count
from toposched.schedhook.placement.shapes import inline_shape

SHAPES = ("gpu-train=cpu:8,memory:16Gi,example.com/gpu:1", "web=cpu:2,memory:4Gi", "big=cpu:16,memory:64Gi")
WORKLOADS = ((4, 8), (2, 4), (8, 16))
"""(CPUs, GiB) of the pods already running."""


def fleet(name: str, rng: random.Random) -> dict[str, Any]:
    """Two zones of 32 CPUs, 120 GiB and 2 GPUs, each holding up to three pods of the workloads."""
    zones: list[dict[str, Figures]] = []
    for _ in range(2):
        cpu, memory, gpus = 32, 120, 2
        for _ in range(rng.randint(0, 3)):
            c, m = rng.choice(WORKLOADS)
            cpu, memory = cpu - c, memory - m
        gpus -= rng.randint(0, 1)
        zones.append(
            {"cpu": (32, 32, cpu), "memory": ("128Gi", "120Gi", f"{memory}Gi"), "example.com/gpu": (2, 2, gpus)}
        )
    return nrt_body(name, zones, memory_manager="Static", distances=[[10, 21], [21, 10]])


GOAL_S = 2.0


def _timed(bodies: list[dict[str, Any]], repeats: int) -> tuple[list[float], list[float], dict[str, int]]:
    """Wall and CPU seconds of each count, and each shape's copies."""
    shapes = [inline_shape(s) for s in SHAPES]
    objects = Objects([], bodies, [], {})
    wall, cpu, totals = [], [], {}
    for _ in range(repeats):
        started, used = time.perf_counter(), time.process_time()
        result = count(objects, shapes, 30.0, time.time())
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
        totals = {c.shape.name: c.total for c in result.shapes}
    return wall, cpu, totals


def run(nodes: int = 5000, repeats: int = 3) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": nodes, "shapes": list(SHAPES), "goal_s": GOAL_S}
    for label, make in (("fleet", fleet), ("random", nrt)):
        rng = random.Random(7)
        bodies = [make(f"n{i}", rng) for i in range(nodes)]
        for body in bodies:  # the random NRTs have NICs, the shapes GPUs: give every node some
            for zone in body["zones"]:
                if not any(r["name"] == "example.com/gpu" for r in zone["resources"]):
                    zone["resources"].append(
                        {"name": "example.com/gpu", "capacity": "2", "allocatable": "2", "available": "1"}
                    )
        wall, cpu, totals = _timed(bodies, repeats)
        out[label] = {"count_s": summary(wall, "s"), "count_cpu_s": summary(cpu, "s"), "fits": totals}
    return out


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 5000), indent=2))
