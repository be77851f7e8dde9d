"""The ``toposched.io/pod-cpus`` NRT attribute, written and read back."""

import pytest

from toposched.apis.podcpus import format_pod_cpus, parse_pod_cpus


def test_written_sorted_and_read_back() -> None:
    pods = {("ns", "b"): {1: 1, 0: 2}, ("a", "z"): {1: 4}, ("ns", "none"): {}}
    text = format_pod_cpus(pods)
    assert text == "a/z=1:4;ns/b=0:2,1:1"
    assert parse_pod_cpus(text) == {("a", "z"): {1: 4}, ("ns", "b"): {0: 2, 1: 1}}
    assert parse_pod_cpus("") == {}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("ns/a", id="no-zones"),
        pytest.param("a=0:1", id="no-namespace"),
        pytest.param("ns/a=0", id="no-count"),
        pytest.param("ns/a=x:1", id="zone-not-a-number"),
        pytest.param("ns/a=0:0", id="zero-cpus"),
        pytest.param("ns/a=-1:2", id="negative-zone"),
    ],
)
def test_garbage_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="pod-cpus: not"):
        parse_pod_cpus(text)
