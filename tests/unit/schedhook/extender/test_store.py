"""The store's keys: ``namespace/name``, ``/name`` for a cluster-scoped object, and the name read back."""

from typing import Any

import pytest

from testkit.builders import node_body, pod_body
from toposched.schedhook.extender.store import key_name, object_key, store_key


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
