"""The chart installed for real on the local cluster's real kubelet nodes, as the README says:
hack/install-chart-local.sh imports the images `make images` built into the nodes and runs
`helm upgrade --install` of charts/toposched with hack/chart-local-cluster.yaml, in a namespace of
the release's own. Every component then runs as containers on those nodes."""

import asyncio
import contextlib
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from testkit.cluster import skip_or_fail, wait_for
from testkit.paths import REPO
from testkit.realnode import RealNode, Topology, add_node, leftovers, remove_node
from toposched import __version__

COMPONENT = "app.kubernetes.io/component"


def versions() -> dict[str, str]:
    pairs = (line.split("=", 1) for line in (REPO / "hack" / "versions.env").read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs if not k.lstrip().startswith("#")}


def image_archives() -> list[Path]:
    """The archives of `make images` (.images/ or $IMAGES_DIR), or skip (fail under CI)."""
    out = Path(os.environ.get("IMAGES_DIR") or REPO / ".images")
    kubernetes = versions()["KUBERNETES_VERSION"]
    wanted = [
        out / f"toposched-operator-{__version__}.tar",
        out / f"toposched-exporter-{__version__}.tar",
        out / f"toposched-kube-scheduler-{kubernetes}.tar",
    ]
    missing = [p.name for p in wanted if not p.is_file()]
    if missing:
        skip_or_fail(f"the chart on real nodes needs the images ({', '.join(missing)}): run `make images` as root")
    return wanted


def tool(name: str) -> str:
    bin_dir = subprocess.run(
        [str(REPO / "hack" / "build-binaries.sh"), "--print"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return os.path.join(bin_dir, name)


def run(*args: str, kubeconfig: Path) -> str:
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "KUBECONFIG": str(kubeconfig)})
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done.stdout


class Release:
    def __init__(self, kubeconfig: Path, nodes: list[RealNode]) -> None:
        self.kubeconfig, self.nodes = kubeconfig, nodes
        self.name, self.namespace = "toposched", f"toposched-system-{uuid.uuid4().hex[:6]}"

    def install(self, *helm_args: str) -> str:
        """As the README says: hack/install-chart-local.sh (images into the real nodes, then
        helm upgrade --install with hack/chart-local-cluster.yaml)."""
        script = str(REPO / "hack" / "install-chart-local.sh")
        return run(script, "-n", self.namespace, self.name, "--", *helm_args, kubeconfig=self.kubeconfig)

    def helm(self, verb: str, *more: str) -> str:
        return run(tool("helm"), verb, self.name, "-n", self.namespace, *more, kubeconfig=self.kubeconfig)

    def clean_up(self) -> None:
        """Uninstall (if the test did not get that far) and delete the release's namespace."""
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        uninstall = [tool("helm"), "uninstall", self.name, "-n", self.namespace, "--wait", "--timeout", "60s"]
        subprocess.run(uninstall, env=env, capture_output=True)
        delete = [tool("kubectl"), "delete", "namespace", self.namespace, "--wait=false", "--ignore-not-found"]
        subprocess.run(delete, env=env, capture_output=True)

    def debug(self, *namespaces: str) -> str:
        """What to look at when something fails: the pods and events of the release (and of
        ``namespaces``), its nodes' kubelet logs and its containers' logs."""
        out = ""
        for namespace in (self.namespace, *namespaces):
            out += run(tool("kubectl"), "get", "pods,events", "-n", namespace, "-o", "wide",
                       kubeconfig=self.kubeconfig)  # fmt: skip
        for node in self.nodes:
            out += f"\n--- {node.name} kubelet ---\n{node.log_tail('kubelet', 25)}"
            for log in sorted(node.layout.pod_logs.glob(f"{self.namespace}_*/*/*.log")):
                out += f"\n--- {log.parent.parent.name}/{log.parent.name} ---\n" + log.read_text()[-1500:]
        return out

    async def pods_ready(self, api: client.ApiClient, components: list[str], within: float) -> list[Any]:
        """Wait until the release's pods are those of ``components`` (one entry per pod), every
        one Ready; return them."""
        core = client.CoreV1Api(api)

        async def ready() -> list[Any] | None:
            pods = (await core.list_namespaced_pod(self.namespace)).items
            complete = sorted(p.metadata.labels.get(COMPONENT) for p in pods) == sorted(components)
            return pods if complete and all(is_ready(p) for p in pods) else None

        return await wait_for(ready, within=within, what=f"the release's pods Ready: {', '.join(sorted(components))}")


def is_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


@contextlib.asynccontextmanager
async def on_new_nodes(kubeconfig: Path, names: list[str], topology: Topology) -> AsyncIterator[Release]:
    """A release (not installed yet) on new real nodes ``names``, added side by side; afterwards it
    is cleaned up and the nodes removed (powered off or not), leaving nothing behind."""
    image_archives()
    nodes = list(await asyncio.gather(*(asyncio.to_thread(add_node, name, topology) for name in names)))
    release = Release(kubeconfig, nodes)
    try:
        yield release
    finally:
        await asyncio.to_thread(release.clean_up)
        for node in nodes:
            await asyncio.to_thread(remove_node, node.name)
            assert leftovers(node.name) == []
