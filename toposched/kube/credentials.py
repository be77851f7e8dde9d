"""Where a process finds the apiserver and how it proves who it is: the pod's service account,
else the current context of $KUBECONFIG (or ~/.kube/config).

Shared by both API clients (``rest`` for the operators and schedhook, ``nodeclient`` for the
node daemons) and handed to Kopf for its own watches, so every connection of a process uses the
same identity. Kubeconfig users may hold client certificates, a bearer token (inline or in a
file) or an exec plugin (``client.authentication.k8s.io``), as kubectl's do.
"""

import base64
import json
import os
import ssl
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD = timedelta(minutes=1)
"""A service account token file is read again this often (the kubelet rotates it)."""
EXEC_TIMEOUT = 60.0


class CredentialsError(RuntimeError):
    """No usable configuration: no service account, and no kubeconfig that can be read."""


@dataclass(frozen=True)
class ExecPlugin:
    """A kubeconfig user's ``exec`` entry: a command that prints an ExecCredential."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = "client.authentication.k8s.io/v1"
    base: Path = Path(".")

    def run(self) -> "Issued":
        """Run the plugin (non-interactively) and read the credential it prints."""
        env = dict(os.environ, **dict(self.env))
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
        env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
        command = self.command if os.sep not in self.command else str(self.base / self.command)
        try:
            done = subprocess.run(
                [command, *self.args],
                env=env,
                capture_output=True,
                stdin=subprocess.DEVNULL,
                timeout=EXEC_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CredentialsError(f"exec plugin {self.command}: {exc}") from None
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip()[-300:]
            raise CredentialsError(f"exec plugin {self.command} exited with {done.returncode}: {tail}")
        try:
            status = json.loads(done.stdout).get("status") or {}
        except (ValueError, AttributeError):
            raise CredentialsError(f"exec plugin {self.command} did not print an ExecCredential") from None
        expires = status.get("expirationTimestamp")
        return Issued(
            token=status.get("token"),
            cert=_pem(status.get("clientCertificateData")),
            key=_pem(status.get("clientKeyData")),
            expires=datetime.fromisoformat(expires.replace("Z", "+00:00")) if isinstance(expires, str) else None,
        )


@dataclass(frozen=True)
class Issued:
    """What an exec plugin or a token file gave, and until when it holds."""

    token: str | None = None
    cert: bytes | None = None
    key: bytes | None = None
    expires: datetime | None = None

    def fresh(self, now: datetime) -> bool:
        return self.expires is None or now < self.expires - timedelta(seconds=10)


@dataclass(frozen=True)
class Credentials:
    server: str
    ca: bytes | None = None
    """PEM of the CAs that sign the apiserver's certificate (None: the system's)."""
    cert: bytes | None = None
    key: bytes | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    token: str | None = None
    token_file: Path | None = None
    exec_plugin: ExecPlugin | None = None
    namespace: str | None = None
    proxy: str | None = None
    issued: Issued | None = field(default=None, compare=False)
    """The last token or certificate from ``token_file`` or ``exec_plugin`` (see ``refreshed``)."""

    def refreshed(self, now: datetime | None = None, force: bool = False) -> "Credentials":
        """These credentials with a current token or certificate from the file or the plugin
        (the same object when nothing needs reading). Blocking: run it in a thread."""
        now = now or datetime.now(UTC)
        if self.issued is not None and self.issued.fresh(now) and not force:
            return self
        if self.exec_plugin is not None:
            return replace(self, issued=self.exec_plugin.run())
        if self.token_file is not None:
            try:
                token = self.token_file.read_text().strip()
            except OSError as exc:
                raise CredentialsError(f"cannot read the token file {self.token_file}: {exc}") from None
            return replace(self, issued=Issued(token=token, expires=now + TOKEN_REREAD))
        return self

    @property
    def bearer(self) -> str | None:
        issued = self.issued.token if self.issued else None
        return issued or self.token

    @property
    def client_pair(self) -> tuple[bytes, bytes] | None:
        if self.issued is not None and self.issued.cert and self.issued.key:
            return self.issued.cert, self.issued.key
        return (self.cert, self.key) if self.cert and self.key else None

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        try:
            if self.ca is not None:
                context.load_verify_locations(cadata=self.ca.decode())
        except (ssl.SSLError, ValueError) as exc:
            raise CredentialsError(f"the certificate authority of {self.server} cannot be loaded: {exc}") from None
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        pair = self.client_pair
        if pair is not None:
            # ssl loads a key pair only from files: keep them as long as that takes, private.
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
                cert.write_bytes(pair[0])
                key.touch(mode=0o600)
                key.write_bytes(pair[1])
                try:
                    context.load_cert_chain(cert, key)
                except ssl.SSLError as exc:
                    raise CredentialsError(f"the client certificate and key cannot be loaded: {exc}") from None
        return context


def _pem(value: object) -> bytes | None:
    return value.encode() if isinstance(value, str) and value else None


def _data_or_file(entry: dict[str, Any], key: str, base: Path) -> bytes | None:
    if entry.get(f"{key}-data"):
        return base64.b64decode(entry[f"{key}-data"])
    if entry.get(key):
        return (base / str(entry[key])).expanduser().read_bytes()
    return None


def in_cluster(root: Path = SERVICE_ACCOUNT) -> Credentials | None:
    """The pod's service account, when this runs in a pod that has one."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not (host and port and (root / "token").exists()):
        return None
    host = f"[{host}]" if ":" in host else host  # an IPv6 service address
    namespace = root / "namespace"
    return Credentials(
        server=f"https://{host}:{port}",
        ca=(root / "ca.crt").read_bytes() if (root / "ca.crt").exists() else None,
        token_file=root / "token",
        namespace=namespace.read_text().strip() if namespace.exists() else None,
    )


