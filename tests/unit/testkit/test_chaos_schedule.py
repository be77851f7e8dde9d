"""The fault run's schedule: every kind once before any twice, the same from the same seed."""

from testkit.chaos.schedule import KINDS, ON_ANY_NODE, ON_REAL_NODE, schedule

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
