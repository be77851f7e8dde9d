"""Extender hot path: one pod against N nodes with two-NUMA NRTs.

Two figures, each for two kinds of pod. The pure evaluation (``placement.evaluate``, columns over
a synced table) and the extender over HTTPS as deployed -- a client in a separate process presents
kube-scheduler's client certificate, posts kube-scheduler's filter and then prioritize requests
(node names only, ``nodeCacheCapable``) on one kept-alive connection, as kube-scheduler does, and
times each pair end to end, with the request bodies encoded beforehand so the client adds nothing
but the socket. Apart, what keep-alive saves: a new connection's TCP and TLS handshakes.

Where kube-scheduler calls from: over loopback, as it calls its sidecar, or across a network hop,
as it called schedhook's Deployment: with root, the client runs in a network namespace of its own
linked by a veth pair (another pod on the same node; a Service's address translation and the wire
between nodes come on top). Each path's round trip is timed apart on the kept-alive connection
(the open /healthz, TLS included): kube-scheduler makes three calls per pod.

- "workload": the same pod shape again and again, as a Deployment's replicas arrive, while the
  cluster changes underneath: between two pure evaluations one NRT changes; over HTTP a task
  applies NRT updates and bind reservations at CHURN_PER_SECOND each, as watch events would.
- "new shape": every call a pod with a request never seen before, so no memoised answer helps.
"""

import asyncio
import contextlib
import copy
import gc
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from aiohttp import web

from bench.stats import summary
from testkit.certs import SCHEDULER_CLIENT, ExtenderPKI, extender_pki
from testkit.extender import in_process
from testkit.nrt import POD, nrt
from toposched.schedhook.extender.clientauth import require_client, server_context
from toposched.schedhook.extender.clusterview import ClusterView
from toposched.schedhook.extender.coordinator import Coordinator
from toposched.schedhook.extender.reservations import Reservation
from toposched.schedhook.extender.server import Extender
from toposched.schedhook.extender.store import store_key
from toposched.schedhook.placement.evaluate import PlacementConfig, evaluate
from toposched.schedhook.placement.snapshot import snapshot

HANDSHAKES = 50
"""New connections timed (TCP connect and TLS handshake with the client certificate)."""
CHURN_PER_SECOND = 200
"""NRT updates (and as many bind reservations) per second during the HTTP runs: every node of
5,000 updated every 25 s."""
ROUND_TRIPS = 200
LOOPBACK = "127.0.0.1"
HOP = ("169.254.251.1", "169.254.251.2")
"""This side's and the client's address on the veth pair (link-local, a /30 of its own)."""


def shaped(i: int) -> dict[str, Any]:
    """A pod whose request no earlier call made (a memory request of its own)."""
    pod = copy.deepcopy(POD)
    pod["metadata"]["uid"] = f"u{i}"
    # 16384Mi would be the workload pod's 16Gi: start one above.
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = f"{16385 + i}Mi"
    return pod


CLIENT = """
import http.client, json, ssl, sys, time
host, port, repeats, ca, cert, key = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:7]
bodies = json.loads(sys.stdin.buffer.read())
tls = ssl.create_default_context(cafile=ca)
tls.load_cert_chain(cert, key)
tls.check_hostname = host == "127.0.0.1"  # the chain is checked either way; the certificate names loopback
conn = http.client.HTTPSConnection(host, port, context=tls)
headers = {"Content-Type": "application/json"}
out = []
for i in range(repeats + 3):
    body = bodies[i % len(bodies)]
    filter_body = json.dumps(body).encode()
    t0 = time.perf_counter()
    conn.request("POST", "/filter", filter_body, headers)
    answer = conn.getresponse().read()
    t1 = time.perf_counter()
    fitting = json.loads(answer)["NodeNames"]
    prioritize = json.dumps({"Pod": body["Pod"], "NodeNames": fitting}).encode()
    t2 = time.perf_counter()
    conn.request("POST", "/prioritize", prioritize, headers)
    conn.getresponse().read()
    t3 = time.perf_counter()
    if i >= 3:  # warm-up: connection, first table sync
        out.append([(t1 - t0) * 1000, (t3 - t2) * 1000])
round_trips = []
for _ in range(ROUND_TRIPS):
    t0 = time.perf_counter()
    conn.request("GET", "/healthz")
    conn.getresponse().read()
    round_trips.append((time.perf_counter() - t0) * 1000)
handshakes = []
for _ in range(HANDSHAKES):
    fresh = http.client.HTTPSConnection(host, port, context=tls)
    t0 = time.perf_counter()
    fresh.connect()
    handshakes.append((time.perf_counter() - t0) * 1000)
    fresh.close()
print(json.dumps({"pairs": out, "handshakes": handshakes, "roundTrips": round_trips}))
"""


