"""What the operators keep of an object in their indexes, and how they recognise a status they wrote."""

from typing import Any

from toposched.operators.k8s import digest, kept_body


def test_an_index_keeps_everything_a_handler_reads_and_drops_the_bookkeeping() -> None:
    body: dict[str, Any] = {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {
            "name": "shop",
            "uid": "u1",
            "generation": 3,
            "labels": {"team": "a"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "note": "kept"},
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {"numMembers": 1},
        "status": {"topologyOrder": []},
    }
    kept = kept_body(body)
    assert kept["metadata"] == {
        "name": "shop",
        "uid": "u1",
        "generation": 3,
        "labels": {"team": "a"},
        "annotations": {"note": "kept"},
    }
    assert (kept["spec"], kept["status"]) == (body["spec"], body["status"])
    assert "managedFields" in body["metadata"], "the object itself is left as it was"


def test_a_digest_ignores_key_order_and_sees_every_value() -> None:
    assert digest({"a": 1, "b": [1, 2]}) == digest({"b": [1, 2], "a": 1})
    assert digest({"a": 1, "b": [1, 2]}) != digest({"a": 1, "b": [2, 1]})
