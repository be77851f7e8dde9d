"""A node's NRT freshness as make run prints it: when written, and what its pods fingerprint covers."""

from typing import Any

from testkit.builders import nrt_body, pod_body
from testkit.freshness import freshness
from toposched.apis.constants import NRT_ATTR_PODS_FINGERPRINT, NRT_ATTR_PODS_FINGERPRINT_METHOD
from toposched.apis.fingerprint import METHOD_EXCLUSIVE, fingerprint


def bound(name: str, node: str, cpu: int | str = 2) -> dict[str, Any]:
    pod = pod_body(name, namespace="ns", cpu=cpu, memory="1Gi", node_name=node)
    # as the apiserver stores it: the limits copied to the requests
    container = pod["spec"]["containers"][0]
    container["resources"]["requests"] = dict(container["resources"]["limits"])
    pod["status"] = {"phase": "Running"}
    return pod


def nrt(pods: list[str]) -> dict[str, Any]:
    attributes = {
        NRT_ATTR_PODS_FINGERPRINT: fingerprint(("ns", p) for p in pods),
        NRT_ATTR_PODS_FINGERPRINT_METHOD: METHOD_EXCLUSIVE,
    }
    body = nrt_body("n1", [{"cpu": 8, "memory": "8Gi"}] * 2, attributes=attributes)
    body["metadata"]["managedFields"] = [{"manager": "exporter", "time": "2026-11-25T21:00:00Z"}]
    return body


NOW = 1795640410.0  # 2026-11-25T21:00:10Z


def test_current_behind_missing_and_unknown() -> None:
    pods = [bound("a", "n1"), bound("b", "n1"), bound("elsewhere", "n2"), bound("shared", "n1", cpu="500m")]
    current = freshness("n1", nrt(["a", "b"]), pods, NOW)
    assert current.current()
    assert current.line() == "n1: NRT written 10 s ago, its fingerprint accounts for all 2 pod(s) bound there"
    behind = freshness("n1", nrt(["a"]), pods, NOW)
    assert not behind.current()
    assert behind.line() == "n1: NRT written 10 s ago, its fingerprint leaves out 1 of 2 pod(s) bound there"
    assert freshness("n1", None, pods, NOW).line() == "n1: no NRT"
    bare = nrt(["a", "b"])
    bare["attributes"] = []
    assert freshness("n1", bare, pods, NOW).line() == "n1: NRT written 10 s ago, without a pods fingerprint"
