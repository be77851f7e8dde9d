"""The Lease rules of leader election: when a replica may take the Lease, and what it writes."""

from typing import Any

import pytest

from toposched.operators.leader import LEASE_DURATION, Observed, claimed, may_take


def lease(holder: str | None, renew: str = "t1", duration: int = 15, **spec: Any) -> dict[str, Any]:
    body = {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": duration, **spec}
    return {"metadata": {"name": "l", "resourceVersion": "7"}, "spec": body}


@pytest.mark.parametrize(
    ("seen_before", "current", "now", "may"),
    [
        pytest.param(None, lease(None), 0.0, True, id="nobody-holds-it"),
        pytest.param(None, lease("me"), 0.0, True, id="we-hold-it-renew"),
        pytest.param(None, lease("other"), 0.0, False, id="another-holder-just-seen"),
        pytest.param((lease("other"), 0.0), lease("other"), 14.9, False, id="unchanged-for-less-than-the-duration"),
        pytest.param((lease("other"), 0.0), lease("other"), 15.0, True, id="unchanged-for-the-duration-expired"),
        pytest.param(
            (lease("other"), 0.0), lease("other", renew="t2"), 20.0, False, id="renewed-meanwhile-clock-restarts"
        ),
        pytest.param(
            (lease("other", duration=60), 0.0), lease("other", duration=60), 30.0, False, id="its-own-duration"
        ),
    ],
)
def test_when_a_replica_may_take_the_lease(
    seen_before: tuple[dict[str, Any], float] | None, current: dict[str, Any], now: float, may: bool
) -> None:
    observed = Observed()
    if seen_before is not None:
        may_take(seen_before[0], "me", observed, seen_before[1])
    assert may_take(current, "me", observed, now) is may


def test_the_expiry_is_measured_on_our_clock_from_when_we_saw_the_record_change() -> None:
    observed = Observed()
    # The holder's renewTime may be hours off our clock: only changes of the record count.
    assert not may_take(lease("other", renew="1999-01-01T00:00:00Z"), "me", observed, 100.0)
    assert not may_take(lease("other", renew="1999-01-01T00:00:00Z"), "me", observed, 110.0)
    assert may_take(lease("other", renew="1999-01-01T00:00:00Z"), "me", observed, 115.0)


@pytest.mark.parametrize(
    ("before", "transitions", "acquired"),
    [
        pytest.param(None, 0, "now", id="created"),
        pytest.param(lease("me", acquireTime="then", leaseTransitions=3), 3, "then", id="renewed-keeps-acquire-time"),
        pytest.param(
            lease("other", acquireTime="then", leaseTransitions=3), 4, "now", id="taken-over-counts-a-transition"
        ),
    ],
)
def test_what_a_claim_writes(before: dict[str, Any] | None, transitions: int, acquired: str) -> None:
    after = claimed(before, "me", "now")
    spec = after["spec"]
    assert (spec["holderIdentity"], spec["renewTime"], spec["leaseDurationSeconds"]) == ("me", "now", LEASE_DURATION)
    assert (spec["leaseTransitions"], spec["acquireTime"]) == (transitions, acquired)
    if before is not None:
        assert after["metadata"] == before["metadata"], (
            "the resourceVersion read goes back: a concurrent write conflicts"
        )
