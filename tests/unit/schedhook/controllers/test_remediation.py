import pytest

from toposched.schedhook.controllers.remediation import Backoff, decide

RS = {"kind": "ReplicaSet", "name": "web-abc", "controller": True}


@pytest.mark.parametrize(
    ("phase", "reason", "owners", "expected"),
    [
        ("Failed", "TopologyAffinityError", [RS], ("delete", "ReplicaSet/web-abc")),
        (
            "Failed",
            "TopologyAffinityError",
            [{"kind": "StatefulSet", "name": "db", "controller": True}],
            ("delete", "StatefulSet/db"),
        ),
        ("Failed", "TopologyAffinityError", [], ("event", None)),
        ("Failed", "TopologyAffinityError", [{"kind": "DaemonSet", "name": "ds", "controller": True}], ("event", None)),
        ("Failed", "OutOfcpu", [RS], ("ignore", None)),
        ("Running", None, [RS], ("ignore", None)),
    ],
    ids=["replicaset", "statefulset", "standalone", "daemonset-left-alone", "other-failure", "running"],
)
def test_decide(
    phase: str, reason: str | None, owners: list[dict[str, object]], expected: tuple[str, str | None]
) -> None:
    assert decide(phase, reason, owners) == expected


def test_backoff_per_owner_doubles() -> None:
    backoff = Backoff(initial=10, maximum=40)
    assert backoff.allow("a", 0)
    assert not backoff.allow("a", 5)
    assert backoff.allow("b", 5)  # another owner is independent
    assert backoff.allow("a", 10)
    assert not backoff.allow("a", 29)  # now 20 s
    assert backoff.allow("a", 30)
    assert backoff.allow("a", 70)  # capped at 40 s
