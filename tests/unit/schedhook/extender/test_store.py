"""The store's keys: ``namespace/name``, ``/name`` for a cluster-scoped object, and the name read back."""

import time
from typing import Any

import pytest

from testkit.builders import node_body, pod_body
from toposched.schedhook.extender.store import GONE_SECONDS, BoundPods, key_name, object_key, store_key


@pytest.mark.parametrize(
    ("body", "namespace", "name", "key"),
    [
        pytest.param(node_body("n1"), "", "n1", "/n1", id="cluster-scoped"),
        pytest.param(pod_body("p", namespace="ns"), "ns", "p", "ns/p", id="namespaced"),
    ],
)
def test_a_key_is_built_and_read_back(body: dict[str, Any], namespace: str, name: str, key: str) -> None:
    assert object_key(body) == store_key(namespace, name) == key
    assert key_name(key) == name


def test_the_pods_a_nodes_nrt_may_count_are_those_bound_and_the_few_gone_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """An NRT may still count the pods gone from its node in the last seconds; older ones are taken
    as let go (forced into every set tried, they would make none match)."""
    pods = BoundPods()
    for name in "abcdef":
        pods.apply(store_key("ns", name), pod_body(name, namespace="ns", node_name="n1", cpu=1, memory="1Gi"))
    deleting = pod_body("f", namespace="ns", node_name="n1", cpu=1, memory="1Gi")
    deleting["metadata"]["deletionTimestamp"] = "2026-11-28T09:00:00Z"
    pods.apply(store_key("ns", "f"), deleting)
    now = time.monotonic()
    for name in "abcd":  # gone in that order
        pods.apply(store_key("ns", name), None)
    listed, leaving = pods.leaving_on("n1")
    assert [name for _, name, _ in listed] == ["b", "c", "d", "e", "f"]
    assert leaving == {("ns", "b"), ("ns", "c"), ("ns", "d"), ("ns", "f")}
    monkeypatch.setattr(time, "monotonic", lambda: now + GONE_SECONDS + 1)
    listed, leaving = pods.leaving_on("n1")
    assert [name for _, name, _ in listed] == ["e", "f"]
    assert leaving == {("ns", "f")}
