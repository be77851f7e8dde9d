"""The Helm chart against the local control plane: lint, server-side validation, install,
least-privilege RBAC (each component run with its own ServiceAccount's token), uninstall."""

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from testkit.cluster import create_appgroup, ensure_kwok_node, free_port, wait_for
from testkit.paths import CRDS, EXAMPLES, REPO
from testkit.sysfs import two_socket
from toposched.exporter.kubeletconfig import KubeletConfig
from toposched.exporter.publisher import Publisher
from toposched.exporter.sysfs import read_machine
from toposched.exporter.topology import Inputs, build
from toposched.kube.nodeclient import KubeAPI

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds")]

CHART = REPO / "charts" / "toposched"
ALL_FEATURES = CHART / "ci" / "all-features.yaml"
BOUTIQUE = yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text())


def tool(name: str) -> str:
    bin_dir = subprocess.run(
        [str(REPO / "hack" / "build-binaries.sh"), "--print"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return os.path.join(bin_dir, name)


def run(*args: str, kubeconfig: Path | None = None, stdin: str | None = None) -> str:
    env = {**os.environ, **({"KUBECONFIG": str(kubeconfig)} if kubeconfig else {})}
    done = subprocess.run(args, capture_output=True, text=True, env=env, input=stdin)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.parametrize(
    "values",
    [
        [],
        ["-f", str(ALL_FEATURES)],
        ["--set", "serviceMonitor.enabled=true", "--set", "schedhook.tls.certManager.enabled=true"],
    ],
    ids=["default", "all-features", "third-party-crds"],
)
def test_lint_and_template(values: list[str]) -> None:
    run(tool("helm"), "lint", "--strict", str(CHART), *values)
    rendered = run(tool("helm"), "template", "t", str(CHART), *values)
    kinds = {d["kind"] for d in yaml.safe_load_all(rendered) if d}
    assert {
        "Deployment",
        "DaemonSet",
        "ClusterRole",
        "MutatingWebhookConfiguration",
        "CustomResourceDefinition",
    } <= kinds


def test_chart_crds_are_the_repo_crds() -> None:
    """One source: the chart's CRDs are a link to crds/, not a copy that could drift."""
    assert (CHART / "files" / "crds").resolve() == CRDS.resolve()
    for crd in CRDS.glob("*.yaml"):
        assert (CHART / "files" / "crds" / crd.name).read_text() == crd.read_text(), f"{crd.name} drifted"


@pytest.mark.parametrize("values", [[], ["-f", str(ALL_FEATURES)]], ids=["default", "all-features"])
def test_rendered_manifests_are_accepted_by_the_apiserver(kubeconfig: Path, namespace: str, values: list[str]) -> None:
    rendered = run(tool("helm"), "template", "dry", str(CHART), "-n", namespace, *values)
    run(tool("kubectl"), "apply", "--server-side", "--dry-run=server", "-f", "-", kubeconfig=kubeconfig, stdin=rendered)


@pytest.fixture(scope="module")
def release(kubeconfig: Path) -> Iterator[tuple[str, str]]:
    name, namespace = f"ts{uuid.uuid4().hex[:6]}", f"toposched-{uuid.uuid4().hex[:6]}"
    helm = tool("helm")
    # The CRDs are already there (kubectl apply -f crds/, by the crds fixture): Helm must not own them.
    install = ["install", name, str(CHART), "-n", namespace, "--create-namespace", "-f", str(ALL_FEATURES)]
    run(helm, *install, "--set", "crds.install=false", kubeconfig=kubeconfig)
    yield name, namespace
    run(helm, "uninstall", name, "-n", namespace, "--wait", kubeconfig=kubeconfig)
    # Nothing of the release is left but the CRDs (kept on purpose).
    left = run(
        tool("kubectl"),
        "get",
        "clusterroles,clusterrolebindings,mutatingwebhookconfigurations,"
        "validatingwebhookconfigurations,rolebindings,roles,deployments,daemonsets,services,secrets,"
        "serviceaccounts,configmaps",
        "-A",
        "-l",
        f"app.kubernetes.io/instance={name}",
        "-o",
        "name",
        kubeconfig=kubeconfig,
    )
    assert left.strip() == ""
    crds = run(tool("kubectl"), "get", "crd", "-o", "name", kubeconfig=kubeconfig)
    assert "appgroups.appgroup.diktyo.x-k8s.io" in crds
    run(tool("kubectl"), "delete", "namespace", namespace, "--wait=false", kubeconfig=kubeconfig)


def sa(release: tuple[str, str], component: str) -> str:
    return f"system:serviceaccount:{release[1]}:{release[0]}-toposched-{component}"


def can_i(kubeconfig: Path, who: str, verb: str, resource: str, namespace: str | None = None) -> bool:
    resource, _, subresource = resource.partition("/")
    args = [tool("kubectl"), "auth", "can-i", verb, resource, f"--as={who}"]
    args += [f"--subresource={subresource}"] if subresource else []
    args += ["-n", namespace] if namespace else ["--all-namespaces"]
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "KUBECONFIG": str(kubeconfig)})
    return done.stdout.strip() == "yes"


