"""The local cluster ``hack/cluster.sh`` runs, as real nodes see it: where its state, CA and
kubeconfig are, the pinned binaries, and kubectl."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.realnode.errors import MissingToolError, RealNodeError

REPO = Path(__file__).resolve().parents[2]
CLUSTER_NAME = "toposched"


@dataclass(frozen=True)
class LocalCluster:
    """Paths and access to the local cluster of a checkout (default: this one)."""

    repo: Path = REPO

    @property
    def state(self) -> Path:
        return self.repo / ".cluster"

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def kwok_dir(self) -> Path:
        return self.state / "kwok" / "clusters" / CLUSTER_NAME

    @property
    def ca_cert(self) -> Path:
        return self.kwok_dir / "pki" / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.kwok_dir / "pki" / "ca.key"

    @property
    def nodes_dir(self) -> Path:
        return self.state / "nodes"

    def bin_dir(self) -> Path:
        """The pinned binaries (``hack/build-binaries.sh --print``), kubelet included."""
        result = subprocess.run(
            [str(self.repo / "hack" / "build-binaries.sh"), "--print"], capture_output=True, text=True
        )
        path = Path(result.stdout.strip())
        if result.returncode != 0 or not (path / "kubelet").is_file():
            raise MissingToolError(
                "the pinned kubelet (and control-plane) binaries",
                "kubelet",
                "build them with `make binaries` (hack/build-binaries.sh)",
            )
        return path

    def kubelet(self) -> Path:
        return self.bin_dir() / "kubelet"

    def kubectl_path(self) -> Path:
        return self.bin_dir() / "kubectl"

    def server(self) -> str:
        """The apiserver URL from the cluster's kubeconfig."""
        import yaml  # lazily: teardown (make cluster-down) must work without PyYAML

        config = yaml.safe_load(self.kubeconfig.read_text())
        return str(config["clusters"][0]["cluster"]["server"])

    def require_up(self) -> None:
        """Fail clearly unless the cluster runs and its kwok controller leaves real nodes alone."""
        if not self.kubeconfig.is_file() or not self.ca_key.is_file():
            raise RealNodeError("the local cluster is not running: start it with `make cluster`")
        result = self.kubectl("get", "--raw", "/readyz", check=False, timeout=10)
        if result.returncode != 0 or result.stdout.strip() != "ok":
            raise RealNodeError(f"the local cluster is not ready ({result.stderr.strip()[-200:]}); run `make cluster`")
        kwok = self.kwok_dir / "kwok.yaml"
        if kwok.is_file() and "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" not in kwok.read_text():
            raise RealNodeError(
                "this cluster's kwok controller manages every node and would take over real ones; it was created "
                "before hack/kwokctl.yaml existed: recreate it (make cluster-down && make cluster)"
            )

    def grant_pod_status(self) -> None:
        """Let every node read its pods and write their status through RBAC too.

        The Node authorizer allows a kubelet only the pods its graph already links to the node;
        a pod created with ``nodeName`` reaches the kubelet's watch about as soon as that graph,
        and when the kubelet is first its status write is refused and waits for the status
        manager's 10 s resync: a rejection (TopologyAffinityError) then shows up seconds late.
        A test cluster can afford the wider grant; what the kubelet decides does not change.
        """
        result = self.kubectl("apply", "-f", "-", stdin=_POD_STATUS_RBAC, check=False)
        if result.returncode != 0 and "AlreadyExists" in result.stderr:
            # Nodes added side by side on a fresh cluster race to create it: the second apply patches.
            result = self.kubectl("apply", "-f", "-", stdin=_POD_STATUS_RBAC, check=False)
        if result.returncode != 0:
            raise RealNodeError(f"kubectl apply of the pod-status grant failed: {result.stderr.strip()[-500:]}")

    def kubectl(
        self, *args: str, check: bool = True, stdin: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.kubectl_path()), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise RealNodeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()[-500:]}")
        return result

    def get_json(self, *args: str) -> dict[str, Any] | None:
        """``kubectl get ... -o json``, or None when the object does not exist."""
        result = self.kubectl("get", *args, "-o", "json", check=False)
        if result.returncode != 0:
            if "NotFound" in result.stderr or "not found" in result.stderr:
                return None
            raise RealNodeError(f"kubectl get {' '.join(args)} failed: {result.stderr.strip()[-500:]}")
        data: dict[str, Any] = json.loads(result.stdout)
        return data

    def write_node_credentials(self, name: str, directory: Path) -> Path:
        """A key, a client certificate for ``system:node:<name>`` (group ``system:nodes``) signed by
        the cluster CA, and a kubeconfig using them; returns the kubeconfig.

        The apiserver runs the Node authorizer (``--authorization-mode=Node,RBAC``), which lets
        a node identity do everything a kubelet needs (its Node and Lease, its pods, the token and
        subject access reviews of its webhook authentication), so no RBAC binding is needed
        for what it does (``grant_pod_status`` only removes a start-up race).
        """
        openssl = shutil.which("openssl")
        if openssl is None:
            raise MissingToolError("openssl", "openssl")
        directory.mkdir(parents=True, exist_ok=True)
        key, csr, cert, ext = (directory / n for n in ("node.key", "node.csr", "node.crt", "node.ext"))
        ext.write_text("keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n")
        steps = [
            [openssl, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)],
            [openssl, "req", "-new", "-key", str(key), "-subj", f"/O=system:nodes/CN=system:node:{name}",
             "-out", str(csr)],
            [
                openssl, "x509", "-req", "-in", str(csr), "-CA", str(self.ca_cert), "-CAkey", str(self.ca_key),
                "-set_serial", "0x" + os.urandom(12).hex(), "-days", "365", "-extfile", str(ext), "-out", str(cert),
            ],
        ]  # fmt: skip
        for step in steps:
            result = subprocess.run(step, capture_output=True, text=True)
            if result.returncode != 0:
                raise RealNodeError(f"openssl failed ({' '.join(step[:2])}): {result.stderr.strip()[-300:]}")
        os.chmod(key, 0o600)
        import yaml

        kubeconfig = directory / "kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": CLUSTER_NAME, "cluster": {"server": self.server(), "certificate-authority": str(self.ca_cert)}}
            ],
            "users": [
                {"name": f"system:node:{name}", "user": {"client-certificate": str(cert), "client-key": str(key)}}
            ],
            "contexts": [{"name": "node", "context": {"cluster": CLUSTER_NAME, "user": f"system:node:{name}"}}],
            "current-context": "node",
        }
        kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        return kubeconfig


def wait(predicate: Any, within: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``predicate()`` until it returns something truthy; raise after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise RealNodeError(f"timed out after {within:.0f} s waiting for {what}")
        time.sleep(interval)


_POD_STATUS_RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: toposched-realnode-pod-status}
rules:
  - {apiGroups: [""], resources: [pods], verbs: [get]}
  - {apiGroups: [""], resources: [pods/status], verbs: [patch, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: toposched-realnode-pod-status}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: toposched-realnode-pod-status}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:nodes"}
"""
