import json

from testkit.paths import UPSTREAM_FIXTURES
from toposched.apis.fingerprint import fingerprint


def test_upstream_test_vector() -> None:
    pods = json.loads((UPSTREAM_FIXTURES / "podfingerprint-pods.json").read_text())
    assert len(pods) == 259
    assert fingerprint((p["namespace"], p["name"]) for p in pods) == "pfp0v001e477a4e3b2fc0ec6"


def test_order_does_not_matter_and_empty_is_defined() -> None:
    pods = [("a", "x"), ("b", "y"), ("a", "z")]
    assert fingerprint(pods) == fingerprint(reversed(pods))
    assert fingerprint([]).startswith("pfp0v001")
    assert fingerprint([("ns", "p")]) != fingerprint([("ns", "q")])
