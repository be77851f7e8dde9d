"""The extender's hand-assembled answers decode to what a plain encoding gives."""

import orjson
import pytest

from schedhook.server import _priorities


@pytest.mark.parametrize(
    ("names", "scores"),
    [
        pytest.param([], [], id="no-candidates"),
        pytest.param(["n1"], [100], id="one"),
        pytest.param(["a", "b.example", "c-3"], [0, 55, 99], id="several"),
        pytest.param(['odd","name', "n2"], [10, 20], id="name-holding-the-separator"),
        pytest.param(['q"uote', "é"], [30, 40], id="escaped-characters"),
    ],
)
def test_priorities_decode_to_host_and_extender_score(names: list[str], scores: list[int]) -> None:
    expected = [{"Host": n, "Score": s * 10 // 100} for n, s in zip(names, scores, strict=True)]
    assert orjson.loads(_priorities(names, scores)) == expected
