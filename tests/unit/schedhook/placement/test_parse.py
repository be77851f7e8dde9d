"""Pods, nodes and NRTs as placement reads them: garbage is an error naming the field, never a crash."""

import copy
import re
from decimal import Decimal
from typing import Any

import pytest
import yaml

from testkit.builders import nrt_body
from testkit.nrt import POD
from testkit.paths import EXAMPLES
from toposched.apis.constants import APPGROUP_LABEL, REGION_LABEL, WORKLOAD_LABEL, ZONE_LABEL
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.schedhook.placement.network import Location
from toposched.schedhook.placement.parse import (
    from_nrt,
    membership,
    node_allocatable,
    node_location,
    parse_pod,
    placed_pod,
    pod_from_spec,
    pod_uid,
)


def _container(**fields: object) -> dict[str, Any]:
    return {"containers": [{"name": "app", **fields}]}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (_container(resources={"limits": {"cpu": "1e999999"}}), "spec.containers[0].resources.limits.cpu: '1e999999'"),
        (_container(resources={"limits": {"cpu": "abc"}}), "limits.cpu: 'abc' is not a Kubernetes quantity"),
        (_container(resources={"limits": {"cpu": float("nan")}}), "limits.cpu: nan is not a Kubernetes quantity"),
        (_container(resources={"requests": {"cpu": "8193"}}), "requests.cpu: cpu 8193 is more than any machine has"),
        (_container(resources={"requests": {"memory": "-1Gi"}}), "requests.memory: memory -1073741824 is negative"),
        (_container(resources={"requests": ["cpu"]}), "requests: expected a map of resource names to quantities"),
        (_container(resources=5), "spec.containers[0].resources: expected an object"),
        (_container(name=5), "spec.containers[0].name: expected a string"),
        ({"containers": 5}, "spec.containers: expected a list of containers"),
        ({"initContainers": ["x"]}, "spec.initContainers[0]: expected a container (an object)"),
        ([1], "spec: expected a pod spec (an object)"),
    ],
    ids=[
        "cpu-1e999999",
        "cpu-abc",
        "cpu-nan",
        "more-cpus-than-a-machine",
        "negative-memory",
        "requests-a-list",
        "resources-a-number",
        "name-a-number",
        "containers-5",
        "init-container-a-string",
        "spec-a-list",
    ],
)
def test_a_pod_no_machine_can_run_is_an_error_naming_the_field(spec: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        pod_from_spec(spec)


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ("x", "metadata: expected an object"),
        ({"labels": ["a"]}, "metadata.labels: expected a map of strings"),
        ({"annotations": {"a": 5}}, "metadata.annotations: expected a map of strings"),
        ({"namespace": 5}, "metadata.namespace: expected a string"),
    ],
    ids=["metadata-a-string", "labels-a-list", "annotation-a-number", "namespace-a-number"],
)
def test_pod_metadata(metadata: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_pod({"metadata": metadata, "spec": POD["spec"]})


def test_a_valid_pod_parses() -> None:
    pod, meta = parse_pod(POD)
    assert pod.containers[0].request == {"cpu": 8, "memory": 16 * 2**30, "example.com/nic": 1}
    assert (meta.namespace, dict(meta.labels)) == ("default", {})


@pytest.mark.parametrize(
    ("labels", "member"),
    [
        ({}, None),
        ({APPGROUP_LABEL: "shop"}, ("shop", None)),
        ({APPGROUP_LABEL: "shop", WORKLOAD_LABEL: "web"}, ("shop", "web")),
        ({WORKLOAD_LABEL: "web"}, None),
        ({APPGROUP_LABEL: ""}, None),
        ({APPGROUP_LABEL: 5, WORKLOAD_LABEL: "web"}, None),
        ({APPGROUP_LABEL: "shop", WORKLOAD_LABEL: ["web"]}, ("shop", None)),
    ],
    ids=[
        "no-labels",
        "no-workload",
        "member",
        "workload-alone",
        "empty-appgroup",
        "appgroup-a-number",
        "workload-a-list",
    ],
)
def test_appgroup_membership_from_labels(labels: dict[str, object], member: tuple[str, str | None] | None) -> None:
    assert membership(labels) == member
    pod = {"metadata": {"labels": labels}, "spec": {"nodeName": "n"}}
    placed = placed_pod(pod)
    assert placed is not None
    assert (placed.appgroup, placed.workload) == (member or (None, None))


def test_the_parsed_metadata_says_the_membership() -> None:
    _, meta = parse_pod({"metadata": {"labels": {APPGROUP_LABEL: "shop", WORKLOAD_LABEL: "db"}}, "spec": POD["spec"]})
    assert meta.member == ("shop", "db")


@pytest.mark.parametrize(
    ("body", "uid"),
    [
        ({"metadata": {"uid": "u-1"}}, "u-1"),
        ({"metadata": {}}, ""),
        ({"metadata": {"uid": 5}}, ""),
        ({"metadata": "x"}, ""),
        ("not a pod", ""),
    ],
    ids=["uid", "none", "a-number", "metadata-a-string", "not-an-object"],
)
def test_pod_uid(body: object, uid: str) -> None:
    assert pod_uid(body) == uid


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"status": {"allocatable": {"cpu": "1e999999"}}}, "status.allocatable.cpu: '1e999999' is more than any"),
        ({"status": {"allocatable": "64"}}, "status.allocatable: expected a map"),
        ({"status": ["x"]}, "status: expected an object"),
    ],
    ids=["allocatable-1e999999", "allocatable-a-string", "status-a-list"],
)
def test_node_allocatable(node: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        node_allocatable(node)


@pytest.mark.parametrize(
    ("node", "location"),
    [
        ({"metadata": {"labels": {ZONE_LABEL: "z1", REGION_LABEL: "r1"}}}, Location("r1", "z1")),
        ({"metadata": {"labels": {ZONE_LABEL: 5, REGION_LABEL: "r1"}}}, Location("r1", None)),
        ({"metadata": {"labels": ["x"]}}, Location(None, None)),
        ({"metadata": ["x"]}, Location(None, None)),
    ],
    ids=["labelled", "zone-a-number", "labels-a-list", "metadata-a-list"],
)
def test_a_label_that_is_not_a_string_counts_as_absent(node: dict[str, Any], location: Location) -> None:
    assert node_location(node) == location


@pytest.mark.parametrize(
    "pod",
    [
        {"metadata": 5, "spec": {"nodeName": "n"}},
        {"spec": {"nodeName": ["n"]}},
        {"spec": {"nodeName": "n"}, "status": "Running"},
        {"metadata": {"labels": 5}, "spec": {"nodeName": "n"}, "status": {}},
    ],
    ids=["metadata-a-number", "node-a-list", "status-a-string", "labels-a-number"],
)
def test_a_garbled_bound_pod_is_not_counted_or_counted_plainly(pod: dict[str, Any]) -> None:
    placed = placed_pod(pod)
    assert placed is None or (placed.appgroup, placed.workload, placed.numa) == (None, None, ())


@pytest.mark.parametrize(
    "annotation",
    ['["node-99999999"]', '["node-²"]', '{"a": 1}', "[1, [2]]", "not json"],
    ids=["numa-id-beyond-linux", "superscript", "object", "nested", "not-json"],
)
def test_numa_zones_annotation_that_is_garbage_means_none(annotation: str) -> None:
    pod = {"metadata": {"annotations": {"toposched.io/numa-zones": annotation}}, "spec": {"nodeName": "n"}}
    placed = placed_pod(pod)
    assert placed is not None
    assert placed.numa == ()


def test_zones_that_are_not_numa_nodes_are_ignored() -> None:
    body = yaml.safe_load((EXAMPLES / "noderesourcetopology-worker-1.yaml").read_text())
    for name in ("node-²", "node-01", "node-99999999999999999999"):
        extra = copy.deepcopy(body["zones"][0])
        extra["name"] = name
        extra["costs"] = [{"name": "node-²", "value": 10}, {"name": name, "value": 10}]
        body["zones"].append(extra)
    node = from_nrt(NodeResourceTopology.model_validate(body))
    assert node.numa_ids == [0, 1]
    assert node.zones[0].available["cpu"] == Decimal(30)


@pytest.mark.parametrize(
    ("attributes", "policies", "message"),
    [
        ({"topologyManagerPolicy": "Single-NUMA-Node"}, [], "'Single-NUMA-Node' is no value toposched knows"),
        ({"topologyManagerScope": "node"}, [], "topologyManagerScope: 'node' is no value"),
        ({"cpuManagerPolicy": "Static"}, [], "cpuManagerPolicy: 'Static' is no value"),
        ({"memoryManagerPolicy": "static"}, [], "memoryManagerPolicy: 'static' is no value"),
        ({"topologyManagerPolicyOptions": "numa-score-weights=1"}, [], "'numa-score-weights=1' is no option"),
        (
            {"topologyManagerPolicyOptions": "prefer-closest-numa-nodes=maybe"},
            [],
            "prefer-closest-numa-nodes='maybe' is not valid",
        ),
        ({}, ["SingleNUMANodeNodeLevel"], "topologyPolicies: 'SingleNUMANodeNodeLevel' is no policy"),
    ],
    ids=["policy-spelled-otherwise", "scope", "cpu-manager", "memory-manager", "option", "option-value", "legacy"],
)
def test_a_policy_toposched_does_not_know_makes_the_nrt_unreadable(
    attributes: dict[str, str], policies: list[str], message: str
) -> None:
    """Never NUMA-free by silence: an NRT whose kubelet runs something the predictor does not
    follow is unreadable, so its node fails every pod saying why (and gets an Event)."""
    usual = {"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static"}
    body = nrt_body(
        "n", [{"cpu": 4}], policy=None, scope=None, cpu_manager=None, memory_manager=None, attributes=usual | attributes
    )
    body["topologyPolicies"] = policies
    with pytest.raises(ValueError, match=re.escape(message)):
        from_nrt(NodeResourceTopology.model_validate(body))


@pytest.mark.parametrize(
    ("policy", "sockets", "message"),
    [
        pytest.param("restricted", ["0", "1"], None, id="followed"),
        pytest.param("single-numa-node", ["0", "1"], "the kubelet refuses to start so configured", id="refused"),
        pytest.param("restricted", ["0", None], "without each zone's toposched.io/socket", id="socket-unknown"),
    ],
)
def test_align_by_socket(policy: str, sockets: list[str | None], message: str | None) -> None:
    """The CPU Manager's align-by-socket is followed with each zone's socket; beside
    single-numa-node the kubelet does not start, so the NRT is unreadable, never a fit."""
    attributes = {"topologyManagerPolicy": policy, "cpuManagerPolicyOptions": "align-by-socket=true"}
    body = nrt_body("n", [{"cpu": 4}, {"cpu": 4}], policy=None, attributes=attributes)
    for zone, socket in zip(body["zones"], sockets, strict=True):
        if socket is not None:
            zone["attributes"] = [{"name": "toposched.io/socket", "value": socket}]
    nrt = NodeResourceTopology.model_validate(body)
    if message is None:
        node = from_nrt(nrt)
        assert "align-by-socket" in node.cpu_options
        assert [z.socket for z in node.zones] == [0, 1]
    else:
        with pytest.raises(ValueError, match=re.escape(message)):
            from_nrt(nrt)


@pytest.mark.parametrize(
    ("zones", "attributes", "message"),
    [
        pytest.param(
            2,
            {"cpuManagerPolicyOptions": "full-pcpus-only=true,distribute-cpus-across-cores=true"},
            "full-pcpus-only with distribute-cpus-across-cores",
            id="options-in-conflict",
        ),
        pytest.param(
            9, {}, "9 NUMA zones under the restricted policy, more than max-allowable-numa-nodes (8)", id="nine"
        ),
        pytest.param(9, {"topologyManagerPolicyOptions": "max-allowable-numa-nodes=16"}, None, id="nine-allowed"),
        pytest.param(9, {"topologyManagerPolicy": "none"}, None, id="nine-without-a-policy"),
    ],
)
def test_a_configuration_the_kubelet_refuses_is_unreadable(
    zones: int, attributes: dict[str, str], message: str | None
) -> None:
    """A kubelet so configured does not start: its node is unknown, never a fit."""
    usual = {"topologyManagerPolicy": "restricted"}
    body = nrt_body("n", [{"cpu": 4}] * zones, policy=None, attributes={**usual, **attributes})
    body["attributes"].append({"name": "toposched.io/threads-per-core", "value": "2"})
    nrt = NodeResourceTopology.model_validate(body)
    if message is None:
        assert len(from_nrt(nrt).zones) == zones
    else:
        with pytest.raises(ValueError, match=re.escape(message)):
            from_nrt(nrt)
