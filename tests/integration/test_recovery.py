"""kube-apiserver restarts (SIGTERM and kill -9) with toposched's components running.

The operator, the exporter and schedhook's extender (with a second kube-scheduler calling it over
HTTPS) each must resume within 5 s of the apiserver being ready again, log one line per
failure (no traceback), and never take an error answer for data. The control plane's own
scheduler and controller-manager exit when they lose their leases during an outage; the test
starts them again, as a kubelet would. ``TOPOSCHED_RESTARTS`` sets how many restarts (default 4).
"""

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import uuid
from asyncio.subprocess import DEVNULL, PIPE
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client, config

from testkit.builders import KWOK_TOLERATION, appgroup_body, pod_body
from testkit.cluster import OperatorProcess, ensure_kwok_node, wait_default_service_account, wait_for
from testkit.controlplane import components
from testkit.extender import call, client_context
from testkit.paths import EXAMPLES, REPO
from testkit.podresources import FakeKubelet
from testkit.schedstack import SchedulerStack
from testkit.sysfs import two_socket
from toposched.apis.appgroup import AppGroup
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.kube.watch import ListError, follow, list_objects

RESTARTS = int(os.environ.get("TOPOSCHED_RESTARTS", "4"))

# A SIGTERM restart takes its 15 s grace, and kube-scheduler may need a minute to bind after one.
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120 + 90 * RESTARTS)]
RESUME_WITHIN = 5.0


def restart_apiserver(kill: bool) -> float:
    """Stop the apiserver (SIGTERM with a 15 s grace, or SIGKILL) and start it; start again any
    component that died meanwhile. Returns the outage's length."""
    parts = components()
    started = time.monotonic()
    parts["kube-apiserver"].stop(signal.SIGKILL if kill else signal.SIGTERM)
    parts["kube-apiserver"].start()
    return time.monotonic() - started


def heal() -> None:
    for part in components().values():
        if not part.running():
            part.start()


def refresh() -> None:
    """Restart the controllers of the control plane: after outages, client-go's informers in
    kube-controller-manager, kube-scheduler and kwok may wait up to a minute to list again
    (service accounts of new namespaces then come late), and the tests after this one should
    find the cluster as they would a fresh one."""
    parts = components()
    for name in ("kube-controller-manager", "kube-scheduler", "kwok-controller"):
        if name in parts:
            parts[name].stop()
            parts[name].start()


async def ready(kubectl: list[str], within: float = 90) -> float:
    """Wait for /readyz; returns when it answered. (Each probe is a new connection: the test's
    own client pool holds connections to the apiserver that was stopped.)"""

    async def answers() -> bool:
        probe = await asyncio.create_subprocess_exec(
            *kubectl, "get", "--raw", "/readyz", "--request-timeout=5s", stdout=PIPE, stderr=DEVNULL
        )
        out, _ = await probe.communicate()
        return probe.returncode == 0 and out.strip() == b"ok"

    await wait_for(answers, within=within, what="the apiserver ready again")
    return time.monotonic()


NRT = (NodeResourceTopology.GROUP, NodeResourceTopology.VERSION, NodeResourceTopology.PLURAL)
BOUTIQUE: dict[str, Any] = yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text())


