"""Faults around real nodes and their exporters: a kubelet that dies, a node removed while its
exporter runs, a container runtime that is not installed. Each gives a clear error within a
bounded time, and nothing is left running."""

import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.realnode import (
    KubeletDiedError,
    MissingToolError,
    RealNode,
    RealNodeError,
    add_node,
    leftovers,
    list_nodes,
    remove_node,
)
from testkit.realnode import host as realnode_host
from testkit.realnode.exporter import start_exporter, wait_agreement

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds", "real_nodes")]


@pytest.fixture
def real_node(kubeconfig: Path) -> Iterator[RealNode]:
    name = f"rf-{uuid.uuid4().hex[:6]}"
    node = add_node(name)
    yield node
    if any(n.name == name for n in list_nodes()):
        remove_node(name)
    assert leftovers(name) == []


def test_a_dead_kubelet_ends_the_wait_with_its_log(real_node: RealNode) -> None:
    exporter = start_exporter(real_node)
    try:
        wait_agreement(exporter, 15)
        kubelet = next(pid for pid in real_node.pids() if realnode_host.comm(pid) == "kubelet")
        os.kill(kubelet, signal.SIGKILL)
        started = time.monotonic()
        # SIGKILL is delivered asynchronously: on a busy machine the kubelet can still look alive
        # for a moment, and a wait started then would rightly find the NRT in agreement.
        while real_node.kubelet_running() and time.monotonic() - started < 5:
            time.sleep(0.05)
        with pytest.raises(KubeletDiedError, match="the kubelet is not running") as info:
            wait_agreement(exporter, 60)
        assert time.monotonic() - started < 5
        assert "kubelet.log" in str(info.value)
        # The exporter keeps the last NRT and says it is not ready (PodResources is gone).
        deadline = time.monotonic() + 20
        while exporter.ready() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert exporter.running()
        assert not exporter.ready()
    finally:
        exporter.stop()


def test_removing_a_node_stops_its_exporter(real_node: RealNode) -> None:
    exporter = start_exporter(real_node)
    wait_agreement(exporter, 15)
    remove_node(real_node.name)  # mid-test, without stopping the exporter first
    assert exporter.proc.wait(10) is not None  # killed with the node's cgroups
    assert leftovers(real_node.name) == []
    with pytest.raises(RealNodeError):
        wait_agreement(exporter, 60)


def test_a_missing_container_runtime_is_named_with_how_to_install_it(
    kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """containerd (and the other tools found on PATH) missing: the error names each with its
    Debian package and the command that installs them, before anything is created."""
    monkeypatch.setenv("PATH", str(tmp_path))
    name = f"rf-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    with pytest.raises(MissingToolError) as info:
        add_node(name)
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert "containerd (containerd)" in message
    assert "make test-tools" in message
    assert leftovers(name) == []
