"""The Helm chart against the local control plane: lint, server-side validation, install,
least-privilege RBAC (each component run with its own ServiceAccount's token), uninstall."""

import asyncio
import base64
import json
import os
import ssl
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from testkit.builders import pod_body
from testkit.certs import ExtenderPKI, KeyPair
from testkit.cluster import create_appgroup, ensure_kwok_node, free_port, wait_default_service_account, wait_for
from testkit.extender import REFUSED, call, schedhook_tls_args
from testkit.paths import CRDS, EXAMPLES, REPO
from testkit.sysfs import eight_node, two_socket
from toposched.apis.constants import TOPOLOGY_MANAGER_POLICY_LABEL
from toposched.exporter.kubeletconfig import KubeletConfig
from toposched.exporter.publisher import NRTS, Publisher
from toposched.exporter.sysfs import read_machine
from toposched.exporter.topology import Inputs, build
from toposched.kube.nodeclient import ApiError, KubeAPI

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
        ["-f", str(ALL_FEATURES), "--set", "prometheusRule.enabled=true", "--set", "serviceMonitor.enabled=true"],
    ],
    ids=["default", "all-features", "third-party-crds", "monitoring"],
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


def test_monitoring_is_off_by_default_and_value_gated() -> None:
    """No rule, dashboard or capacity counter unless asked for; each alert's runbook is in the docs."""
    kinds = {kind for kind, _ in rendered()}
    assert not kinds & {"PrometheusRule"}
    assert ("ConfigMap", "t-toposched-dashboard") not in rendered()
    on = rendered("-f", str(ALL_FEATURES), "--set", "prometheusRule.enabled=true")
    rules = on[("PrometheusRule", "t-toposched")]["spec"]["groups"][0]["rules"]
    runbook = (REPO / "docs" / "operations.md").read_text().lower()
    for rule in rules:
        assert f"### {rule['alert'].lower()}" in runbook, rule["alert"]
    dashboard = on[("ConfigMap", "t-toposched-dashboard")]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["toposched.json"])["panels"]
    args = on[("Deployment", "t-toposched-capacity")]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--shape=gpu-train=cpu:8,memory:16Gi,example.com/gpu:1" in args


def test_chart_crds_are_the_repo_crds() -> None:
    """One source: the chart's CRDs are a link to crds/, not a copy that could drift."""
    assert (CHART / "files" / "crds").resolve() == CRDS.resolve()
    for crd in CRDS.glob("*.yaml"):
        assert (CHART / "files" / "crds" / crd.name).read_text() == crd.read_text(), f"{crd.name} drifted"


def rendered(*values: str) -> dict[tuple[str, str], dict[str, Any]]:
    """``helm template`` of a release named t in namespace ns: (kind, name) -> object."""
    text = run(tool("helm"), "template", "t", str(CHART), "-n", "ns", *values)
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(text) if d}