@dataclass
class Scene:
    """A kwok node whose NRT the exporter publishes and whose pods only the extender can bind
    (nodes without an NRT fail, so that a node whose NRT appears only after an outage tells whether
    the extender follows again), a probe node per restart, and what the test saw of each restart."""

    api: client.ApiClient
    namespace: str
    node: str
    stack: SchedulerStack
    resumes: dict[str, list[float]] = field(default_factory=lambda: {"operator": [], "exporter": [], "schedhook": []})
    back_at: list[float] = field(default_factory=list)
    """Wall-clock time each restart's apiserver was ready."""

    @property
    def probes(self) -> list[str]:
        return [f"{self.node}-probe-{i}" for i in range(RESTARTS)]

    def pod(self, name: str, **fields: Any) -> dict[str, Any]:
        """A Guaranteed pod for the scene's node, which only the extender can bind."""
        return pod_body(
            name,
            cpu=1,
            memory="100Mi",
            scheduler=self.stack.profile,
            node_selector={"kubernetes.io/hostname": self.node},
            tolerations=[KWOK_TOLERATION],
            image="example.invalid/app:1",
            **fields,
        )

    async def extender_fits(self, probe: str) -> bool:
        """The extender's /filter answer, as kube-scheduler would ask it, passes the probe node."""
        assert self.stack.pki is not None
        body = self.pod("probe", namespace=self.namespace, uid="probe")
        args = {"Pod": body, "NodeNames": [probe]}
        status, text = await call(self.stack.port, "/filter", args, client_context(self.stack.pki))
        return status == 200 and probe in (json.loads(text).get("NodeNames") or [])

    async def publish_probe_nrt(self, probe: str) -> None:
        """The scene's node's NRT, copied for the probe node."""
        published = await self.nrt_published()
        body = {k: v for k, v in published.items() if k not in ("metadata", "status")}
        body["metadata"] = {"name": probe}
        await client.CustomObjectsApi(self.api).create_cluster_custom_object(*NRT, body)

    async def nrt_published(self) -> Any:
        try:
            return await client.CustomObjectsApi(self.api).get_cluster_custom_object(*NRT, self.node)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def create_appgroup(self, name: str) -> None:
        body = appgroup_body(name, spec=BOUTIQUE["spec"])
        await client.CustomObjectsApi(self.api).create_namespaced_custom_object(*self._appgroups, body)

    async def appgroup_ordered(self, name: str) -> Any:
        obj = await client.CustomObjectsApi(self.api).get_namespaced_custom_object(*self._appgroups, name)
        return (obj.get("status") or {}).get("topologyOrder")

    @property
    def _appgroups(self) -> tuple[str, str, str, str]:
        return AppGroup.GROUP, AppGroup.VERSION, self.namespace, AppGroup.PLURAL

    async def bound(self, name: str) -> str | None:
        found: str | None = (await client.CoreV1Api(self.api).read_namespaced_pod(name, self.namespace)).spec.node_name
        return found

    async def scheduled_at(self, name: str) -> float:
        """When kube-scheduler bound the pod (its PodScheduled condition; whole seconds)."""
        status = (await client.CoreV1Api(self.api).read_namespaced_pod(name, self.namespace)).status
        when: float = next(c.last_transition_time.timestamp() for c in status.conditions if c.type == "PodScheduled")
        return when

    async def create_pod(self, name: str) -> None:
        await client.CoreV1Api(self.api).create_namespaced_pod(self.namespace, self.pod(name))

    async def everything_running(self) -> None:
        """The operator's first status, the exporter's first NRT, the stack started and a first pod bound."""
        for probe in self.probes:
            await ensure_kwok_node(self.api, probe)
        await self.create_appgroup("before")
        await wait_for(partial(self.appgroup_ordered, "before"), within=60, what="the operator's first status")
        await wait_for(self.nrt_published, within=60, what="the exporter's first NRT")
        await asyncio.to_thread(self.stack.start)
        await wait_default_service_account(self.api, self.namespace)
        await self.create_pod("first")
        assert await wait_for(partial(self.bound, "first"), within=60, what="the first pod bound") == self.node

    async def restart(self, i: int, kubectl: list[str]) -> None:
        """One outage, then how long each component takes to follow the apiserver again."""
        # A pod created just before the outage: bound before it, or after it, never lost.
        await self.create_pod(f"around-{i}")
        outage = await asyncio.to_thread(restart_apiserver, kill=i % 2 == 1)
        back = await ready(kubectl)
        await asyncio.to_thread(heal)
        print(f"restart {i} ({'kill -9' if i % 2 else 'SIGTERM'}): {outage:.1f}s down")
        # schedhook: an NRT created now reaches its answers only if it follows again.
        await self.publish_probe_nrt(self.probes[i])
        await wait_for(partial(self.extender_fits, self.probes[i]), within=60, what="the extender following again")
        self.resumes["schedhook"].append(time.monotonic() - back)
        # The exporter: its NRT deleted as soon as the apiserver is back must come back.
        await client.CustomObjectsApi(self.api).delete_cluster_custom_object(*NRT, self.node)
        await self.create_appgroup(f"after-{i}")
        await wait_for(partial(self.appgroup_ordered, f"after-{i}"), within=60, what="the operator's status")
        self.resumes["operator"].append(time.monotonic() - back)
        await wait_for(self.nrt_published, within=60, what="the exporter's NRT")
        self.resumes["exporter"].append(time.monotonic() - back)
        # A pod created after it is bound through the extender, checked at the end: kube-scheduler's
        # own informers may take a minute to list again after an outage (client-go's backoff).
        await self.create_pod(f"after-{i}")
        self.back_at.append(time.time() - (time.monotonic() - back))

    async def every_pod_bound(self) -> list[float]:
        """Every pod bound to the node in the end: seconds from each restart's end to its after-pod's bind."""
        binds = []
        for i in range(RESTARTS):
            for name in (f"around-{i}", f"after-{i}"):
                assert await wait_for(partial(self.bound, name), within=150, what=f"{name} bound") == self.node
            binds.append(await self.scheduled_at(f"after-{i}") - self.back_at[i])
        return binds

    async def delete_nodes(self) -> None:
        """The nodes and their NRTs (an outage may have ended the test before some probes existed)."""
        for name in (*self.probes, self.node):
            with contextlib.suppress(client.ApiException):
                await client.CoreV1Api(self.api).delete_node(name)
            with contextlib.suppress(client.ApiException):
                await client.CustomObjectsApi(self.api).delete_cluster_custom_object(*NRT, name)


async def start_exporter(
    kubeconfig: Path, node: str, kubelet: FakeKubelet, work: Path, period: float = 1
) -> asyncio.subprocess.Process:
    """``toposched exporter`` for ``node`` on a two-socket machine, publishing every ``period`` seconds."""
    args = ["--sysfs", str(two_socket(work)), "--podresources", str(kubelet.socket), "--period", str(period)]
    args += ["--kubelet-state-dir", str(work), "--metrics-port", "0", "--health-port", "0"]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "NODE_NAME": node}
    with (work / "exporter.log").open("wb") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "toposched", "exporter", *args, cwd=REPO, env=env, stdout=out, stderr=out
        )


