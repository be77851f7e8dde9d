"""The CPUs of a pod ended that its NRT still counts are given back on the zones the NRT says they
were on: the kubelet gives them to the next pod at once, the NRT counts them until its exporter
writes again."""

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from testkit.builders import node_body, nrt_body, pod_body
from toposched.apis.constants import NRT_ATTR_POD_CPUS, NRT_ATTR_PODS_FINGERPRINT
from toposched.apis.fingerprint import fingerprint
from toposched.schedhook.extender.clusterview import ClusterView
from toposched.schedhook.extender.store import ObjectStore


def nrt(
    counted: list[str], zone0: int, zone1: int, pod_cpus: str | None = "ns/a=0:2", version: str = "1"
) -> dict[str, Any]:
    """Zones of 3 CPUs allocatable (``zone0`` and ``zone1`` available), of a fingerprint of ``counted``."""
    attributes = {NRT_ATTR_PODS_FINGERPRINT: fingerprint(("ns", p) for p in counted)}
    if pod_cpus is not None:
        attributes[NRT_ATTR_POD_CPUS] = pod_cpus
    zones = [{"cpu": (3, 3, zone0), "memory": "8Gi"}, {"cpu": (3, 3, zone1), "memory": "8Gi"}]
    body = nrt_body("n1", zones, attributes=attributes)
    body["metadata"]["resourceVersion"] = version
    return body


def pod(name: str, cpu: int = 2) -> dict[str, Any]:
    return pod_body(name, namespace="ns", uid=f"uid-{name}", node_name="n1", cpu=cpu, memory="1Gi")


def cluster(body: dict[str, Any]) -> ClusterView:
    store = ObjectStore()
    store.listed("nodes", [node_body("n1", allocatable={"cpu": "8", "memory": "16Gi"})])
    store.listed("nrts", [body])
    store.listed("pods", [pod("a"), pod("b", cpu=1)])
    for kind in ("appgroups", "networktopologies"):
        store.listed(kind, [])
    return ClusterView(store)


def cpus(view: ClusterView) -> list[Decimal]:
    return [z.available["cpu"] for z in view.snapshot().nrts["n1"].zones]


def _ended(view: ClusterView) -> None:
    view.store.event("pods", "DELETED", pod("a"))


def _finished(view: ClusterView) -> None:
    done = pod("a")
    done["status"] = {"phase": "Succeeded"}
    view.store.event("pods", "MODIFIED", done)


def _deleting(view: ClusterView) -> None:
    deleting = pod("a")
    deleting["metadata"]["deletionTimestamp"] = "2026-11-28T09:00:00Z"
    view.store.event("pods", "MODIFIED", deleting)


def _ended_then_written(view: ClusterView) -> None:
    _ended(view)
    cpus(view)
    view.store.event("nrts", "MODIFIED", nrt(["b"], 3, 2, pod_cpus="ns/b=1:1", version="2"))


@pytest.mark.parametrize(
    ("body", "then", "expected"),
    [
        pytest.param(nrt(["a", "b"], 1, 2), lambda v: None, [1, 2], id="running-nothing-given"),
        pytest.param(nrt(["a", "b"], 1, 2), _ended, [3, 2], id="deleted-still-counted-given-back"),
        pytest.param(nrt(["a", "b"], 1, 2), _finished, [3, 2], id="finished-still-counted-given-back"),
        pytest.param(nrt(["a", "b"], 1, 2), _deleting, [1, 2], id="being-deleted-not-given"),
        pytest.param(nrt(["a", "b"], 1, 2), _ended_then_written, [3, 2], id="nrt-caught-up-not-given-twice"),
        pytest.param(nrt(["a", "b"], 1, 2, pod_cpus=None), _ended, [1, 2], id="no-attribute-not-given"),
        pytest.param(nrt(["a", "b"], 1, 2, pod_cpus="junk"), _ended, [1, 2], id="unreadable-attribute-not-given"),
        pytest.param(nrt(["a", "x"], 1, 2), _ended, [1, 2], id="of-no-set-not-given"),
        pytest.param(nrt(["a", "b"], 2, 2), _ended, [3, 2], id="given-up-to-allocatable"),
    ],
)
def test_cpus_of_a_pod_ended_that_its_nrt_still_counts(
    body: dict[str, Any], then: Callable[[ClusterView], None], expected: list[int]
) -> None:
    view = cluster(body)
    cpus(view)
    then(view)
    assert cpus(view) == [Decimal(n) for n in expected]


def test_an_unreadable_attribute_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    view = cluster(nrt(["a", "b"], 1, 2, pod_cpus="ns/a=zero"))
    _ended(view)
    assert cpus(view) == [Decimal(1), Decimal(2)]
    view.store.event("pods", "DELETED", pod("b", cpu=1))
    cpus(view)
    said = [r.getMessage() for r in caplog.records if r.name.endswith("credits")]
    assert said == ["NRT n1: pod-cpus: not zone:count: 'zero'; the CPUs of its pods ended are not given back early"]
