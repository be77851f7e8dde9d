"""Spec change -> new status visible through a watch, with the operator running on the local control plane."""

import asyncio
import random
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config, watch

from bench.appgroup_sort import random_dag_spec
from bench.stats import summary
from testkit.builders import appgroup_body
from testkit.cluster import OperatorProcess, wait_for
from toposched.apis.appgroup import AppGroup, SortingAlgorithm

ALGORITHMS = [a.value for a in SortingAlgorithm]


async def _measure(kubeconfig: Path, workloads: int, samples: int, log: Path) -> dict[str, Any]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        core = client.CoreV1Api(api)
        objects = client.CustomObjectsApi(api)
        namespace = f"bench-{uuid.uuid4().hex[:8]}"
        await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        operator = OperatorProcess(kubeconfig, namespace, log, identity="bench", lease="toposched-bench")
        operator.start()
        try:
            spec = random_dag_spec(workloads, max_deps=3, seed=2).model_dump(mode="json", by_alias=True)
            await objects.create_namespaced_custom_object(
                AppGroup.GROUP, AppGroup.VERSION, namespace, AppGroup.PLURAL, appgroup_body("bench", spec=spec)
            )

            async def first_status() -> bool:
                obj = await objects.get_namespaced_custom_object(
                    AppGroup.GROUP, AppGroup.VERSION, namespace, AppGroup.PLURAL, "bench"
                )
                return bool(obj.get("status", {}).get("observedGeneration") == 1)

            await wait_for(first_status, within=60, what="first status")
            # One long-lived watch, as a scheduler would hold it; each sample waits for the
            # generation it caused to show up in the status.
            seen: dict[int, float] = {}
            arrived = asyncio.Condition()

            async def follow() -> None:
                async with watch.Watch().stream(
                    objects.list_namespaced_custom_object,
                    AppGroup.GROUP,
                    AppGroup.VERSION,
                    namespace,
                    AppGroup.PLURAL,
                    field_selector="metadata.name=bench",
                    timeout_seconds=600,
                ) as events:
                    async for event in events:
                        observed = event["object"].get("status", {}).get("observedGeneration")
                        if isinstance(observed, int) and observed not in seen:
                            seen[observed] = time.perf_counter()
                            async with arrived:
                                arrived.notify_all()

            follower = asyncio.create_task(follow())
            await asyncio.sleep(1)
            latencies: list[float] = []
            writes: list[float] = []  # the spec patch's own round trip: the apiserver's share
            after: list[float] = []  # patch acknowledged -> status seen: the operator's share
            rng = random.Random(3)
            try:
                for generation in range(2, samples + 2):
                    algorithm = rng.choice([a for a in ALGORITHMS if a != spec["topologySortingAlgorithm"]])
                    spec["topologySortingAlgorithm"] = algorithm
                    started = time.perf_counter()
                    await objects.patch_namespaced_custom_object(
                        AppGroup.GROUP,
                        AppGroup.VERSION,
                        namespace,
                        AppGroup.PLURAL,
                        "bench",
                        {"spec": {"topologySortingAlgorithm": algorithm}},
                        _content_type="application/merge-patch+json",
                    )
                    acknowledged = time.perf_counter()

                    def caught_up(g: int = generation) -> bool:
                        return g in seen

                    async with arrived:
                        await asyncio.wait_for(arrived.wait_for(caught_up), 30)
                    latencies.append((seen[generation] - started) * 1000)
                    writes.append((acknowledged - started) * 1000)
                    after.append((seen[generation] - acknowledged) * 1000)
                    await asyncio.sleep(0.05)
            finally:
                follower.cancel()
            return {
                "workloads": workloads,
                "spec_to_status_ms": summary(latencies, "ms"),
                "spec_write_ms": summary(writes, "ms"),
                "write_acknowledged_to_status_ms": summary(after, "ms"),
            }
        finally:
            operator.stop()
            await core.delete_namespace(namespace)


def run(kubeconfig: Path, log: Path, workloads: int = 100, samples: int = 60) -> dict[str, Any]:
    return asyncio.run(_measure(kubeconfig, workloads, samples, log))