def from_kubeconfig(path: Path, context_name: str | None = None) -> Credentials:
    """The credentials of a kubeconfig's current (or named) context."""
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise CredentialsError(f"cannot read the kubeconfig {path}: {exc}") from None
    base = path.parent
    name = context_name or config.get("current-context")
    try:
        contexts = {c["name"]: c.get("context") or {} for c in config.get("contexts") or []}
        if not name or name not in contexts:
            raise CredentialsError(f"{path}: no context {name!r}")
        context = contexts[name]
        clusters = {c["name"]: c.get("cluster") or {} for c in config.get("clusters") or []}
        users = {u["name"]: u.get("user") or {} for u in config.get("users") or []}
        cluster = clusters[context["cluster"]]
        user: dict[str, Any] = users.get(context.get("user"), {})
        plugin = user.get("exec")
        return Credentials(
            server=str(cluster["server"]),
            ca=_data_or_file(cluster, "certificate-authority", base),
            cert=_data_or_file(user, "client-certificate", base),
            key=_data_or_file(user, "client-key", base),
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
            tls_server_name=cluster.get("tls-server-name"),
            token=user.get("token"),
            token_file=(base / user["tokenFile"]).expanduser() if user.get("tokenFile") else None,
            exec_plugin=ExecPlugin(
                command=str(plugin["command"]),
                args=tuple(str(a) for a in plugin.get("args") or []),
                env=tuple((str(e["name"]), str(e["value"])) for e in plugin.get("env") or []),
                api_version=str(plugin.get("apiVersion") or ExecPlugin.api_version),
                base=base,
            )
            if isinstance(plugin, dict)
            else None,
            namespace=context.get("namespace"),
            proxy=cluster.get("proxy-url"),
        )
    except KeyError as exc:
        raise CredentialsError(f"{path}: context {name!r}: no {exc}") from None
    except (TypeError, ValueError, OSError) as exc:
        raise CredentialsError(f"{path}: context {name!r}: {exc}") from None


def load() -> Credentials:
    """The service account inside a pod, else the first file of $KUBECONFIG (or ~/.kube/config)."""
    found = in_cluster()
    if found is not None:
        return found
    first = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return from_kubeconfig(Path(first) if first else Path.home() / ".kube" / "config")
