"""Where things listen: the local control plane on loopback only, toposched's processes on loopback
unless told otherwise (each port has an address flag), never on every interface by accident."""

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from testkit.certs import ExtenderPKI
from testkit.cluster import free_port
from testkit.extender import schedhook_tls_args
from testkit.listeners import listeners, loopback
from testkit.paths import REPO

pytestmark = pytest.mark.cluster

PIDS = REPO / ".cluster" / "kwok" / "clusters" / "toposched" / "pids"


def test_control_plane_listens_on_loopback_only(kubeconfig: Path) -> None:
    found = {pid.stem: listeners(int(pid.read_text())) for pid in sorted(PIDS.glob("*.pid"))}
    assert {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"} <= set(found)
    for component, sockets in found.items():
        assert sockets, f"{component} listens nowhere"
        assert all(loopback(address) for address, _ in sockets), f"{component}: {sorted(sockets)}"


Command = tuple[list[str], dict[str, str], set[tuple[str, int]]]
"""Arguments after ``toposched``, extra environment, and the (address, port)s expected."""


def schedhook(pki: ExtenderPKI, *address: str) -> Command:
    """The issue's case: the metrics port bound every interface even with --address 127.0.0.1."""
    port, webhook, metrics = free_port(), free_port(), free_port()
    args = ["schedhook", *address, "--port", str(port), "--webhook-port", str(webhook)]
    args += ["--metrics-port", str(metrics), *schedhook_tls_args(pki), "--no-remediation"]
    args += ["--tls-cert", str(pki.serving.cert), "--tls-key", str(pki.serving.key)]
    return args, {}, {("127.0.0.1", port), ("127.0.0.1", webhook), ("127.0.0.1", metrics)}


def schedhook_loopback(pki: ExtenderPKI) -> Command:
    """The sidecar's plain listener is on loopback only, even with the extender on every interface."""
    port, loopback, metrics = free_port(), free_port(), free_port()
    args = ["schedhook", "--address", "0.0.0.0", "--port", str(port), "--loopback-port", str(loopback)]
    args += ["--metrics-port", str(metrics), "--metrics-address", "127.0.0.1", *schedhook_tls_args(pki)]
    return args, {}, {("0.0.0.0", port), ("127.0.0.1", loopback), ("127.0.0.1", metrics)}


def schedhook_metrics_told(pki: ExtenderPKI) -> Command:
    port, metrics = free_port(), free_port()
    args = ["schedhook", "--port", str(port), "--metrics-port", str(metrics), "--metrics-address", "127.0.0.2"]
    return [*args, *schedhook_tls_args(pki)], {}, {("127.0.0.1", port), ("127.0.0.2", metrics)}


def schedhook_webhooks_told(pki: ExtenderPKI) -> Command:
    """The chart's host-network mode: the extender on loopback, the webhooks at the node's address."""
    port, webhook, metrics = free_port(), free_port(), free_port()
    args = ["schedhook", "--address", "127.0.0.1", "--port", str(port), "--webhook-port", str(webhook)]
    args += ["--webhook-address", "127.0.0.2", "--metrics-port", str(metrics), "--metrics-address", "127.0.0.2"]
    args += [*schedhook_tls_args(pki), "--no-remediation"]
    args += ["--tls-cert", str(pki.serving.cert), "--tls-key", str(pki.serving.key)]
    return args, {}, {("127.0.0.1", port), ("127.0.0.2", webhook), ("127.0.0.2", metrics)}


def operator(pki: ExtenderPKI) -> Command:
    metrics, health = free_port(), free_port()
    args = ["operator", "--namespace", "toposched-listeners", "--liveness", f"http://127.0.0.1:{health}/healthz"]
    environment = {"TOPOSCHED_METRICS_PORT": str(metrics), "TOPOSCHED_LEADER_ELECTION": "false"}
    return args, environment, {("127.0.0.1", metrics), ("127.0.0.1", health)}


def exporter(pki: ExtenderPKI, *address: str) -> Command:
    metrics, health = free_port(), free_port()
    args = ["exporter", "--node", "nowhere", "--metrics-port", str(metrics), "--health-port", str(health), *address]
    told = "127.0.0.2" if address else "127.0.0.1"
    return args, {}, {(told, metrics), (told, health)}


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(lambda pki: schedhook(pki, "--address", "127.0.0.1"), id="schedhook-address-covers-metrics"),
        pytest.param(schedhook, id="schedhook-default-outside-a-pod"),
        pytest.param(schedhook_metrics_told, id="schedhook-metrics-address"),
        pytest.param(schedhook_loopback, id="schedhook-loopback-port-on-loopback-only"),
        pytest.param(schedhook_webhooks_told, id="schedhook-webhook-address"),
        pytest.param(operator, id="operator-default-outside-a-pod"),
        pytest.param(exporter, id="exporter-default"),
        pytest.param(
            lambda pki: exporter(pki, "--metrics-address", "127.0.0.2", "--health-address", "127.0.0.2"),
            id="exporter-told",
        ),
    ],
)
def test_toposched_listens_where_told(
    kubeconfig: Path, pki: ExtenderPKI, tmp_path: Path, command: Callable[[ExtenderPKI], Command]
) -> None:
    args, environment, expected = command(pki)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), **environment}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    log = tmp_path / "process.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "toposched", *args], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline, found = time.monotonic() + 30, set()
        while time.monotonic() < deadline and proc.poll() is None:
            found = listeners(proc.pid)
            if len(found) >= len(expected):
                break
            time.sleep(0.2)
        assert found == expected, log.read_text()[-2000:]
    finally:
        proc.terminate()
        proc.wait(15)
