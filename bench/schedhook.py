"""Extender hot path: one pod against N nodes with two-NUMA NRTs.

Two figures: the pure evaluation (``placement.evaluate``, columns over a synced table) and the
extender over HTTP -- a client in a separate process posts kube-scheduler's filter and then
prioritize requests (node names only, ``nodeCacheCapable``) and times each pair end to end, with
the request bodies encoded beforehand so the client adds nothing but the socket.
"""

import asyncio
import gc
import json
import random
import subprocess
import sys
import time
from typing import Any

from aiohttp import web

from bench.stats import summary
from schedhook.cache import ClusterCache
from schedhook.placement.evaluate import Config, evaluate
from schedhook.placement.objects import snapshot
from schedhook.server import Extender


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

CLIENT = """
import http.client, json, sys, time
port, repeats = int(sys.argv[1]), int(sys.argv[2])
filter_body = sys.stdin.buffer.read()
conn = http.client.HTTPConnection("127.0.0.1", port)
headers = {"Content-Type": "application/json"}
out = []
for i in range(repeats + 3):
    t0 = time.perf_counter()
    conn.request("POST", "/filter", filter_body, headers)
    answer = conn.getresponse().read()
    t1 = time.perf_counter()
    fitting = json.loads(answer)["NodeNames"]
    prioritize = json.dumps({"Pod": json.loads(filter_body)["Pod"], "NodeNames": fitting}).encode()
    t2 = time.perf_counter()
    conn.request("POST", "/prioritize", prioritize, headers)
    conn.getresponse().read()
    t3 = time.perf_counter()
    if i >= 3:  # warm-up: connection, first table sync
        out.append([(t1 - t0) * 1000, (t3 - t2) * 1000])
print(json.dumps(out))
"""


async def _over_http(cache: ClusterCache, names: list[str], repeats: int) -> list[list[float]]:
    extender = Extender(cache, api=None, config=Config(), bind_wait=0)
    runner = web.AppRunner(extender.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    body = json.dumps({"Pod": POD, "NodeNames": names}).encode()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CLIENT,
        str(port),
        str(repeats),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    out, _ = await proc.communicate(body)
    await runner.cleanup()
    return json.loads(out)  # type: ignore[no-any-return]


def run(nodes: int = 5000, repeats: int = 50) -> dict[str, Any]:
    rng = random.Random(4)
    bodies = [nrt(f"n{i}", rng) for i in range(nodes)]
    for i, body in enumerate(bodies):
        body["metadata"]["resourceVersion"] = str(i)
    snap = snapshot(nrts=bodies)
    names = sorted(snap.nrts)
    evaluate(POD, names, snap, Config())  # the first call builds the table, as the extender's cache does once
    pure = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        results = evaluate(POD, list(names), snap, Config())
        pure.append((time.perf_counter() - t0) * 1000)
    fits = len(results.fitting())
    cache = ClusterCache(api=None, weights_name="NetperfCosts")  # no watches: objects are filled in below
    cache.objects["nrts"] = {b["metadata"]["name"]: b for b in bodies}
    cache.snapshot()
    gc.collect()
    gc.freeze()  # as the extender does once its cache has synced
    pairs = asyncio.run(_over_http(cache, names, repeats))
    # What kube-scheduler sends by default: it stops after finding max(100, 5% .. 50%) feasible
    # nodes (percentageOfNodesToScore adapts to 50 - nodes/125, at least 5%): 500 of 5,000.
    sample = max(100, nodes * max(5, 50 - nodes // 125) // 100)
    sampled = asyncio.run(_over_http(cache, names[:: max(1, nodes // sample)][:sample], repeats))
    return {
        "nodes": nodes,
        "fitting": fits,
        "evaluate_ms": summary(pure, "ms"),
        "filter_ms": summary([f for f, _ in pairs], "ms"),
        "prioritize_ms": summary([p for _, p in pairs], "ms"),
        "filter_and_prioritize_ms": summary([f + p for f, p in pairs], "ms"),
        "default_candidates": sample,
        "filter_and_prioritize_default_candidates_ms": summary([f + p for f, p in sampled], "ms"),
        "samples_ms": {"evaluate": pure, "filter_and_prioritize": [f + p for f, p in pairs]},
    }


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 5000), indent=2))
