"""Extender hot path: one pod evaluated against N nodes with two-NUMA NRTs (pure, no HTTP)."""

import random
import time
from typing import Any

from bench.stats import summary
from schedhook.cache import ClusterCache
from schedhook.placement.evaluate import Config, evaluate_pod
from schedhook.placement.objects import snapshot


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
        {"name": "topologyManagerPolicy", "value": "single-numa-node"},
        {"name": "topologyManagerScope", "value": "container"},
        {"name": "cpuManagerPolicy", "value": "static"},
        {"name": "memoryManagerPolicy", "value": "Static"},
    ]
    return {"metadata": {"name": name}, "zones": zones, "attributes": attributes}


POD = {
    "metadata": {"name": "p", "namespace": "default", "uid": "u"},
    "spec": {
        "containers": [{"name": "app", "resources": {"limits": {"cpu": "8", "memory": "16Gi", "example.com/nic": "1"}}}]
    },
}


def run(nodes: int = 5000, repeats: int = 15) -> dict[str, Any]:
    """The pure path (evaluate) and the extender's path (cached snapshot + evaluate, no HTTP)."""
    rng = random.Random(4)
    bodies = [nrt(f"n{i}", rng) for i in range(nodes)]
    for i, body in enumerate(bodies):
        body["metadata"]["resourceVersion"] = str(i)
    snap = snapshot(nrts=bodies)
    names = sorted(snap.nrts)
    pure, extender = [], []
    fits = 0
    cache = ClusterCache(api=None, weights_name="NetperfCosts")  # no watches: objects are filled in below
    cache.objects["nrts"] = {b["metadata"]["name"]: b for b in bodies}
    cache.snapshot()  # warm the parse cache, as a running extender has it
    for _ in range(repeats):
        t0 = time.perf_counter()
        results = evaluate_pod(POD, names, snap, Config())
        t1 = time.perf_counter()
        evaluate_pod(POD, names, cache.snapshot(), Config())
        t2 = time.perf_counter()
        pure.append((t1 - t0) * 1000)
        extender.append((t2 - t1) * 1000)
        fits = sum(r.fit for r in results)
    return {"nodes": nodes, "fitting": fits, "evaluate_ms": summary(pure, "ms"), "extender_ms": summary(extender, "ms")}


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
