"""The cluster side of the benchmarks: kwok nodes with NRTs, the schedulers under test, pod backlogs.

Every scenario compares kube-scheduler alone (a plain profile) with kube-scheduler + the toposched
extender (the shipped profile), the same binary with the same client limits, on the same nodes:
every scheduler the harness starts gets its ``limits`` (:data:`DEFAULT_LIMITS` unless a comparison
sets others), whatever its configuration says. Binds are observed through a watch, so the bench
client does not load the apiserver while the schedulers work.
"""

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

import yaml
from kubernetes_asyncio import client, config, watch

from testkit.builders import node_body
from testkit.certs import ExtenderPKI, extender_pki
from testkit.cluster import as_in_image, free_port
from testkit.extender import ready, schedhook_tls_args, scheduler_config
from testkit.paths import REPO

NRT_GROUP, NRT_VERSION, NRT_PLURAL = "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies"
BENCH_LABEL = "toposched-bench"
PLAIN = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: $kubeconfig}
leaderElection: {leaderElect: false}
profiles: [{schedulerName: plain}]
"""


@dataclass(frozen=True)
class ClientLimits:
    """kube-scheduler's API client: requests per second and burst (``clientConnection``)."""

    name: str
    qps: int
    burst: int

    def apply(self, configuration: str) -> str:
        """``configuration`` (a KubeSchedulerConfiguration) with these limits, replacing its own."""
        body = yaml.safe_load(configuration)
        body.setdefault("clientConnection", {}).update(qps=self.qps, burst=self.burst)
        return yaml.safe_dump(body, sort_keys=False)


DEFAULT_LIMITS = ClientLimits("defaults", qps=50, burst=100)
"""kube-scheduler's own defaults: what a configuration without ``qps``/``burst`` runs with. kube-scheduler
alone binds through this client, so at these limits a backlog measures the limit (about 55 pods/s)."""
RAISED_LIMITS = ClientLimits("raised", qps=5000, burst=5000)
"""As scheduler_perf sets them: so high that the apiserver or the CPU limits a run, not the client.
Throughput and latency are judged with these."""
LIMITS = (RAISED_LIMITS, DEFAULT_LIMITS)
"""Both, in the order the comparisons run them: raised first, as the goals are judged on it."""


class SetupError(RuntimeError):
    """The bench cannot run here (cluster down, binaries missing); the message says what to do."""


def bin_dir() -> str:
    done = subprocess.run([str(REPO / "hack" / "build-binaries.sh"), "--print"], capture_output=True, text=True)
    path = done.stdout.strip()
    if done.returncode != 0 or not Path(path, "kube-scheduler").exists():
        raise SetupError("the Kubernetes binaries are not built; run `make binaries` (or `make cluster`)")
    return path


@dataclass
class NodeSpec:
    name: str
    allocatable: dict[str, str]
    labels: dict[str, str] = field(default_factory=dict)
    nrt: dict[str, Any] | None = None
    """The NRT body (metadata.name is set here); None: the node has no NRT."""


@dataclass
class Bound:
    node: str
    at: float
    """time.monotonic() when the bind was seen."""
    annotations: dict[str, str]


