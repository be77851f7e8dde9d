"""Where the components find the apiserver and who they are to it: kubeconfig users of each kind,
the pod's service account, exec plugins, and clear errors for configurations that cannot work."""

import base64
import json
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from toposched.kube import credentials
from toposched.kube.credentials import CredentialsError

CA = b"-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n"


def kubeconfig(tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None, **context: Any) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "work",
        "contexts": [
            {"name": "work", "context": {"cluster": "c", "user": "u", **context}},
            {"name": "other", "context": {"cluster": "c", "user": "nobody"}},
        ],
        "clusters": [{"name": "c", "cluster": cluster or {"server": "https://10.0.0.1:6443"}}],
        "users": [{"name": "u", "user": user}],
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    return path


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("user", "cluster", "expected"),
    [
        pytest.param(
            {"client-certificate-data": b64(b"CERT"), "client-key-data": b64(b"KEY")},
            {"server": "https://a:6443", "certificate-authority-data": b64(CA)},
            {"server": "https://a:6443", "ca": CA, "client_pair": (b"CERT", b"KEY"), "bearer": None},
            id="client-certificate-inline",
        ),
        pytest.param(
            {"client-certificate": "crt", "client-key": "key"},
            {"server": "https://a:6443", "certificate-authority": "ca.pem"},
            {"ca": CA, "client_pair": (b"CRT-FILE", b"KEY-FILE")},
            id="client-certificate-files-relative-to-the-kubeconfig",
        ),
        pytest.param(
            {"token": "t0k3n"},
            {"server": "https://a:6443", "insecure-skip-tls-verify": True, "tls-server-name": "api.example"},
            {"bearer": "t0k3n", "insecure": True, "tls_server_name": "api.example", "client_pair": None},
            id="bearer-token-insecure",
        ),
        pytest.param(
            {"tokenFile": "token"},
            {"server": "https://a:6443"},
            {"bearer": "from-file"},
            id="token-file",
        ),
    ],
)
def test_kubeconfig_users(
    tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any], expected: dict[str, Any]
) -> None:
    (tmp_path / "crt").write_bytes(b"CRT-FILE")
    (tmp_path / "key").write_bytes(b"KEY-FILE")
    (tmp_path / "ca.pem").write_bytes(CA)
    (tmp_path / "token").write_text("from-file\n")
    creds = credentials.from_kubeconfig(kubeconfig(tmp_path, user, cluster, namespace="team-a")).refreshed()
    assert creds.namespace == "team-a"
    for field, value in expected.items():
        assert getattr(creds, field) == value, field


def write_plugin(tmp_path: Path, status: dict[str, Any], exit_code: int = 0) -> Path:
    script = tmp_path / "plugin"
    script.write_text(
        "#!/bin/sh\n"
        'echo "$KUBERNETES_EXEC_INFO $PLUGIN_ENV" >> "$0.calls"\n'
        f"echo '{json.dumps({'kind': 'ExecCredential', 'status': status})}'\n"
        "echo 'plugin says no' >&2\n"
        f"exit {exit_code}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_an_exec_plugin_is_run_once_per_credential_and_again_when_it_expires(tmp_path: Path) -> None:
    expires = datetime(2030, 1, 1, tzinfo=UTC)
    script = write_plugin(tmp_path, {"token": "exec-token", "expirationTimestamp": "2030-01-01T00:00:00Z"})
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "./plugin",
            "args": [],
            "env": [{"name": "PLUGIN_ENV", "value": "set"}],
        }
    }
    creds = credentials.from_kubeconfig(kubeconfig(tmp_path, user))
    first = creds.refreshed(now=datetime(2029, 1, 1, tzinfo=UTC))
    assert (first.bearer, first.issued and first.issued.expires) == ("exec-token", expires)
    assert first.refreshed(now=datetime(2029, 6, 1, tzinfo=UTC)) is first, "a fresh credential is kept"
    first.refreshed(now=expires + timedelta(seconds=1))
    calls = Path(f"{script}.calls").read_text().splitlines()
    assert len(calls) == 2
    info, env = calls[0].rsplit(" ", 1)
    assert json.loads(info)["spec"] == {"interactive": False}
    assert env == "set"


