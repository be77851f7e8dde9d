"""How long the oracle waits for a kubelet's decision: the base up to 8 zones, more with the hint
combinations past them, never more than the cap."""

import pytest

from testkit.oracle.deadline import BASE_SECONDS, CAP_SECONDS, decision_deadline, hint_combinations


@pytest.mark.parametrize(
    ("zones", "lists", "combinations"),
    [
        (1, 2, 1),
        (2, 2, 9),
        (8, 2, 255**2),
        (12, 2, 4095**2),
        (12, 3, 4095**3),
    ],
    ids=lambda v: str(v),
)
def test_hint_combinations_are_every_mask_of_each_list(zones: int, lists: int, combinations: int) -> None:
    assert hint_combinations(zones, lists) == combinations


@pytest.mark.parametrize("zones", range(1, 9), ids=lambda z: f"{z} zones")
def test_up_to_8_zones_the_base_is_the_deadline(zones: int) -> None:
    assert BASE_SECONDS <= decision_deadline(zones) < BASE_SECONDS + 1


@pytest.mark.parametrize(
    ("zones", "at_least", "at_most"),
    [(9, 31, 32), (10, 36, 37), (11, 55, 56), (12, 130, 131)],
    ids=lambda v: str(v),
)
def test_past_8_zones_it_grows_with_the_combinations(zones: int, at_least: float, at_most: float) -> None:
    assert at_least <= decision_deadline(zones) <= at_most


@pytest.mark.parametrize("zones", [13, 16, 64, 1024], ids=lambda z: f"{z} zones")
def test_the_deadline_is_bounded(zones: int) -> None:
    assert decision_deadline(zones) == CAP_SECONDS


def test_the_deadline_never_shrinks_with_more_zones() -> None:
    deadlines = [decision_deadline(z) for z in range(1, 20)]
    assert deadlines == sorted(deadlines)