class Harness:
    def __init__(self, kubeconfig: Path, work: Path) -> None:
        self.kubeconfig = kubeconfig
        self.work = work
        self.bin = bin_dir()
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        self.processes: list[subprocess.Popen[bytes]] = []
        self.limits = DEFAULT_LIMITS
        """The client limits of every scheduler started from now on."""
        self.api: client.ApiClient | None = None
        self._pki: ExtenderPKI | None = None

    @property
    def pki(self) -> ExtenderPKI:
        """Certificates of the extender and kube-scheduler (made once per run, when first needed)."""
        if self._pki is None:
            self._pki = extender_pki(self.work / "pki")
        return self._pki

    async def __aenter__(self) -> "Harness":
        configuration = client.Configuration()
        await config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=configuration)
        configuration.connection_pool_maxsize = 64
        self.api = client.ApiClient(configuration)
        try:
            await client.VersionApi(self.api).get_code()
        except Exception as exc:
            await self.api.close()
            raise SetupError(f"the local control plane does not answer ({exc}); run `make cluster`") from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop_all()
        if self.api is not None:
            await self.api.close()

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    # nodes -----------------------------------------------------------------------------------

    async def create_nodes(self, specs: Sequence[NodeSpec], tag: str) -> None:
        async def one(spec: NodeSpec) -> None:
            body = node_body(
                spec.name, labels={BENCH_LABEL: tag, **spec.labels}, allocatable=spec.allocatable, kwok=True
            )
            node = await self.core.create_node(body)
            if spec.nrt is not None:
                await self.publish_nrt(spec.name, spec.nrt, owner_uid=node.metadata.uid)

        await _in_batches([one(s) for s in specs])

    async def publish_nrt(self, name: str, body: dict[str, Any], owner_uid: str | None = None) -> None:
        """Create or replace a node's NRT (as an exporter would)."""
        body = json.loads(json.dumps(body))
        body.update(apiVersion=f"{NRT_GROUP}/{NRT_VERSION}", kind="NodeResourceTopology")
        body.setdefault("metadata", {})["name"] = name
        if owner_uid:
            body["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": owner_uid}]
            await self.custom.create_cluster_custom_object(NRT_GROUP, NRT_VERSION, NRT_PLURAL, body)
            return
        current = await self.custom.get_cluster_custom_object(NRT_GROUP, NRT_VERSION, NRT_PLURAL, name)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        body["metadata"]["ownerReferences"] = current["metadata"].get("ownerReferences")
        await self.custom.replace_cluster_custom_object(NRT_GROUP, NRT_VERSION, NRT_PLURAL, name, body)

    async def delete_nodes(self, names: Iterable[str]) -> None:
        """Nodes and their NRTs (not left to the garbage collector, which would trickle into the next run)."""

        async def one(name: str) -> None:
            for call in (
                self.custom.delete_cluster_custom_object(NRT_GROUP, NRT_VERSION, NRT_PLURAL, name),
                self.core.delete_node(name),
            ):
                try:
                    await call
                except client.ApiException as exc:
                    if exc.status != 404:
                        raise

        await _in_batches([one(n) for n in names])

    # schedulers ------------------------------------------------------------------------------

    def _start(self, args: list[str], log: str, env: dict[str, str] | None = None) -> "subprocess.Popen[bytes]":
        with (self.work / log).open("wb") as out:
            environ = {**self.env, **(env or {})}
            proc = subprocess.Popen(args, cwd=REPO, env=environ, stdout=out, stderr=subprocess.STDOUT)
        self.processes.append(proc)
        return proc

    def _scheduler(self, binary: str, config: str, name: str) -> "subprocess.Popen[bytes]":
        """A scheduler with ``config`` under :attr:`limits`; its configuration and log are ``name``.yaml and .log."""
        path = self.work / f"{name}.yaml"
        path.write_text(self.limits.apply(config))
        return self._start([binary, f"--config={path}", "--secure-port=0"], f"{name}.log")

    def start_plain(self) -> None:
        """kube-scheduler with a plain profile named ``plain``: every default plugin, no extender."""
        self._scheduler(f"{self.bin}/kube-scheduler", Template(PLAIN).substitute(kubeconfig=self.kubeconfig), "plain")

    def start_scheduler(self, binary: str, config: str, name: str) -> "subprocess.Popen[bytes]":
        """Another scheduler binary (scheduler-plugins') with ``config``; its log is ``name``.log."""
        return self._scheduler(binary, config, name)

    def start_operator(self) -> "subprocess.Popen[bytes]":
        """``toposched operator`` for every namespace: AppGroup orders other schedulers read."""
        env = as_in_image({**self.env, "TOPOSCHED_METRICS_PORT": "0", "TOPOSCHED_LEASE_NAME": "toposched-bench"})
        return self._start([sys.executable, "-m", "toposched", "operator"], "operator.log", env)

    def stop(self, proc: "subprocess.Popen[bytes]") -> None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        self.processes.remove(proc)

    async def start_toposched(
        self, extra: Sequence[str] = (), profile: str = "toposched", ready_within: float = 60
    ) -> int:
        """The extender (ready once its cache synced), then kube-scheduler with the shipped profile
        (renamed to ``profile``, so variants can run side by side), calling the extender as the chart's
        sidecar is called: plain HTTP on loopback. Its DRA allocator is the pinned
        helper, as the image ships it. Returns the extender's metrics port."""
        port, metrics, loopback = free_port(), free_port(), free_port()
        args = [sys.executable, "-m", "toposched", "schedhook", "--address", "127.0.0.1", "--port", str(port)]
        args += ["--loopback-port", str(loopback)]  # called as the chart's sidecar is: plain HTTP on loopback
        args += ["--metrics-port", str(metrics), "--no-remediation", *schedhook_tls_args(self.pki)]
        args += ["--dra-allocator", f"{self.bin}/toposched-dra-allocate", *extra]
        self._start(args, f"extender-{profile}.log")
        deadline = time.monotonic() + ready_within
        while not await asyncio.to_thread(ready, port, self.pki):
            if time.monotonic() > deadline:
                raise SetupError(f"the extender did not become ready; see {self.work / f'extender-{profile}.log'}")
            await asyncio.sleep(0.2)
        conf = scheduler_config(self.kubeconfig, loopback, self.pki, loopback=True)
        self._scheduler(
            f"{self.bin}/kube-scheduler", conf.replace("schedulerName: toposched", f"schedulerName: {profile}"), profile
        )
        return metrics

    def stop_all(self) -> None:
        for proc in self.processes:
            proc.terminate()
        for proc in self.processes:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.processes.clear()

    # pods ------------------------------------------------------------------------------------

    async def namespace(self, name: str) -> None:
        await self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        # Pods cannot be created before the default service account; on a loaded machine the
        # controller takes seconds to make it.
        deadline = time.monotonic() + 60
        while not (await self.core.list_namespaced_service_account(name)).items:
            if time.monotonic() > deadline:
                raise SetupError(f"namespace {name} got no default service account within 60 s")
            await asyncio.sleep(0.1)

    async def delete_pods(self, namespace: str) -> None:
        """Every pod of the namespace, without grace (kwok nodes may be gone), and wait until gone."""
        for _ in range(600):
            try:
                await self.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
            except client.ApiException as exc:
                if exc.status != 504:  # thousands of pods outlast one request; the next call goes on
                    raise
            if not (await self.core.list_namespaced_pod(namespace, limit=1)).items:
                return
            await asyncio.sleep(0.5)

    async def delete_namespace(self, name: str, gone_within: float = 0) -> None:
        """Its pods, then the namespace; with ``gone_within``, wait (up to so many seconds) until the
        namespace controller has removed the rest (events, service accounts), so that its work does
        not fall on the next measurement."""
        try:
            await self.delete_pods(name)
            await self.core.delete_namespace(name)
            deadline = time.monotonic() + gone_within
            while time.monotonic() < deadline:
                await self.core.read_namespace(name)
                await asyncio.sleep(0.5)
        except client.ApiException as exc:
            if exc.status != 404:
                raise

    async def create_pods(self, namespace: str, bodies: Sequence[dict[str, Any]]) -> dict[str, float]:
        """Creates the pods (50 at a time); returns when each was created (monotonic)."""
        created: dict[str, float] = {}

        async def one(body: dict[str, Any]) -> None:
            await self.core.create_namespaced_pod(namespace, body)
            created[body["metadata"]["name"]] = time.monotonic()

        await _in_batches([one(b) for b in bodies])
        return created

    async def follow_pods(self, namespace: str, on_pod: Callable[[dict[str, Any]], None], stop: asyncio.Event) -> None:
        """Calls ``on_pod`` with every state of every pod of ``namespace`` until ``stop`` is set."""
        listed = await self.core.list_namespaced_pod(namespace, _preload_content=False)
        body = json.loads(await listed.read())
        for pod in body["items"]:
            on_pod(pod)
        version = body["metadata"]["resourceVersion"]
        while not stop.is_set():
            stream = watch.Watch(return_type="object").stream(
                self.core.list_namespaced_pod,
                namespace,
                resource_version=version,
                timeout_seconds=60,
                _preload_content=False,
            )
            async with stream as events:
                async for event in events:
                    pod = event["raw_object"]
                    version = pod["metadata"]["resourceVersion"]
                    if event["type"] != "DELETED":
                        on_pod(pod)
                    if stop.is_set():
                        return

    async def watch_binds(
        self,
        namespace: str,
        count: int,
        within: float,
        sink: dict[str, Bound],
        names: set[str] | None = None,
        first: Callable[[int], None] = lambda bound: None,
    ) -> None:
        """Fills ``sink`` (pod name -> Bound) in bind order until ``count`` pods (of ``names``) are bound;
        calls ``first`` with the count once the first bind is seen."""
        stop = asyncio.Event()

        def seen(pod: dict[str, Any]) -> None:
            if names is None or pod["metadata"]["name"] in names:
                before = len(sink)
                self._seen(pod, sink)
                if not before and sink:
                    first(len(sink))
            if len(sink) >= count:
                stop.set()

        follower = asyncio.create_task(self.follow_pods(namespace, seen, stop))
        try:
            await asyncio.wait_for(stop.wait(), within)
        except TimeoutError:
            raise TimeoutError(f"{len(sink)} of {count} pods bound in {within:.0f} s") from None
        finally:
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)

    @staticmethod
    def _seen(pod: dict[str, Any], sink: dict[str, Bound]) -> None:
        name, node = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
        if node and name not in sink:
            sink[name] = Bound(node, time.monotonic(), dict(pod["metadata"].get("annotations") or {}))