def test_only_the_scheduler_reaches_the_extender(tmp_path: Path) -> None:
    """The chart's wiring of schedhook's extender (without the sidecar): HTTPS with a client
    certificate the extender checks, and a NetworkPolicy that admits only the release's
    kube-scheduler pods to the extender port."""
    objects = rendered("--set", "scheduler.extenderSidecar=false")
    schedhook = objects["Deployment", "t-toposched-schedhook"]["spec"]["template"]
    scheduler = objects["Deployment", "t-toposched-scheduler"]["spec"]["template"]
    (container,) = schedhook["spec"]["containers"]
    assert "--extender-client-name=t-toposched-scheduler" in container["args"]
    assert "--extender-client-ca=/tls/ca.crt" in container["args"]
    assert {container["livenessProbe"]["httpGet"]["scheme"], container["readinessProbe"]["httpGet"]["scheme"]} == {
        "HTTPS"
    }

    config = yaml.safe_load(objects["ConfigMap", "t-toposched-scheduler"]["data"]["config.yaml"])
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == "https://t-toposched-schedhook.ns.svc:8888"
    assert extender["enableHTTPS"] is True
    (mount,) = [m for m in scheduler["spec"]["containers"][0]["volumeMounts"] if m["name"] == "tls"]
    (volume,) = [v for v in scheduler["spec"]["volumes"] if v["name"] == "tls"]
    assert volume["secret"]["secretName"] == "t-toposched-scheduler-tls"
    files = {"certFile": "tls.crt", "keyFile": "tls.key", "caFile": "ca.crt"}
    paths = {key: f"{mount['mountPath']}/{name}" for key, name in files.items()}
    assert extender["tlsConfig"] == {**paths, "serverName": "t-toposched-schedhook.ns.svc"}

    # The generated client certificate names the client the extender accepts, and chains to the CA
    # the extender verifies with (schedhook's Secret's ca.crt).
    for secret in ("t-toposched-schedhook-tls", "t-toposched-scheduler-tls"):
        for key, value in objects["Secret", secret]["data"].items():
            (tmp_path / f"{secret}-{key}").write_bytes(base64.b64decode(value))
    client_cert = str(tmp_path / "t-toposched-scheduler-tls-tls.crt")
    subject = run("openssl", "x509", "-in", client_cert, "-noout", "-subject", "-nameopt", "sep_multiline")
    assert "CN=t-toposched-scheduler" in subject
    run("openssl", "verify", "-CAfile", str(tmp_path / "t-toposched-schedhook-tls-ca.crt"), client_cert)

    policy = objects["NetworkPolicy", "t-toposched-schedhook"]["spec"]
    assert policy["podSelector"]["matchLabels"] == schedhook["metadata"]["labels"]
    assert policy["policyTypes"] == ["Ingress"]
    (to_extender,) = [rule for rule in policy["ingress"] if rule["ports"][0]["port"] == "extender"]
    assert to_extender["from"] == [{"podSelector": {"matchLabels": scheduler["metadata"]["labels"]}}]
    assert "extender" in {p["name"] for p in container["ports"]}


