"""The status that reports an object whose spec cannot be read."""

from datetime import UTC, datetime
from typing import Any

import pytest

from toposched.operators.conditions import invalid_status

NOW = datetime(2024, 5, 1, tzinfo=UTC)
ORDERED = {
    "type": "Ready",
    "status": "True",
    "reason": "OrderComputed",
    "message": "3 workloads ordered",
    "lastTransitionTime": "2024-04-01T00:00:00Z",
}


@pytest.mark.parametrize(
    ("status", "kept"),
    [
        ({}, []),
        ({"conditions": [ORDERED, {"type": "Degraded", "status": "False"}]}, ["Degraded"]),
        ({"conditions": [{"type": 5}, "garbage", ORDERED]}, []),
        ({"conditions": "garbage"}, []),
        ("garbage", []),
    ],
    ids=["no-status", "other-conditions-kept", "garbled-conditions-dropped", "conditions-a-string", "status-a-string"],
)
def test_invalid_status(status: object, kept: list[str]) -> None:
    body: dict[str, Any] = {"metadata": {"generation": 4}, "status": status}
    patch = invalid_status(body, "invalid spec: spec.x: bad", NOW)
    assert patch is not None
    assert patch["observedGeneration"] == 4
    ready = next(c for c in patch["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "InvalidSpec", "invalid spec: spec.x: bad")
    assert [c["type"] for c in patch["conditions"] if c["type"] != "Ready"] == kept
    body["status"] = patch
    assert invalid_status(body, "invalid spec: spec.x: bad", NOW) is None  # said once
    assert invalid_status(body, "invalid spec: spec.y: bad", NOW) is not None