def scrape(port: int) -> dict[str, Any]:
    """Per extender verb, for the filters' wait for earlier binds (``bind_wait``), the
    answer-to-bind lag (``bind_lag``) and a bind's steps (``bind_order``, ``bind_check``,
    ``bind_api``): count, mean and p99 bucket; and the counters (``_total``)
    by name, such as ``bind_waits_in_vain``."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    buckets: dict[str, list[tuple[float, float]]] = {}
    totals: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith("toposched_extender_"):
            continue
        name, value = line.rsplit(" ", 1)
        metric = name.split("{")[0].removeprefix("toposched_extender_")
        if metric.endswith("_total"):
            totals[metric.removesuffix("_total")] = int(float(value))
            continue
        base = metric.rsplit("_", 1)[0].removesuffix("_seconds")  # bind_wait_seconds_sum -> bind_wait
        key = name.split('verb="')[1].split('"')[0] if 'verb="' in name else base
        if 'step="' in name:  # bind_step_seconds{step="api"} -> bind_api
            step = name.split('step="')[1].split('"')[0]
            key = f"{base.removesuffix('_step')}_{step}"
        if metric.endswith("_sum"):
            sums[key] = float(value)
        elif metric.endswith("_count"):
            counts[key] = float(value)
        elif metric.endswith("_bucket"):
            le = name.split('le="')[1].split('"')[0]
            buckets.setdefault(key, []).append((float(le), float(value)))
    out: dict[str, Any] = {}
    for key, total in sums.items():
        n = counts.get(key, 0)
        out[key] = {
            "count": int(n),
            "mean_ms": round(1000 * total / n, 2) if n else 0.0,
            "p99_le_ms": _bucket_quantile(buckets.get(key, []), n, 0.99),
        }
    out.update(totals)
    return out


def _bucket_quantile(buckets: list[tuple[float, float]], count: float, q: float) -> float | None:
    """The upper bound of the histogram bucket holding quantile ``q`` (None: above the last bound)."""
    for le, cumulative in sorted(buckets):
        if count and cumulative >= q * count:
            return None if le == float("inf") else round(le * 1000, 2)
    return None


async def _in_batches(calls: Sequence[Any], size: int = 50) -> None:
    for start in range(0, len(calls), size):
        await asyncio.gather(*calls[start : start + size])