# What each component may do, and a selection of what it must not. Namespaced checks use "release".
RBAC = {
    "operator": (
        [
            ("watch", "appgroups.appgroup.diktyo.x-k8s.io"),
            ("patch", "appgroups.appgroup.diktyo.x-k8s.io/status"),
            ("patch", "networktopologies.networktopology.diktyo.x-k8s.io"),
            ("list", "pods"),
            ("watch", "nodes"),
            ("get", "configmaps"),
            ("create", "events"),
            ("update", "leases.coordination.k8s.io", "release"),
        ],
        [
            ("patch", "appgroups.appgroup.diktyo.x-k8s.io"),
            ("delete", "pods"),
            ("get", "secrets"),
            ("create", "pods"),
            ("patch", "nodes"),
            ("update", "leases.coordination.k8s.io"),
            ("create", "noderesourcetopologies.topology.node.k8s.io"),
        ],
    ),
    "exporter": (
        [
            ("create", "noderesourcetopologies.topology.node.k8s.io"),
            ("update", "noderesourcetopologies.topology.node.k8s.io"),
            ("get", "nodes"),
            ("list", "nodes"),
            ("patch", "nodes/status"),
            ("create", "configmaps", "release"),
        ],
        [
            ("delete", "noderesourcetopologies.topology.node.k8s.io"),
            ("list", "pods"),
            ("get", "secrets"),
            ("patch", "nodes"),
            ("create", "configmaps"),
            ("list", "appgroups.appgroup.diktyo.x-k8s.io"),
        ],
    ),
    "schedhook": (
        [
            ("watch", "noderesourcetopologies.topology.node.k8s.io"),
            ("watch", "appgroups.appgroup.diktyo.x-k8s.io"),
            ("watch", "networktopologies.networktopology.diktyo.x-k8s.io"),
            ("patch", "pods"),
            ("delete", "pods"),
            ("create", "pods/binding"),
            ("create", "events"),
        ],
        [
            ("get", "secrets"),
            ("create", "pods"),
            ("update", "noderesourcetopologies.topology.node.k8s.io"),
            ("patch", "appgroups.appgroup.diktyo.x-k8s.io/status"),
            ("delete", "nodes"),
        ],
    ),
    "scheduler": (
        [("create", "pods/binding"), ("watch", "pods"), ("create", "leases.coordination.k8s.io", "release")],
        # (it may delete pods: the built-in scheduler role preempts)
        [("get", "secrets"), ("create", "configmaps"), ("patch", "noderesourcetopologies.topology.node.k8s.io")],
    ),
}


@pytest.mark.parametrize("component", sorted(RBAC))
def test_least_privilege(kubeconfig: Path, release: tuple[str, str], component: str) -> None:
    allowed, denied = RBAC[component]
    who = sa(release, component)
    for verb, resource, *scope in allowed:
        namespace = release[1] if scope else None
        assert can_i(kubeconfig, who, verb, resource, namespace), f"{component} should {verb} {resource}"
    for verb, resource, *scope in denied:
        namespace = release[1] if scope else None
        assert not can_i(kubeconfig, who, verb, resource, namespace), f"{component} must not {verb} {resource}"


