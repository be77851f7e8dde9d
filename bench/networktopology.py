"""NetworkTopology: cost recomputation at scale (pure) and ConfigMap -> CR latency (local control plane)."""

import asyncio
import random
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config, watch

from bench.stats import summary
from testkit.builders import networktopology_body, node_body
from testkit.cluster import OperatorProcess, wait_for
from toposched.apis.constants import WEIGHT_NETPERF
from toposched.apis.netperf import latency_key, parse
from toposched.apis.networktopology import NetworkTopology
from toposched.operators.networktopology.costs import NodeInfo, compute

G, V, P = NetworkTopology.GROUP, NetworkTopology.VERSION, NetworkTopology.PLURAL


def layout(nodes: int, regions: int, zones: int) -> list[NodeInfo]:
    per_region = zones // regions
    return [
        NodeInfo(f"node-{i:05d}", f"region-{(i % zones) // per_region}", f"zone-{i % zones:03d}") for i in range(nodes)
    ]


def measurements(nodes: list[NodeInfo], keys: int, seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    data: dict[str, str] = {}
    while len(data) < keys:
        a, b = rng.sample(nodes, 2)
        base = 2 if a.region == b.region else 40
        data[latency_key("p90", a.name, b.name)] = str(base + rng.randint(0, 5))
    return data


def run_pure(
    nodes: int = 1000, zones: int = 50, regions: int = 5, keys: int = 10_000, repeats: int = 9
) -> dict[str, Any]:
    infos = layout(nodes, regions, zones)
    data = measurements(infos, keys, seed=1)
    names = [n.name for n in infos]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        computed = compute(infos, parse(data, "p90", names), [])
        times.append((time.perf_counter() - t0) * 1000)
    pairs = sum(len(o.cost_list or ()) for t in computed.weight.topology_list for o in t.origin_list)
    return {
        "nodes": nodes,
        "zones": zones,
        "keys": keys,
        "published_pairs": pairs,
        "recompute_ms": summary(times, "ms"),
    }


async def _cluster(kubeconfig: Path, log: Path, nodes: int, zones: int, samples: int) -> dict[str, Any]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        core = client.CoreV1Api(api)
        objects = client.CustomObjectsApi(api)
        namespace = f"bench-nt-{uuid.uuid4().hex[:6]}"
        await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        infos = [
            NodeInfo(f"{namespace}-{n.name}", f"{namespace}-{n.region}", f"{namespace}-{n.zone}")
            for n in layout(nodes, 2, zones)
        ]
        for n in infos:
            labels = {"toposched-bench": namespace}
            await core.create_node(
                node_body(n.name, region=n.region or "", zone=n.zone or "", labels=labels, kwok=True)
            )
        data = measurements(infos, nodes * 5, seed=2)
        cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="netperf-metrics"), data=data)
        await core.create_namespaced_config_map(namespace, cm)
        body = networktopology_body("net")
        operator = OperatorProcess(kubeconfig, namespace, log, identity="bench-nt", lease="toposched-bench-nt")
        operator.start()
        try:
            await objects.create_namespaced_custom_object(G, V, namespace, P, body)

            async def published() -> bool:
                obj = await objects.get_namespaced_custom_object(G, V, namespace, P, "net")
                return any(w["name"] == WEIGHT_NETPERF for w in obj["spec"]["weights"])

            await wait_for(published, within=120, what="first NetperfCosts")
            changes: dict[str, float] = {}
            arrived = asyncio.Event()

            async def follow() -> None:
                async with watch.Watch().stream(
                    objects.list_namespaced_custom_object, G, V, namespace, P, timeout_seconds=900
                ) as events:
                    async for event in events:
                        for weight in event["object"]["spec"]["weights"]:
                            for topology in weight["topologyList"]:
                                for origin in topology["originList"]:
                                    for cost in origin.get("costList", []):
                                        marker = f"{origin['origin']}>{cost['destination']}={cost['networkCost']}"
                                        if marker not in changes:
                                            changes[marker] = time.perf_counter()
                                            arrived.set()

            follower = asyncio.create_task(follow())
            await asyncio.sleep(2)
            zone_a, zone_b = infos[0], next(n for n in infos if n.region == infos[0].region and n.zone != infos[0].zone)
            latencies = []
            try:
                for i in range(samples):
                    # A new, unmistakable cost for one zone pair: 1000 + i ms on every measured pair of it.
                    value = 1000 + i
                    update = {k: str(value) for k in data if _pair_in(k, zone_a, zone_b, infos)}
                    arrived.clear()
                    started = time.perf_counter()
                    await core.patch_namespaced_config_map(
                        "netperf-metrics", namespace, {"data": update}, _content_type="application/merge-patch+json"
                    )
                    marker = f"{zone_a.zone}>{zone_b.zone}={value}"
                    while marker not in changes:
                        await asyncio.wait_for(arrived.wait(), 10)
                        arrived.clear()
                    latencies.append((changes[marker] - started) * 1000)
                # Nothing changes: unrelated keys must not cause a write (after the last change settled).
                await asyncio.sleep(2)
                before = (await objects.get_namespaced_custom_object(G, V, namespace, P, "net"))["metadata"]
                for i in range(10):
                    await core.patch_namespaced_config_map(
                        "netperf-metrics",
                        namespace,
                        {"data": {"unrelated": str(i)}},
                        _content_type="application/merge-patch+json",
                    )
                    await asyncio.sleep(0.3)
                await asyncio.sleep(2)
                after = (await objects.get_namespaced_custom_object(G, V, namespace, P, "net"))["metadata"]
            finally:
                follower.cancel()
            return {
                "nodes": nodes,
                "zones": zones,
                "keys": len(data),
                "configmap_to_cr_ms": summary(latencies, "ms"),
                "writes_when_nothing_changed": int(after["resourceVersion"] != before["resourceVersion"]),
            }
        finally:
            operator.stop()
            for n in infos:
                await core.delete_node(n.name)
            await core.delete_namespace(namespace)


def _pair_in(key: str, a: NodeInfo, b: NodeInfo, infos: list[NodeInfo]) -> bool:
    zone = {n.name: n.zone for n in infos}
    rest = key.split(".origin.", 1)[1]
    origin, destination = rest.split(".destination.", 1)
    return {zone.get(origin), zone.get(destination)} == {a.zone, b.zone}


def run_cluster(kubeconfig: Path, log: Path, nodes: int = 100, zones: int = 10, samples: int = 30) -> dict[str, Any]:
    return asyncio.run(_cluster(kubeconfig, log, nodes, zones, samples))


if __name__ == "__main__":
    import json

    print(json.dumps(run_pure(), indent=2))