def test_the_extender_beside_each_scheduler() -> None:
    """The default: 2 kube-scheduler replicas spread over nodes, each with schedhook's extender as a
    sidecar called over the pod's loopback that acts only while its scheduler holds the Lease, with schedhook's
    rights; 2 webhook replicas spread over nodes; a PodDisruptionBudget for each."""
    objects = rendered()
    scheduler = objects["Deployment", "t-toposched-scheduler"]
    pod = scheduler["spec"]["template"]["spec"]
    assert scheduler["spec"]["replicas"] == 2
    extender = pod["containers"][1]
    assert extender["name"] == "extender"
    assert "--scheduler-lease=ns/toposched-scheduler" in extender["args"]
    assert {"--no-controllers", "--port=8889", "--extender-client-name=t-toposched-scheduler"} <= set(extender["args"])
    assert not any(a.startswith("--tls-cert") for a in extender["args"])  # no webhooks in the sidecar
    (volume,) = [v for v in pod["volumes"] if v["name"] == "extender-tls"]
    assert volume["secret"]["secretName"] == "t-toposched-schedhook-tls"
    config = yaml.safe_load(objects["ConfigMap", "t-toposched-scheduler"]["data"]["config.yaml"])
    (called,) = config["extenders"]
    # Over the pod's loopback, plain HTTP: only the pod's containers reach it (no handshake per call).
    assert (called["urlPrefix"], called["enableHTTPS"]) == ("http://127.0.0.1:8890", False)
    assert "--loopback-port=8890" in extender["args"]
    binding = objects["ClusterRoleBinding", "t-toposched-scheduler-schedhook"]
    assert binding["roleRef"]["name"] == "t-toposched-schedhook"
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"]
    for name, component in (("t-toposched-scheduler", "scheduler"), ("t-toposched-schedhook", "schedhook")):
        deployment = objects["Deployment", name]["spec"]
        assert deployment["replicas"] == 2
        (term,) = deployment["template"]["spec"]["affinity"]["podAntiAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"
        ]
        assert term["podAffinityTerm"]["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == component
        budget = objects["PodDisruptionBudget", name]["spec"]
        assert budget == {"minAvailable": 1, "selector": deployment["selector"]}
    one = rendered("--set", "scheduler.replicas=1", "--set", "schedhook.replicas=1")
    assert not [key for key in one if key[0] == "PodDisruptionBudget"]


def completed(init: dict[str, Any], config: str, pod_ip: str) -> str:
    """What the init container writes from ``config`` on a node at ``pod_ip``: its script, run by sh
    in a directory standing for its two mounts."""
    mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    with tempfile.TemporaryDirectory() as tmp:
        template, out = Path(tmp, "template"), Path(tmp, "config")
        template.mkdir()
        out.mkdir()
        (template / "config.yaml").write_text(config)
        script = init["command"][-1].replace(mounts["config-template"], str(template))
        script = script.replace(mounts["config"] + "/", f"{out}/")
        subprocess.run(["sh", "-c", script], env={"POD_IP": pod_ip, "PATH": os.environ["PATH"]}, check=True)
        return (out / "config.yaml").read_text()


def test_host_network_mode() -> None:
    """hack/chart-local-cluster.yaml: every pod on the host network, reaching the apiserver at
    the address given; each listener on the node's address (the host's loopback may be shared by
    several nodes), each sidecar's too, called there by its kube-scheduler (whose config an init
    container completes), checking the Service's name. Without the sidecar schedhook's extender
    listens on loopback only, called there by the kube-scheduler that runs on schedhook's node."""
    local = str(REPO / "hack" / "chart-local-cluster.yaml")
    objects = rendered("-f", local, "--set", "hostNetwork.apiServer=127.0.0.1:6443")
    api_server = [
        {"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
        {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
    ]
    pods = {
        name: obj["spec"]["template"]["spec"]
        for (kind, name), obj in objects.items()
        if kind in ("Deployment", "DaemonSet")
    }
    assert len(pods) == 4
    for name, pod in pods.items():
        assert pod["hostNetwork"] is True, name
        assert pod["dnsPolicy"] == "ClusterFirstWithHostNet", name
        for container in pod["containers"]:
            assert all(v in container["env"] for v in api_server), (name, container["name"])

    (operator,) = pods["t-toposched-operator"]["containers"]
    assert operator["args"] == ["operator", "--liveness", "http://$(POD_IP):8080/healthz"]
    assert {"name": "TOPOSCHED_METRICS_ADDRESS", "value": "$(POD_IP)"} in operator["env"]

    (schedhook,) = pods["t-toposched-schedhook"]["containers"]
    told = {"--address=$(POD_IP)", "--webhook-address=$(POD_IP)", "--metrics-address=$(POD_IP)"}
    assert told <= set(schedhook["args"])
    assert "host" not in schedhook["readinessProbe"]["httpGet"]  # the pod's IP: the node's

    scheduler = pods["t-toposched-scheduler"]
    assert "--bind-address=$(POD_IP)" in scheduler["containers"][0]["command"]
    # Replicas on different nodes (their ports would clash), replaced one at a time.
    for name, component in (("t-toposched-scheduler", "scheduler"), ("t-toposched-schedhook", "schedhook")):
        spread = pods[name]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert spread[0]["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == component
        strategy = objects["Deployment", name]["spec"]["strategy"]
        assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    # The sidecar's extender at the node's address, at a port of its own; the init container writes
    # that address into kube-scheduler's config.
    sidecar = scheduler["containers"][1]
    assert {"--address=$(POD_IP)", "--port=8889", "--metrics-address=$(POD_IP)"} <= set(sidecar["args"])
    assert "host" not in sidecar["readinessProbe"]["httpGet"]
    config_map = objects["ConfigMap", "t-toposched-scheduler"]["data"]["config.yaml"]
    assert yaml.safe_load(config_map)["extenders"][0]["urlPrefix"] == "https://@POD_IP@:8889"
    (init,) = scheduler["initContainers"]
    assert {"name": "config", "mountPath": "/etc/toposched", "readOnly": True} in scheduler["containers"][0][
        "volumeMounts"
    ]
    volumes = {v["name"]: v for v in scheduler["volumes"]}
    assert volumes["config-template"]["configMap"]["name"] == "t-toposched-scheduler"
    assert "emptyDir" in volumes["config"]
    for pod_ip, url in (("10.1.2.3", "https://10.1.2.3:8889"), ("fd00::7", "https://[fd00::7]:8889")):
        assert yaml.safe_load(completed(init, config_map, pod_ip))["extenders"][0]["urlPrefix"] == url

    # Without the sidecar: the one kube-scheduler runs on schedhook's node and calls it on loopback.
    objects = rendered("-f", local, "--set", "scheduler.extenderSidecar=false")
    scheduler = objects["Deployment", "t-toposched-scheduler"]["spec"]["template"]["spec"]
    assert "initContainers" not in scheduler
    (schedhook,) = objects["Deployment", "t-toposched-schedhook"]["spec"]["template"]["spec"]["containers"]
    assert "--address=127.0.0.1" in schedhook["args"]
    assert schedhook["readinessProbe"]["httpGet"]["host"] == "127.0.0.1"
    (term,) = scheduler["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == "schedhook"
    config = yaml.safe_load(objects["ConfigMap", "t-toposched-scheduler"]["data"]["config.yaml"])
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == "https://127.0.0.1:8888"
    assert extender["tlsConfig"]["serverName"] == "t-toposched-schedhook.ns.svc"

    # The example names the kube-scheduler image make images builds: the pinned version.
    pinned = (REPO / "hack" / "versions.env").read_text()
    assert f"KUBERNETES_VERSION={scheduler['containers'][0]['image'].rsplit(':', 1)[1]}" in pinned


def test_exporter_listens_on_its_pod_ip_only() -> None:
    """On the host network (netperf) the pod's IP is the node's: not every interface of the node."""
    daemonset = rendered("-f", str(ALL_FEATURES))["DaemonSet", "t-toposched-exporter"]["spec"]["template"]["spec"]
    assert daemonset["hostNetwork"] is True
    containers = {c["name"]: c for c in daemonset["containers"]}
    pod_ip = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    for name in ("exporter", "netserver"):
        assert pod_ip in containers[name]["env"]
    assert {"--metrics-address=$(POD_IP)", "--health-address=$(POD_IP)"} <= set(containers["exporter"]["args"])
    assert containers["netserver"]["command"][-2:] == ["-L", "$(POD_IP)"]


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
        "serviceaccounts,configmaps,networkpolicies,validatingadmissionpolicies,validatingadmissionpolicybindings",
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
            ("watch", "noderesourcetopologies.topology.node.k8s.io"),
            ("get", "nodes"),
            ("list", "nodes"),
            ("patch", "nodes/status"),
            # its own node's topology-manager labels only: the admission policy test holds it to them
            ("patch", "nodes"),
            ("create", "configmaps", "release"),
        ],
        [
            ("delete", "noderesourcetopologies.topology.node.k8s.io"),
            ("list", "pods"),
            ("get", "secrets"),
            ("update", "nodes"),
            ("delete", "nodes"),
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
            ("watch", "resourceslices.resource.k8s.io"),
            ("watch", "deviceclasses.resource.k8s.io"),
            ("get", "resourceclaims.resource.k8s.io"),
            ("update", "resourceclaims.resource.k8s.io/status"),
        ],
        [
            ("get", "secrets"),
            ("update", "resourceclaims.resource.k8s.io"),
            ("delete", "resourceclaims.resource.k8s.io"),
            ("create", "resourceslices.resource.k8s.io"),
            ("create", "pods"),
            ("update", "noderesourcetopologies.topology.node.k8s.io"),
            ("patch", "appgroups.appgroup.diktyo.x-k8s.io/status"),
            ("delete", "nodes"),
        ],
    ),
    "scheduler": (
        # patch pods: the extender beside it wakes the pods it refused once room frees
        [
            ("create", "pods/binding"),
            ("watch", "pods"),
            ("patch", "pods"),
            ("create", "leases.coordination.k8s.io", "release"),
        ],
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


async def node_bound_token(api: client.ApiClient, release: tuple[str, str], component: str, node: str) -> str:
    """A token of the component's ServiceAccount bound to a pod of it on ``node``, as the kubelet mounts
    into a DaemonSet's pod: the apiserver adds the node's name to every request made with it."""
    account = f"{release[0]}-toposched-{component}"
    core = client.CoreV1Api(api)
    pod = {
        "metadata": {"name": f"{component}-{node}"},
        "spec": {
            "nodeName": node,
            "serviceAccountName": account,
            "automountServiceAccountToken": False,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": component, "image": "example.invalid/exporter:1"}],
        },
    }
    created = await core.create_namespaced_pod(release[1], pod)
    bound = client.V1BoundObjectReference(api_version="v1", kind="Pod", name=created.metadata.name)
    bound.uid = created.metadata.uid
    spec = client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600, bound_object_ref=bound)
    answer = await core.create_namespaced_service_account_token(
        account, release[1], client.AuthenticationV1TokenRequest(spec=spec)
    )
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
    token = await node_bound_token(api, release, "exporter", node)
    config = token_kubeconfig(kubeconfig, token, tmp_path / "kubeconfig")
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


@pytest.fixture(scope="module")
async def nodes_a_and_b(
    api: client.ApiClient, kubeconfig: Path, release: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, str]]:
    """Two kwok nodes, and the exporter's tokens: one bound to its pod on node A, one bound to nothing."""
    tag, work = uuid.uuid4().hex[:6], tmp_path_factory.mktemp("restriction")
    names = {"a": f"node-a-{tag}", "b": f"node-b-{tag}"}
    for name in names.values():
        await ensure_kwok_node(api, name)
    token = await node_bound_token(api, release, "exporter", names["a"])

    async def in_force() -> bool:
        # The apiserver loads new policies asynchronously; a dry run goes through admission all the same.
        async with KubeAPI.from_kubeconfig(token_kubeconfig(kubeconfig, token, work / "kubeconfig")) as kube:
            body = {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology"}
            body |= {"metadata": {"name": names["b"]}, "zones": [{"name": "node-0", "type": "Node"}]}
            try:
                await kube.request("POST", NRTS, body, dryRun="All")
            except ApiError as exc:
                return exc.status == 403
            return False

    await wait_for(in_force, within=30, what="the exporter's node restriction in force")
    yield {**names, "token-a": token}
    for name in names.values():
        await client.CoreV1Api(api).delete_node(name)


async def write(kube: KubeAPI, node: str, what: str, tmp_path: Path) -> None:
    """What the exporter writes: the node's NRT (created or replaced), or the node's bandwidth."""
    publisher = Publisher(kube, node)
    if what == "bandwidth":
        await publisher.advertise_bandwidth(10**10)
        return
    if what in ("labels", "other-label"):
        key = TOPOLOGY_MANAGER_POLICY_LABEL if what == "labels" else "example.com/other"
        body = await publisher.read_node()
        assert await publisher.label_node(body, {key: f"v{uuid.uuid4().hex[:6]}"}) is True
        return
    owner = await publisher.owner()
    # The admin's NRT differs from the exporter's, so the exporter replaces it.
    sysfs = eight_node(tmp_path / what) if what == "admin" else two_socket(tmp_path / what)
    assert await publisher.publish(build(Inputs(node, read_machine(sysfs), KubeletConfig(), owner=owner))) is True


NOT_OWN = "the toposched exporter on node {a} may write {what} of its own node only, not of {b}"
OTHER_LABEL = "the toposched exporter may change only the toposched.io/topology-manager-* labels of its node"


@pytest.mark.parametrize(
    ("token", "what", "node", "denied"),
    [
        pytest.param("token-a", "create", "a", None, id="own-nrt-created"),
        pytest.param("token-a", "replace", "a", None, id="own-nrt-replaced"),
        pytest.param("token-a", "bandwidth", "a", None, id="own-node-status"),
        pytest.param("token-a", "labels", "a", None, id="own-node-topology-labels"),
        pytest.param("token-a", "other-label", "a", OTHER_LABEL, id="own-node-another-label"),
        pytest.param("token-a", "labels", "b", NOT_OWN, id="other-node-labels"),
        pytest.param("token-a", "create", "b", NOT_OWN, id="other-nrt-created"),
        pytest.param("token-a", "replace", "b", NOT_OWN, id="other-nrt-replaced"),
        pytest.param("token-a", "bandwidth", "b", NOT_OWN, id="other-node-status"),
        pytest.param(
            "unbound",
            "create",
            "a",
            "the toposched exporter may write {what} of its own node only, and its token names no node",
            id="token-bound-to-no-node",
        ),
    ],
)
async def test_exporter_writes_only_its_own_node(
    api: client.ApiClient,
    kubeconfig: Path,
    release: tuple[str, str],
    nodes_a_and_b: dict[str, str],
    tmp_path: Path,
    token: str,
    what: str,
    node: str,
    denied: str | None,
) -> None:
    """The chart's ValidatingAdmissionPolicy: node A's exporter writes A's NRT and status, never B's."""
    target = nodes_a_and_b[node]
    custom = client.CustomObjectsApi(api)
    try:
        await custom.delete_cluster_custom_object("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", target)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
    if what == "replace":
        async with KubeAPI.from_kubeconfig(kubeconfig) as admin:
            await write(admin, target, "admin", tmp_path)
    secret = nodes_a_and_b[token] if token != "unbound" else await sa_token(api, release, "exporter")
    async with KubeAPI.from_kubeconfig(token_kubeconfig(kubeconfig, secret, tmp_path / "kubeconfig")) as kube:
        if denied is None:
            await write(kube, target, what, tmp_path)
            return
        with pytest.raises(ApiError) as info:
            await write(kube, target, what, tmp_path)
    print(f"{what} {target} with {token}: {info.value}")
    resource = {"bandwidth": "nodes/status", "labels": "nodes", "other-label": "nodes"}.get(
        what, "noderesourcetopologies"
    )
    assert info.value.status == 403
    assert denied.format(what=resource, **nodes_a_and_b) in str(info.value)


@pytest.fixture(scope="module")
async def chart_pki(
    api: client.ApiClient, release: tuple[str, str], tmp_path_factory: pytest.TempPathFactory, pki: ExtenderPKI
) -> ExtenderPKI:
    """The certificates the chart generated (schedhook's and kube-scheduler's), as files; the
    "impostor" is schedhook's own certificate presented as a client (the same CA, another name),
    the "stranger" the scheduler's name from the test CA."""
    work = tmp_path_factory.mktemp("chart-pki")
    pairs = {}
    for component in ("schedhook", "scheduler"):
        secret = await client.CoreV1Api(api).read_namespaced_secret(
            f"{release[0]}-toposched-{component}-tls", release[1]
        )
        for key, value in secret.data.items():
            (work / f"{component}-{key}").write_bytes(base64.b64decode(value))
        pairs[component] = KeyPair(work / f"{component}-tls.crt", work / f"{component}-tls.key")
    return ExtenderPKI(
        work / "schedhook-ca.crt", pairs["schedhook"], pairs["scheduler"], pairs["schedhook"], pki.stranger
    )


def start_schedhook(
    config: Path, port: int, log: Path, pki: ExtenderPKI, release: tuple[str, str]
) -> "subprocess.Popen[bytes]":
    """schedhook with the chart's certificates and flags, on 127.0.0.1 (the webhooks off: not needed)."""
    env = {**os.environ, "KUBECONFIG": str(config)}
    command = [sys.executable, "-m", "toposched", "schedhook", "--address", "127.0.0.1", "--port", str(port)]
    command += [*schedhook_tls_args(pki), "--extender-client-name", f"{release[0]}-toposched-scheduler"]
    with log.open("wb") as out:
        return subprocess.Popen(
            [*command, "--metrics-port", "0", "--no-remediation"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def service_name(release: tuple[str, str]) -> str:
    """The name in schedhook's certificate: its Service's, which kube-scheduler calls."""
    return f"{release[0]}-toposched-schedhook.{release[1]}.svc"


async def test_schedhook_works_with_its_service_account(
    api: client.ApiClient,
    kubeconfig: Path,
    namespace: str,
    release: tuple[str, str],
    tmp_path: Path,
    chart_pki: ExtenderPKI,
) -> None:
    config = token_kubeconfig(kubeconfig, await sa_token(api, release, "schedhook"), tmp_path / "kubeconfig")
    port = free_port()
    proc = start_schedhook(config, port, tmp_path / "toposched.schedhook.log", chart_pki, release)
    tls = ssl.create_default_context(cafile=str(chart_pki.ca))  # as the kubelet's probes: no client certificate
    try:

        async def ready() -> bool:
            # Ready means every watch (nodes, pods, NRTs, AppGroups, NetworkTopologies) has listed.
            try:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", port, ssl=tls, server_hostname=service_name(release)
                )
            except OSError:
                return False
            writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = await reader.read()
            writer.close()
            await writer.wait_closed()
            return b" 200 " in answer.split(b"\r\n", 1)[0] + b" "

        await wait_for(ready, within=60, what="schedhook ready with its ServiceAccount")

        # /bind with its rights: the pods/binding subresource kube-scheduler uses too.
        await wait_default_service_account(api, namespace)
        node = f"kwok-bind-{uuid.uuid4().hex[:6]}"
        await ensure_kwok_node(api, node)
        core = client.CoreV1Api(api)
        body = pod_body("bound", scheduler="nobody", container="c", image="example.invalid/c:1")
        pod = await core.create_namespaced_pod(namespace, body)
        context = ssl.create_default_context(cafile=str(chart_pki.ca))
        context.load_cert_chain(chart_pki.scheduler.cert, chart_pki.scheduler.key)
        args = {"PodName": "bound", "PodNamespace": namespace, "PodUID": pod.metadata.uid, "Node": node}
        status, text = await call(port, "/bind", args, context, server_hostname=service_name(release))
        assert (status, json.loads(text).get("Error") or "") == (200, ""), text
        assert (await core.read_namespaced_pod("bound", namespace)).spec.node_name == node
        await core.delete_node(node)
    finally:
        stop(proc, tmp_path / "toposched.schedhook.log")


@pytest.mark.parametrize(
    ("caller", "expected"),
    [
        pytest.param("scheduler", 200, id="the-charts-scheduler-certificate"),
        pytest.param(None, 401, id="no-certificate"),
        pytest.param("impostor", 403, id="schedhooks-own-certificate-as-a-client"),
        pytest.param("stranger", REFUSED, id="the-schedulers-name-from-another-ca"),
    ],
)
async def test_the_charts_certificates_admit_only_its_scheduler(
    api: client.ApiClient,
    kubeconfig: Path,
    release: tuple[str, str],
    tmp_path: Path,
    chart_pki: ExtenderPKI,
    caller: str | None,
    expected: int | str,
) -> None:
    """schedhook as the chart runs it, called as kube-scheduler calls it (the Service's name, the
    Secret's client certificate): only the certificate the chart issued to kube-scheduler is served."""
    config = token_kubeconfig(kubeconfig, await sa_token(api, release, "schedhook"), tmp_path / "kubeconfig")
    port = free_port()
    proc = start_schedhook(config, port, tmp_path / "schedhook.log", chart_pki, release)
    try:
        probe = ssl.create_default_context(cafile=str(chart_pki.ca))
        name = service_name(release)

        async def listening() -> bool:
            return (await call(port, "/healthz", None, probe, server_hostname=name))[0] == 200

        await wait_for(listening, within=30, what="schedhook listening")
        context = ssl.create_default_context(cafile=str(chart_pki.ca))
        if caller is not None:
            pair = getattr(chart_pki, caller)
            context.load_cert_chain(pair.cert, pair.key)
        args = {"Pod": {"metadata": {"uid": "u"}, "spec": {"containers": []}}, "NodeNames": []}
        status, text = await call(port, "/filter", args, context, server_hostname=name)
        print(f"{caller}: {status} {text}")
        assert status == expected
    finally:
        stop(proc, tmp_path / "schedhook.log")