async def test_components_resume_after_apiserver_restarts(
    api: client.ApiClient,
    kubeconfig: Path,
    kubectl: list[str],
    namespace: str,
    crds: None,
    kubelet: FakeKubelet,
    tmp_path: Path,
) -> None:
    node = f"restart-{uuid.uuid4().hex[:6]}"
    await ensure_kwok_node(api, node)
    stack = SchedulerStack(kubeconfig, tmp_path / "stack", ["--missing-nrt", "fail"], profile="toposched-recovery")
    scene = Scene(api, namespace, node, stack)
    operator = OperatorProcess(kubeconfig, namespace, tmp_path / "operator.log", identity="op", lease="recovery")
    operator.start()
    exporter = await start_exporter(kubeconfig, node, kubelet, tmp_path)
    try:
        await scene.everything_running()
        for i in range(RESTARTS):
            await scene.restart(i, kubectl)
        binds = await scene.every_pod_bound()
        print({k: [round(v, 1) for v in vs] for k, vs in scene.resumes.items()})
        print("pods bound after the apiserver was ready:", [round(v, 1) for v in binds])
    finally:
        await asyncio.to_thread(stack.stop)
        operator.stop()
        exporter.terminate()
        await asyncio.wait_for(exporter.wait(), 15)
        await asyncio.to_thread(heal)
        await asyncio.to_thread(refresh)
        await scene.delete_nodes()
    for component, times in scene.resumes.items():
        assert max(times) <= RESUME_WITHIN, f"{component} resumed {times} s after the apiserver was ready"
    for log in (tmp_path / "operator.log", tmp_path / "exporter.log", stack.log("extender")):
        assert "Traceback" not in log.read_text(), log.read_text()[-5000:]


async def test_a_refused_list_is_an_error_not_an_empty_list(
    api: client.ApiClient, kubeconfig: Path, namespace: str
) -> None:
    """The apiserver's answer to a list the caller may not make (403) is an error: it must never
    be taken for "there are none", which would empty a cache of that kind."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    await core.create_namespaced_service_account(namespace, {"metadata": {"name": "watcher"}})
    token = (
        await core.create_namespaced_service_account_token("watcher", namespace, {"spec": {"expirationSeconds": 600}})
    ).status.token
    await core.create_namespaced_config_map(namespace, {"metadata": {"name": "kept"}})
    own = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=own)
    own.api_key = {"BearerToken": f"Bearer {token}"}
    own.cert_file = own.key_file = None
    seen: list[list[str]] = []
    async with client.ApiClient(own) as watcher:
        lister = client.CoreV1Api(watcher).list_namespaced_config_map

        async def list_all(**params: Any) -> Any:
            return await lister(namespace, **params)

        with pytest.raises(ListError, match="403"):
            await list_objects(list_all)
        rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}]
        await rbac.create_namespaced_role(namespace, {"metadata": {"name": "watcher"}, "rules": rules})
        await rbac.create_namespaced_role_binding(
            namespace,
            {
                "metadata": {"name": "watcher"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "watcher"},
                "subjects": [{"kind": "ServiceAccount", "name": "watcher", "namespace": namespace}],
            },
        )

        def listed(items: list[dict[str, Any]]) -> None:
            seen.append([i["metadata"]["name"] for i in items])

        async def first() -> list[str] | None:
            return seen[0] if seen else None

        task = asyncio.create_task(follow(list_all, listed, lambda *_: None, "configmaps"))
        try:
            assert "kept" in await wait_for(first, within=30, what="the first good list")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_a_deleted_nrt_comes_back_at_once(
    api: client.ApiClient, kubeconfig: Path, crds: None, kubelet: FakeKubelet, tmp_path: Path
) -> None:
    """The exporter watches its own NRT: deleted (by hand, by the garbage collector), it is back
    within a second or two, not at the next period (a minute here)."""
    node = f"nrt-deleted-{uuid.uuid4().hex[:6]}"
    await ensure_kwok_node(api, node)
    objects = client.CustomObjectsApi(api)

    async def published() -> Any:
        try:
            return await objects.get_cluster_custom_object(*NRT, node)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    exporter = await start_exporter(kubeconfig, node, kubelet, tmp_path, period=60)
    back = []
    try:
        await wait_for(published, within=60, what="the exporter's first NRT")
        for _ in range(3):
            await objects.delete_cluster_custom_object(*NRT, node)
            deleted = time.monotonic()
            await wait_for(published, within=30, what="the NRT back")
            back.append(time.monotonic() - deleted)
    finally:
        exporter.terminate()
        await asyncio.wait_for(exporter.wait(), 15)
        with contextlib.suppress(client.ApiException):
            await client.CoreV1Api(api).delete_node(node)
        with contextlib.suppress(client.ApiException):
            await objects.delete_cluster_custom_object(*NRT, node)
    print("NRT back after deletion (s):", [round(b, 2) for b in back])
    assert max(back) < 3, back
