"""Helpers for tests against the local control plane: waiting, kwok nodes, member pods, the operator."""

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from testkit.builders import KWOK_TOLERATION, member_labels, node_body, pod_body
from testkit.paths import REPO
from toposched.apis.appgroup import AppGroup

T = TypeVar("T")


async def wait_for(probe: Callable[[], Awaitable[T | None]], within: float = 30, what: str = "condition") -> T:
    """Poll ``probe`` until it returns something other than None/False."""
    deadline = time.monotonic() + within
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {within}s waiting for {what} (last: {last!r})")


async def get_appgroup(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = await client.CustomObjectsApi(api).get_namespaced_custom_object(
        AppGroup.GROUP, AppGroup.VERSION, namespace, AppGroup.PLURAL, name
    )
    return result


async def create_appgroup(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = await client.CustomObjectsApi(api).create_namespaced_custom_object(
        AppGroup.GROUP, AppGroup.VERSION, namespace, AppGroup.PLURAL, body
    )
    return result


async def patch_appgroup(api: client.ApiClient, namespace: str, name: str, patch: dict[str, Any]) -> None:
    await client.CustomObjectsApi(api).patch_namespaced_custom_object(
        AppGroup.GROUP,
        AppGroup.VERSION,
        namespace,
        AppGroup.PLURAL,
        name,
        patch,
        _content_type="application/merge-patch+json",
    )


def ready_condition(obj: dict[str, Any]) -> dict[str, Any] | None:
    for condition in obj.get("status", {}).get("conditions", []):
        if condition["type"] == "Ready":
            return dict(condition)
    return None


async def ensure_kwok_node(api: client.ApiClient, name: str, labels: dict[str, str] | None = None) -> None:
    """A simulated node that kwok keeps Ready; pods bound to it turn Running without containers."""
    node = node_body(
        name,
        labels={"type": "kwok", "kubernetes.io/hostname": name, **(labels or {})},
        annotations={"node.alpha.kubernetes.io/ttl": "0"},
        allocatable={"cpu": "64", "memory": "256Gi", "pods": "250"},
        kwok=True,
    )
    core = client.CoreV1Api(api)
    try:
        await core.create_node(node)
    except ApiException as exc:
        if exc.status != 409:
            raise

    async def ready() -> bool:
        found = await core.read_node(name)
        return any(c.type == "Ready" and c.status == "True" for c in found.status.conditions or [])

    await wait_for(ready, within=60, what=f"kwok node {name} Ready")


async def wait_default_service_account(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)

    async def exists() -> bool:
        accounts = await core.list_namespaced_service_account(namespace)
        return any(sa.metadata.name == "default" for sa in accounts.items)

    await wait_for(exists, what=f"default service account in {namespace}")


async def wait_pod_phase(
    api: client.ApiClient, namespace: str, name: str, phases: Collection[str], within: float = 60
) -> Any:
    """The pod (as the client reads it) once its phase is one of ``phases``."""
    core = client.CoreV1Api(api)

    async def reached() -> Any:
        pod = await core.read_namespaced_pod(name, namespace)
        return pod if pod.status.phase in phases else None

    return await wait_for(reached, within=within, what=f"pod {name} in {sorted(phases)}")


async def wait_pod_gone(api: client.ApiClient, namespace: str, name: str, within: float = 60) -> None:
    core = client.CoreV1Api(api)

    async def gone() -> bool:
        try:
            await core.read_namespaced_pod(name, namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    await wait_for(gone, within=within, what=f"pod {name} deleted")


async def create_member_pod(api: client.ApiClient, namespace: str, name: str, appgroup: str, workload: str) -> None:
    labels = member_labels(appgroup, workload)
    pod = pod_body(name, labels=labels, tolerations=[KWOK_TOLERATION], image="example.invalid/app:1")
    await client.CoreV1Api(api).create_namespaced_pod(namespace, pod)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


AS_IN_IMAGE = Path(__file__).resolve().parent / "as_in_image"


def as_in_image(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a ``toposched operator`` process that imports what its image has: the development
    environment's generated Kubernetes client is hidden (``testkit/as_in_image``)."""
    path = [str(AS_IN_IMAGE), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(path)}


class OperatorProcess:
    """``toposched operator`` as a real subprocess, watching one namespace."""

    def __init__(self, kubeconfig: Path, namespace: str, log: Path, identity: str, lease: str) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.log = log
        self.identity = identity
        self.lease = lease
        self.metrics_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = as_in_image(
            {
                **os.environ,
                "KUBECONFIG": str(self.kubeconfig),
                "TOPOSCHED_METRICS_PORT": str(self.metrics_port),
                "TOPOSCHED_LEASE_NAMESPACE": self.namespace,
                "TOPOSCHED_LEASE_NAME": self.lease,
                "TOPOSCHED_IDENTITY": self.identity,
            }
        )
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "toposched", "operator", "--namespace", self.namespace],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def kill(self) -> None:
        """SIGKILL: no cleanup, as when a node dies or the OOM killer strikes."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def metric(self, name: str, within: float = 30) -> float:
        """Sum of a Prometheus metric's samples from the operator's /metrics endpoint.

        A process started a moment ago may not serve it yet (it starts with the operator's start-up
        handler, seconds after the process on a loaded machine): connections are refused until then.
        """
        import urllib.error
        import urllib.request

        deadline = time.monotonic() + within
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as response:
                    text = response.read().decode()
                break
            except urllib.error.URLError as exc:
                if not isinstance(exc.reason, ConnectionRefusedError) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name) and " " in line)


def skip_or_fail(message: str) -> None:
    """Skip a test for a missing tool, except under CI, where a missing tool is a failure."""
    import pytest

    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _without_rules(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_rules(v) for k, v in schema.items() if k != "x-kubernetes-validations"}
    if isinstance(schema, list):
        return [_without_rules(v) for v in schema]
    return schema


@contextlib.contextmanager
def crd_without_bounds(kubectl: list[str], crd_file: str, probe: dict[str, Any]) -> Iterator[None]:
    """The CRD of ``crds/<crd_file>`` without its CEL rules while the block runs, as clusters had it
    before the bounds: objects written then stay in storage when the CRD is upgraded, and the
    components must cope with them. ``probe`` is an object the bounds refuse: on the way out the
    CRD is put back and the block ends only once the apiserver refuses the probe again."""
    from testkit.paths import CRDS

    crd = yaml.safe_load((CRDS / crd_file).read_text())
    apply = [*kubectl, "apply", "--server-side", "--force-conflicts", "-f", "-"]
    subprocess.run(apply, input=yaml.safe_dump(_without_rules(crd)), text=True, check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run(apply, input=yaml.safe_dump(crd), text=True, check=True, capture_output=True)
        dry_run = [*kubectl, "create", "--dry-run=server", "-o", "name", "-f", "-"]
        deadline = time.monotonic() + 30
        while subprocess.run(dry_run, input=yaml.safe_dump(probe), text=True, capture_output=True).returncode == 0:
            assert time.monotonic() < deadline, f"the bounds of {crd_file} were not enforced again"
            time.sleep(0.2)


async def create_accepted(create: Callable[[], Awaitable[T]], within: float = 15) -> T:
    """``create()`` once the apiserver accepts it (a CRD change takes a moment to apply)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await create()
        except ApiException as exc:
            if exc.status != 422 or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