def test_an_exec_plugin_may_issue_a_client_certificate(tmp_path: Path) -> None:
    write_plugin(tmp_path, {"clientCertificateData": "CERT", "clientKeyData": "KEY"})
    creds = credentials.from_kubeconfig(kubeconfig(tmp_path, {"exec": {"command": "./plugin"}})).refreshed()
    assert creds.client_pair == (b"CERT", b"KEY")
    assert creds.bearer is None


@pytest.mark.parametrize(
    ("user", "cluster", "context", "says"),
    [
        pytest.param({"exec": {"command": "./plugin"}}, None, None, "exited with 1: plugin says no", id="plugin-fails"),
        pytest.param({"exec": {"command": "./missing"}}, None, None, "exec plugin ./missing", id="plugin-missing"),
        pytest.param({}, None, "nowhere", "no context 'nowhere'", id="unknown-context"),
        pytest.param({}, {"insecure-skip-tls-verify": True}, None, "'server'", id="cluster-without-server"),
        pytest.param({"client-certificate": "absent.crt"}, None, None, "absent.crt", id="certificate-file-missing"),
    ],
)
def test_configurations_that_cannot_work_say_why(
    tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any] | None, context: str | None, says: str
) -> None:
    write_plugin(tmp_path, {}, exit_code=1)
    with pytest.raises(CredentialsError, match=says.replace("(", r"\(")):
        credentials.from_kubeconfig(kubeconfig(tmp_path, user, cluster), context).refreshed()


def test_an_unreadable_kubeconfig_says_which_file(tmp_path: Path) -> None:
    (tmp_path / "config").write_text("contexts: [unclosed")
    with pytest.raises(CredentialsError, match=r"cannot read the kubeconfig .*config"):
        credentials.from_kubeconfig(tmp_path / "config")
    with pytest.raises(CredentialsError, match="cannot read the kubeconfig"):
        credentials.from_kubeconfig(tmp_path / "absent")


def test_in_a_pod_the_service_account_wins_and_its_token_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("first")
    (tmp_path / "ca.crt").write_bytes(CA)
    (tmp_path / "namespace").write_text("toposched-system")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    creds = credentials.in_cluster(tmp_path)
    assert creds is not None
    assert (creds.server, creds.ca, creds.namespace) == ("https://[fd00::1]:443", CA, "toposched-system")
    now = datetime(2030, 1, 1, tzinfo=UTC)
    first = creds.refreshed(now)
    (tmp_path / "token").write_text("rotated")
    assert first.refreshed(now + timedelta(seconds=5)).bearer == "first", "read again after a while, not per call"
    assert first.refreshed(now + credentials.TOKEN_REREAD).bearer == "rotated"
    assert first.refreshed(now, force=True).bearer == "rotated", "a 401 reads it at once"


def test_outside_a_pod_the_first_kubeconfig_of_the_list_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    path = kubeconfig(tmp_path, {"token": "t"})
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(path), str(tmp_path / "ignored")]))
    assert credentials.load().server == "https://10.0.0.1:6443"


@pytest.mark.parametrize(
    ("user", "cluster", "says"),
    [
        pytest.param(
            {}, {"certificate-authority-data": b64(b"not a certificate")}, "certificate authority", id="bad-ca"
        ),
        pytest.param(
            {"client-certificate-data": b64(b"junk"), "client-key-data": b64(b"junk")},
            {},
            "client certificate and key cannot be loaded",
            id="bad-key-pair",
        ),
    ],
)
def test_tls_material_that_cannot_be_loaded_says_which(
    tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any], says: str
) -> None:
    creds = credentials.from_kubeconfig(kubeconfig(tmp_path, user, {"server": "https://a:6443", **cluster}))
    with pytest.raises(CredentialsError, match=says):
        creds.ssl_context()