async def sa_token(api: client.ApiClient, release: tuple[str, str], component: str) -> str:
    """A real token of the component's ServiceAccount (TokenRequest)."""
    name = f"{release[0]}-toposched-{component}"
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))
    answer = await client.CoreV1Api(api).create_namespaced_service_account_token(name, release[1], request)
    return str(answer.status.token)


def token_kubeconfig(admin: Path, token: str, path: Path) -> Path:
    """A kubeconfig for the local cluster that authenticates with ``token`` only."""
    cluster = yaml.safe_load(admin.read_text())["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "sa",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "sa"}}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


def start_operator(config: Path, namespace: str, lease_namespace: str, log: Path) -> "subprocess.Popen[bytes]":
    # The Lease lives in the release namespace, where the chart's Role allows it.
    env = {
        **os.environ,
        "KUBECONFIG": str(config),
        "TOPOSCHED_METRICS_PORT": "0",
        "TOPOSCHED_LEASE_NAMESPACE": lease_namespace,
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "toposched", "operator", "--namespace", namespace],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def stop(proc: "subprocess.Popen[bytes]", log: Path) -> None:
    proc.terminate()
    proc.wait(15)
    print(log.read_text()[-3000:])


async def test_operator_works_with_its_service_account(
    api: client.ApiClient, kubeconfig: Path, release: tuple[str, str], namespace: str, tmp_path: Path
) -> None:
    config = token_kubeconfig(kubeconfig, await sa_token(api, release, "operator"), tmp_path / "kubeconfig")
    proc = start_operator(config, namespace, release[1], tmp_path / "op.log")
    try:
        await create_appgroup(api, namespace, BOUTIQUE)

        async def ordered() -> Any:
            obj = await client.CustomObjectsApi(api).get_namespaced_custom_object(
                "appgroup.diktyo.x-k8s.io", "v1alpha1", namespace, "appgroups", "online-boutique"
            )
            return obj if obj.get("status", {}).get("topologyOrder") else None

        await wait_for(ordered, within=60, what="status written by the operator's ServiceAccount")
    finally:
        stop(proc, tmp_path / "op.log")


async def test_exporter_works_with_its_service_account(
    api: client.ApiClient, kubeconfig: Path, release: tuple[str, str], tmp_path: Path
) -> None:
    node = f"rbac-{uuid.uuid4().hex[:6]}"
    await ensure_kwok_node(api, node)
    config = token_kubeconfig(kubeconfig, await sa_token(api, release, "exporter"), tmp_path / "kubeconfig")
    async with KubeAPI.from_kubeconfig(config) as kube:
        publisher = Publisher(kube, node)
        machine = read_machine(two_socket(tmp_path))
        nrt = build(Inputs(node, machine, KubeletConfig(), owner=await publisher.owner()))
        assert await publisher.publish(nrt) is True
        await publisher.advertise_bandwidth(10**10)
    stored = await client.CustomObjectsApi(api).get_cluster_custom_object(
        "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", node
    )
    assert [z["name"] for z in stored["zones"]] == ["node-0", "node-1"]
    await client.CoreV1Api(api).delete_node(node)


def start_schedhook(config: Path, port: int, log: Path) -> "subprocess.Popen[bytes]":
    env = {**os.environ, "KUBECONFIG": str(config)}
    command = [sys.executable, "-m", "toposched", "schedhook", "--address", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        return subprocess.Popen(
            [*command, "--metrics-port", "0", "--no-remediation"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


async def test_schedhook_works_with_its_service_account(
    api: client.ApiClient, kubeconfig: Path, release: tuple[str, str], tmp_path: Path
) -> None:
    config = token_kubeconfig(kubeconfig, await sa_token(api, release, "schedhook"), tmp_path / "kubeconfig")
    port = free_port()
    proc = start_schedhook(config, port, tmp_path / "toposched.schedhook.log")
    try:

        async def ready() -> bool:
            # Ready means every watch (nodes, pods, NRTs, AppGroups, NetworkTopologies) has listed.
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                return False
            writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = await reader.read()
            writer.close()
            await writer.wait_closed()
            return b" 200 " in answer.split(b"\r\n", 1)[0] + b" "

        await wait_for(ready, within=60, what="schedhook ready with its ServiceAccount")
    finally:
        stop(proc, tmp_path / "toposched.schedhook.log")
