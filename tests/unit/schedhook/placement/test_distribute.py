"""distribute-cpus-across-numa: how many CPUs each zone gives (the kubelet's balance, by hand)."""

import pytest

from toposched.schedhook.placement.kubelet.distribute import spread

CASES = [
    # available, asked, group, machine CPUs, machine zones, expected
    pytest.param({0: 5, 2: 2}, 2, 2, 24, 3, {0: 2}, id="one-core-spill-goes-where-it-leaves-most-balance"),
    pytest.param({0: 4, 1: 4}, 4, 1, 8, 2, {0: 4}, id="one-zone-enough-lowest-wins-tie"),
    pytest.param({0: 4, 1: 4}, 6, 1, 8, 2, {0: 3, 1: 3}, id="two-zones-evenly"),
    pytest.param({0: 4, 1: 4, 2: 4}, 5, 1, 12, 3, {0: 3, 1: 2}, id="remainder-round-robin"),
    pytest.param({0: 2, 1: 6}, 6, 2, 8, 2, {0: 2, 1: 4}, id="as-many-zones-as-the-machine-average-needs"),
    pytest.param({0: 4, 1: 4}, 3, 2, 8, 2, None, id="not-whole-cores-is-packed"),
    pytest.param({0: 1}, 2, 1, 8, 2, None, id="too-few"),
    pytest.param({0: 3}, 0, 1, 8, 2, {}, id="nothing-asked"),
]


@pytest.mark.parametrize(("available", "asked", "group", "cpus", "zones", "expected"), CASES)
def test_spread(
    available: dict[int, int], asked: int, group: int, cpus: int, zones: int, expected: dict[int, int] | None
) -> None:
    assert spread(available, asked, group, cpus, zones) == expected