@contextlib.contextmanager
def network_hop() -> Iterator[list[str] | None]:
    """A network namespace for the client, linked to this one by a veth pair (HOP); yields the
    command prefix that runs a process there (None without root or ``ip``: no such figure)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        yield None
        return
    netns, here, there = f"tsbench{os.getpid()}", f"tsbh{os.getpid()}"[:15], f"tsbc{os.getpid()}"[:15]
    steps = [
        ["ip", "netns", "add", netns],
        ["ip", "link", "add", here, "type", "veth", "peer", "name", there, "netns", netns],
        ["ip", "addr", "add", f"{HOP[0]}/30", "dev", here],
        ["ip", "link", "set", here, "up"],
        ["ip", "-n", netns, "addr", "add", f"{HOP[1]}/30", "dev", there],
        ["ip", "-n", netns, "link", "set", there, "up"],
    ]
    try:
        for step in steps:
            subprocess.run(step, check=True, capture_output=True)
        yield ["ip", "netns", "exec", netns]
    finally:
        subprocess.run(["ip", "link", "del", here], capture_output=True)
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)


async def _churn(view: ClusterView, names: list[str], rng: random.Random) -> None:
    """NRT updates and bind reservations arriving while the extender answers, as in a live cluster."""
    version = 10**6
    while True:
        await asyncio.sleep(1 / CHURN_PER_SECOND)
        name = rng.choice(names)
        body = copy.deepcopy(view.store.objects["nrts"][store_key("", name)])
        version += 1
        body["metadata"]["resourceVersion"] = str(version)
        first = body["zones"][0]["resources"][0]  # CPUs: any amount up to the zone's allocatable
        first["available"] = rng.randint(0, int(first["allocatable"]))
        view.store.event("nrts", "MODIFIED", body)
        uid = f"bound-{version}"
        held = Reservation(uid, rng.choice(names), (0,), {"cpu": Decimal(1)}, key=store_key("default", uid))
        view.ledger.reserve(held)


async def _over_http(
    coordinator: Coordinator, bodies: list[dict[str, Any]], repeats: int, pki: ExtenderPKI
) -> tuple[list[list[float]], list[float]]:
    """(filter and prioritize ms per call, new-connection handshake ms) over loopback."""
    answer = await _calls(coordinator, bodies, repeats, pki)
    return answer["pairs"], answer["handshakes"]


async def _calls(
    coordinator: Coordinator,
    bodies: list[dict[str, Any]],
    repeats: int,
    pki: ExtenderPKI,
    host: str = LOOPBACK,
    prefix: tuple[str, ...] = (),
) -> dict[str, Any]:
    """From a client in another process (started with ``prefix``), calling ``host``: ``pairs`` (filter
    and prioritize ms per call), ``handshakes`` (a new connection's ms), ``roundTrips`` (ms)."""
    extender = Extender(coordinator)
    runner = web.AppRunner(extender.app([require_client([SCHEDULER_CLIENT])]), access_log=None)
    await runner.setup()
    tls = server_context(str(pki.serving.cert), str(pki.serving.key), str(pki.ca))
    site = web.TCPSite(runner, host, 0, ssl_context=tls)
    await site.start()
    port = runner.addresses[0][1]
    churn = asyncio.create_task(_churn(coordinator.view, list(bodies[0]["NodeNames"]), random.Random(7)))
    proc = await asyncio.create_subprocess_exec(
        *prefix,
        sys.executable,
        "-c",
        CLIENT.replace("HANDSHAKES", str(HANDSHAKES)).replace("ROUND_TRIPS", str(ROUND_TRIPS)),
        *(host, str(port), str(repeats), str(pki.ca), str(pki.scheduler.cert), str(pki.scheduler.key)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    out, _ = await proc.communicate(json.dumps(bodies).encode())
    churn.cancel()
    await runner.cleanup()
    answer: dict[str, Any] = json.loads(out)
    return answer


def _pure(names: list[str], bodies: list[dict[str, Any]], repeats: int, new_shape: bool) -> list[float]:
    snap = snapshot(nrts=bodies)
    evaluate(POD, names, snap, PlacementConfig())  # the first call builds the table, as the extender's cache does once
    assert snap.table is not None
    rng = random.Random(5)
    out = []
    for i in range(repeats):
        pod = shaped(i) if new_shape else POD
        if not new_shape:  # one node's NRT changed since the last pod, as a bind's reservation does
            name = rng.choice(names)
            snap.nrts[name] = replace(snap.nrts[name])
        t0 = time.perf_counter()
        if not new_shape:
            snap.table.update(snap.nrts, [name])
        evaluate(pod, names, snap, PlacementConfig())
        out.append((time.perf_counter() - t0) * 1000)
    return out


def run(
    nodes: int = 5000, repeats: int = 50, shape: Callable[[str, random.Random], dict[str, Any]] = nrt
) -> dict[str, Any]:
    rng = random.Random(4)
    bodies = [shape(f"n{i}", rng) for i in range(nodes)]
    for i, body in enumerate(bodies):
        body["metadata"]["resourceVersion"] = str(i)
    names = sorted(b["metadata"]["name"] for b in bodies)
    fits = len(evaluate(POD, names, snapshot(nrts=bodies), PlacementConfig()).fitting())
    pure = _pure(names, bodies, repeats, new_shape=False)
    pure_new = _pure(names, bodies, repeats, new_shape=True)
    coordinator = in_process({"nrts": bodies})  # no watches: events are applied below
    coordinator.warm()
    gc.collect()
    gc.freeze()  # as the extender does once its cache has synced
    pki = extender_pki(Path(tempfile.mkdtemp(prefix="toposched-bench-pki-")))
    workload = [{"Pod": POD, "NodeNames": names}]
    loopback = asyncio.run(_calls(coordinator, workload, repeats, pki))
    pairs = loopback["pairs"]
    new_shapes = [{"Pod": shaped(i), "NodeNames": names} for i in range(repeats + 3)]
    pairs_new, _ = asyncio.run(_over_http(coordinator, new_shapes, repeats, pki))
    # What kube-scheduler sends by default: it stops after finding max(100, 5% .. 50%) feasible
    # nodes (percentageOfNodesToScore adapts to 50 - nodes/125, at least 5%): 500 of 5,000.
    sample = max(100, nodes * max(5, 50 - nodes // 125) // 100)
    sampled = [{"Pod": POD, "NodeNames": names[:: max(1, nodes // sample)][:sample]}]
    pairs_sampled, _ = asyncio.run(_over_http(coordinator, sampled, repeats, pki))
    return {
        **_across_a_hop(coordinator, sampled, repeats, pki, loopback["roundTrips"]),
        "nodes": nodes,
        "fitting": fits,
        "churn_per_second": CHURN_PER_SECOND,
        "evaluate_ms": summary(pure, "ms"),
        "evaluate_new_shape_ms": summary(pure_new, "ms"),
        "filter_ms": summary([f for f, _ in pairs], "ms"),
        "prioritize_ms": summary([p for _, p in pairs], "ms"),
        "filter_and_prioritize_ms": summary([f + p for f, p in pairs], "ms"),
        "filter_and_prioritize_new_shape_ms": summary([f + p for f, p in pairs_new], "ms"),
        "default_candidates": sample,
        "filter_and_prioritize_default_candidates_ms": summary([f + p for f, p in pairs_sampled], "ms"),
        "tls_handshake_ms": summary(loopback["handshakes"], "ms"),
        "samples_ms": {
            "evaluate": pure,
            "filter_and_prioritize": [f + p for f, p in pairs],
            "filter_and_prioritize_new_shape": [f + p for f, p in pairs_new],
        },
    }


def _across_a_hop(
    coordinator: Coordinator, sampled: list[dict[str, Any]], repeats: int, pki: ExtenderPKI, loopback: list[float]
) -> dict[str, Any]:
    """The round trip over loopback and, with root, across the veth hop, with the sampled filter and
    prioritize there too; the cost per pod (three calls) of the hop."""
    figures: dict[str, Any] = {"round_trip_loopback_ms": summary(loopback, "ms")}
    with network_hop() as prefix:
        if prefix is None:
            return figures
        hop = asyncio.run(_calls(coordinator, sampled, repeats, pki, HOP[0], tuple(prefix)))
    figures["round_trip_hop_ms"] = summary(hop["roundTrips"], "ms")
    figures["filter_and_prioritize_default_candidates_hop_ms"] = summary([f + p for f, p in hop["pairs"]], "ms")
    added = 3 * (figures["round_trip_hop_ms"]["median"] - figures["round_trip_loopback_ms"]["median"])
    figures["hop_per_pod_ms"] = round(added, 3)
    return figures


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 5000), indent=2))
