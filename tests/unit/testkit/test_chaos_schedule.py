"""The fault run's schedule: every kind once before any twice, the same from the same seed."""

import pytest

from testkit.chaos.schedule import KINDS, KUBELET_RESTART, ON_ANY_NODE, ON_REAL_NODE, fault_count, schedule

REAL, KWOK = ["r0", "r1"], ["k0", "k1", "k2"]


def test_every_kind_comes_once_first_and_a_seed_gives_one_schedule() -> None:
    faults = schedule(7, 30, REAL, KWOK, gap=(2.0, 4.0))
    assert len(faults) == 30
    assert sorted(f.kind for f in faults[: len(KINDS)]) == sorted(KINDS)
    assert faults == schedule(7, 30, REAL, KWOK, gap=(2.0, 4.0))
    assert faults != schedule(8, 30, REAL, KWOK, gap=(2.0, 4.0))
    for fault in faults:
        assert 2.0 <= fault.gap <= 4.0
        if fault.kind in ON_REAL_NODE:
            assert fault.target in REAL
        elif fault.kind in ON_ANY_NODE:
            assert fault.target in REAL + KWOK
        else:
            assert fault.target == ""


def test_fewer_faults_than_kinds() -> None:
    faults = schedule(1, 3, REAL, KWOK)
    assert len(faults) == 3
    assert len({f.kind for f in faults}) == 3


def test_the_short_run_of_seed_11_has_the_faults_of_the_long_one() -> None:
    """tests/integration/test_chaos.py (2 minutes, gaps of 2-4 s) hits what `hack/chaos.sh --minutes 20
    --seed 11` hit, in the same order, each gap a tenth: the kubelet restart on chaos-r0 that once
    cost a pod (a TopologyAffinityError a second after it) comes fourth."""
    real, kwok = [f"chaos-r{i}" for i in range(3)], [f"chaos-k{i}" for i in range(4)]
    long = schedule(11, fault_count(20 * 60, (20.0, 40.0)), real, kwok, (20.0, 40.0))
    short = schedule(11, fault_count(2 * 60, (2.0, 4.0)), real, kwok, (2.0, 4.0))
    assert [(f.kind, f.target) for f in short] == [(f.kind, f.target) for f in long]
    assert [f.gap for f in short] == pytest.approx([f.gap / 10 for f in long], abs=0.06)  # both rounded
    assert (long[3].kind, long[3].target) == (KUBELET_RESTART, "chaos-r0")
