"""Fixtures for tests against the real local control plane.

The control plane is started on demand by ``hack/cluster.sh up`` (or reused when it is
already running); each test gets a namespace of its own, deleted afterwards.
"""

import os
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from testkit.cluster import OperatorProcess, skip_or_fail
from testkit.paths import CRDS, REPO
from testkit.podresources import FakeKubelet
from testkit.realnode import missing_tools
from toposched.exporter.podresources._generated import api_pb2

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="session")
def kubeconfig() -> Path:
    """Kubeconfig of the local control plane, which is started if it is not running."""
    subprocess.run([str(REPO / "hack" / "cluster.sh"), "up"], check=True, stdout=subprocess.DEVNULL)
    path = REPO / ".cluster" / "kubeconfig"
    assert path.is_file(), f"hack/cluster.sh up did not write {path}"
    return path


@pytest.fixture(scope="session")
def kubectl(kubeconfig: Path) -> list[str]:
    """The pinned kubectl, aimed at the local control plane."""
    bin_dir = subprocess.run(
        [str(REPO / "hack" / "build-binaries.sh"), "--print"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return [os.path.join(bin_dir, "kubectl"), "--kubeconfig", str(kubeconfig)]


@pytest.fixture(scope="session")
def crds(kubectl: list[str]) -> None:
    """The project's CRDs, applied from crds/ and established."""
    subprocess.run([*kubectl, "apply", "--server-side", "-f", str(CRDS)], check=True, capture_output=True)
    subprocess.run(
        [*kubectl, "wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS)],
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="session")
async def api(kubeconfig: Path) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api_client:
        yield api_client


@pytest.fixture
async def namespace(api: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace for one test."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    await core.delete_namespace(name)


@pytest.fixture
def operator(kubeconfig: Path, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    """``toposched operator`` watching only this test's namespace, with a Lease of its own there."""
    proc = OperatorProcess(kubeconfig, namespace, tmp_path / "operator.log", identity="op-a", lease="toposched-test")
    proc.start()
    yield proc
    proc.stop()
    print((tmp_path / "operator.log").read_text()[-4000:])


@pytest.fixture(scope="session")
def real_nodes(kubeconfig: Path) -> None:
    """Root and the node tools (containerd, runc, CNI plugins...), else skip (fail under CI)."""
    problems = [] if os.geteuid() == 0 else ["root"]
    problems += [f"{m.what} ({m.package})" for m in missing_tools()]
    if problems:
        skip_or_fail(f"real nodes need {', '.join(problems)}: run `make test-tools` as root")


@pytest.fixture
async def kubelet() -> AsyncIterator[FakeKubelet]:
    """A fake kubelet PodResources server on a two-socket machine (CPUs 0 and 32 reserved)."""
    # A short path: unix socket paths are limited to 107 bytes.
    socket_dir = Path(tempfile.mkdtemp(prefix="tsk-", dir="/tmp"))
    server = FakeKubelet(socket_dir / "kubelet.sock")
    server.allocatable = api_pb2.AllocatableResourcesResponse(cpu_ids=[c for c in range(64) if c not in (0, 32)])
    await server.start()
    yield server
    await server.stop()
    os.rmdir(socket_dir)
