"""The debug line of what the extender saw of a node when it refused or bound a pod."""

from decimal import Decimal
from typing import Any

import pytest

from toposched.schedhook.extender.refusals import held_line, nrt_cpus, refusal_line
from toposched.schedhook.extender.reservations import Reservation


def nrt(*zones: tuple[str, Any]) -> dict[str, Any]:
    resources = [{"name": "memory", "available": "1Gi"}, {"name": "cpu"}]
    return {
        "metadata": {"name": "n1", "resourceVersion": "42"},
        "zones": [
            {"name": name, "resources": [resources[0], {**resources[1], "available": cpu}]} for name, cpu in zones
        ],
    }


@pytest.mark.parametrize(
    ("body", "want"),
    [
        pytest.param(None, "no NRT", id="no-nrt"),
        pytest.param(nrt(("node-0", "3"), ("node-1", "4")), "NRT 42 cpu available node-0=3 node-1=4", id="two-zones"),
        pytest.param(nrt(("node-0", None)), "NRT 42 cpu available node-0=None", id="zone-without-cpu"),
        pytest.param({"metadata": {}, "zones": ["junk"]}, "NRT None cpu available -", id="malformed-zone-skipped"),
    ],
)
def test_nrt_cpus(body: dict[str, Any] | None, want: str) -> None:
    assert nrt_cpus(body) == want


def test_held_line_says_each_reservation_oldest_first_and_which_were_rebuilt() -> None:
    held = [
        Reservation("u1", "n1", (0,), {"cpu": Decimal(2)}, since=10.0, key="ns/a"),
        Reservation("u2", "n1", (0, 1), {"memory": Decimal(1)}, since=12.5, key="", rebuilt=True),
    ]
    assert held_line(held, now=13.0) == "held: ns/a zones 0 cpu 2 3.0s; u2 zones 0,1 cpu 0 0.5s rebuilt"
    assert held_line([], now=13.0) == "held: none"


@pytest.mark.parametrize(
    ("reason", "pods", "want"),
    [
        pytest.param(
            "best zone has 1 available",
            [],
            "n1: best zone has 1 available | no NRT, no fingerprint | held: none | pods: none",
            id="refused",
        ),
        pytest.param(
            "",
            ["ns/a gone", "ns/b deleting", "ns/c"],
            "n1 | no NRT, no fingerprint | held: none | pods: ns/a gone, ns/b deleting, ns/c",
            id="bound",
        ),
    ],
)
def test_refusal_line(reason: str, pods: list[str], want: str) -> None:
    assert refusal_line("n1", reason, None, "no fingerprint", [], pods) == want
