"""The CRDs in crds/ against a real kube-apiserver: upstream objects in, bad objects out."""

import copy
import json
import subprocess
import time
import uuid
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from testkit.paths import EXAMPLES, UPSTREAM_FIXTURES
from toposched.apis.appgroup import AppGroup
from toposched.apis.meta import KubeObject
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds")]

MODELS: dict[str, type[KubeObject]] = {
    "AppGroup": AppGroup,
    "NetworkTopology": NetworkTopology,
    "NodeResourceTopology": NodeResourceTopology,
}


def fixture(name: str) -> dict[str, Any]:
    data = yaml.safe_load((UPSTREAM_FIXTURES / name).read_text())
    assert isinstance(data, dict)
    return data


async def create(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    """Create a custom object (namespaced ones in ``namespace``) and return what the server stored."""
    model = MODELS[body["kind"]]
    objects = client.CustomObjectsApi(api)
    if model.NAMESPACED:
        body = copy.deepcopy(body)
        body["metadata"]["namespace"] = namespace
        created = await objects.create_namespaced_custom_object(
            model.GROUP, model.VERSION, namespace, model.PLURAL, body
        )
    else:
        # Cluster-scoped: a unique name keeps concurrent tests apart; deleted straight away.
        body = copy.deepcopy(body)
        body["metadata"]["name"] = f"{body['metadata']['name']}-{uuid.uuid4().hex[:6]}"
        created = await objects.create_cluster_custom_object(model.GROUP, model.VERSION, model.PLURAL, body)
        await objects.delete_cluster_custom_object(model.GROUP, model.VERSION, model.PLURAL, body["metadata"]["name"])
    assert isinstance(created, dict)
    return created


@pytest.mark.parametrize(
    "name",
    ["appgroup-online-boutique.yaml", "networktopology.yaml", "noderesourcetopology.yaml"],
    ids=["appgroup", "networktopology", "noderesourcetopology"],
)
async def test_upstream_example_is_accepted_and_round_trips(api: client.ApiClient, namespace: str, name: str) -> None:
    body = fixture(name)
    stored = await create(api, namespace, body)
    # The server keeps every field the upstream example has (nothing pruned) ...
    assert {k: v for k, v in stored.items() if k != "metadata"} == {k: v for k, v in body.items() if k != "metadata"}
    # ... and what it returns survives a parse and dump through apis/ unchanged.
    assert MODELS[body["kind"]].from_dict(stored).to_dict() == stored


async def test_absent_sorting_algorithm_defaults_to_kahn(api: client.ApiClient, namespace: str) -> None:
    body = fixture("appgroup-online-boutique.yaml")
    del body["spec"]["topologySortingAlgorithm"]
    stored = await create(api, namespace, body)
    assert stored["spec"]["topologySortingAlgorithm"] == "KahnSort"


def _negative_cost(body: dict[str, Any]) -> None:
    body["spec"]["weights"][0]["topologyList"][0]["originList"][0]["costList"][0]["networkCost"] = -5


def _unknown_algorithm(body: dict[str, Any]) -> None:
    body["spec"]["topologySortingAlgorithm"] = "QuickSort"


def _no_zones(body: dict[str, Any]) -> None:
    del body["zones"]


def _empty_zones(body: dict[str, Any]) -> None:
    body["zones"] = []


def _bad_quantity(body: dict[str, Any]) -> None:
    body["spec"]["workloads"][0]["dependencies"][0]["minBandwidth"] = "lots"


def _control_character(body: dict[str, Any]) -> None:
    body["zones"][0]["name"] = "node-0\x1b[31m"


def _cost_too_high(body: dict[str, Any]) -> None:
    body["spec"]["workloads"][0]["dependencies"][0]["maxNetworkCost"] = 10001


@pytest.mark.parametrize(
    ("name", "spoil", "expected"),
    [
        (
            "networktopology.yaml",
            _negative_cost,
            "networkCost in body should be greater than or equal to 0",
        ),
        ("appgroup-online-boutique.yaml", _unknown_algorithm, 'Unsupported value: "QuickSort"'),
        ("noderesourcetopology.yaml", _no_zones, "zones: Required value"),
        (
            "noderesourcetopology.yaml",
            _empty_zones,
            "zones: Invalid value: 0: zones in body should have at least 1 items",
        ),
        ("appgroup-online-boutique.yaml", _bad_quantity, "minBandwidth: Invalid value"),
        ("appgroup-online-boutique.yaml", _cost_too_high, "should be less than or equal to 10000"),
        ("noderesourcetopology.yaml", _control_character, "zones[0].name: Invalid value"),
    ],
    ids=[
        "negative-network-cost",
        "unknown-algorithm",
        "nrt-without-zones",
        "nrt-empty-zones",
        "bad-quantity",
        "max-network-cost-above-10000",
        "nrt-name-with-a-control-character",
    ],
)
async def test_invalid_object_is_rejected_with_a_readable_message(
    api: client.ApiClient, namespace: str, name: str, spoil: Any, expected: str
) -> None:
    body = fixture(name)
    spoil(body)
    with pytest.raises(ApiException) as info:
        await create(api, namespace, body)
    assert info.value.status == 422
    message = json.loads(info.value.body)["message"]
    assert expected in message, message


async def test_status_is_a_subresource(api: client.ApiClient, namespace: str) -> None:
    body = fixture("appgroup-online-boutique.yaml")
    body["status"] = {"runningWorkloads": 3}
    stored = await create(api, namespace, body)
    assert "status" not in stored  # a write to the main resource cannot set status
    objects = client.CustomObjectsApi(api)
    patched = await objects.patch_namespaced_custom_object_status(
        AppGroup.GROUP,
        AppGroup.VERSION,
        namespace,
        AppGroup.PLURAL,
        stored["metadata"]["name"],
        {"status": {"runningWorkloads": 3}},
        _content_type="application/merge-patch+json",
    )
    assert patched["status"] == {"runningWorkloads": 3}


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        ("appgroups.spec.topologySortingAlgorithm", "Defaults to KahnSort"),
        ("networktopologies.spec.configmapName", "latency measurements"),
        ("noderesourcetopologies.zones.resources.available", "still free for new pods"),
    ],
    ids=["appgroup", "networktopology", "noderesourcetopology"],
)
def test_kubectl_explain_describes_fields(kubectl: list[str], resource: str, expected: str) -> None:
    out = subprocess.run([*kubectl, "explain", resource], check=True, capture_output=True, text=True).stdout
    assert expected in " ".join(out.split())


@pytest.mark.parametrize(
    ("kind", "plural", "columns"),
    [
        ("AppGroup", "appgroups.appgroup.diktyo.x-k8s.io", ["ALGORITHM", "MEMBERS", "RUNNING", "READY", "REASON"]),
        (
            "NetworkTopology",
            "networktopologies.networktopology.diktyo.x-k8s.io",
            ["CONFIGMAP", "NODES", "READY", "REASON", "CALCULATED"],
        ),
    ],
    ids=["appgroup", "networktopology"],
)
def test_printer_columns_say_why_an_object_is_not_ready(
    kubectl: list[str], namespace: str, kind: str, plural: str, columns: list[str]
) -> None:
    """`kubectl get` shows the Ready condition's reason, and `-o wide` its message."""
    example = next(
        doc
        for path in sorted(EXAMPLES.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") == kind
    )
    name = example["metadata"]["name"]
    _run([*kubectl, "apply", "-n", namespace, "-f", "-"], yaml.safe_dump(example))
    condition = {
        "type": "Ready",
        "status": "False",
        "reason": "MeasurementsUnavailable",
        "message": "ConfigMap netperf-metrics not found",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    status = json.dumps({"status": {"conditions": [condition]}})
    patch = [*kubectl, "patch", "-n", namespace, plural.split(".")[0], name, "--subresource=status", "--type=merge"]
    _run([*patch, "-p", status])
    table = _run([*kubectl, "get", "-n", namespace, plural, name])
    header, row = table.splitlines()[:2]
    assert header.split()[1:-1] == columns
    assert "MeasurementsUnavailable" in row.split()
    wide = _run([*kubectl, "get", "-n", namespace, plural, name, "-o", "wide"])
    assert "ConfigMap netperf-metrics not found" in wide


def _run(args: list[str], stdin: str | None = None) -> str:
    return subprocess.run(args, input=stdin, check=True, capture_output=True, text=True).stdout


def _nrt_resource(**fields: object) -> Any:
    def spoil(body: dict[str, Any]) -> None:
        body["zones"][0]["resources"][0].update(fields)

    return spoil


def _nrt_zones(body: dict[str, Any]) -> None:
    body["zones"].append(copy.deepcopy(body["zones"][0]))


def _nrt_costs(*values: int) -> Any:
    def spoil(body: dict[str, Any]) -> None:
        body["zones"][0]["costs"] = [{"name": body["zones"][0]["name"], "value": values[0]}] + [
            {"name": f"other-{i}", "value": v} for i, v in enumerate(values[1:])
        ]

    return spoil


def _dependency(**fields: object) -> Any:
    def spoil(body: dict[str, Any]) -> None:
        body["spec"]["workloads"][0]["dependencies"][0].update(fields)

    return spoil


def _selector(body: dict[str, Any]) -> None:
    body["spec"]["workloads"][0]["workload"]["selector"] = "app in (a, b)"


def _weights_twice(body: dict[str, Any]) -> None:
    body["spec"]["weights"].append(copy.deepcopy(body["spec"]["weights"][0]))


def _link(**fields: object) -> Any:
    def spoil(body: dict[str, Any]) -> None:
        body["spec"]["weights"][0]["topologyList"][0]["originList"][0]["costList"][0].update(fields)

    return spoil


def _configmap(name: str) -> Any:
    def spoil(body: dict[str, Any]) -> None:
        body["spec"]["configmapName"] = name

    return spoil


NRT, AG, NT = "noderesourcetopology.yaml", "appgroup-online-boutique.yaml", "networktopology.yaml"
QUANTITY = "must be a quantity of at least 0, at most 20 digits with a two-digit exponent"
BANDWIDTH = "must be a bandwidth from 0 to 10T"


@pytest.mark.parametrize(
    ("name", "spoil", "expected"),
    [
        (NRT, _nrt_resource(capacity="1e999999"), f'capacity: Invalid value: "1e999999": {QUANTITY}'),
        (NRT, _nrt_resource(available="1e99999999999"), "zones[0].resources[0].available: Invalid value"),
        (NRT, _nrt_resource(capacity="-1"), f'zones[0].resources[0].capacity: Invalid value: "-1": {QUANTITY}'),
        (NRT, _nrt_resource(capacity=-4), "zones[0].resources[0].capacity: Invalid value: -4"),
        (NRT, _nrt_resource(available=4), "available: Invalid value: available must not be more than allocatable"),
        (NRT, _nrt_resource(capacity=8193, allocatable=8193), "more than any machine has (cpu at most 8192"),
        (NRT, _nrt_zones, 'zones[2]: Duplicate value: {"name":"numa-node-0"}'),
        (NRT, _nrt_costs(10, -1), "zones[0].costs[1].value: Invalid value: -1"),
        (NRT, _nrt_costs(10, 256), "zones[0].costs[1].value: Invalid value: 256"),
        (NRT, _nrt_costs(11), "the distance of a zone to itself is 10 (ACPI SLIT)"),
        (AG, _dependency(minBandwidth="1e999999999"), f'minBandwidth: Invalid value: "1e999999999": {BANDWIDTH}'),
        (AG, _dependency(minBandwidth="-1"), f'minBandwidth: Invalid value: "-1": {BANDWIDTH}'),
        (AG, _dependency(minBandwidth="11T"), f'minBandwidth: Invalid value: "11T": {BANDWIDTH}'),
        (AG, _selector, "spec.workloads[0].workload.selector: Invalid value: \"app in (a, b)\""),
        (NT, _weights_twice, 'spec.weights[1]: Duplicate value: {"name":"UserDefined"}'),
        (NT, _link(bandwidthCapacity="-1"), "bandwidthCapacity: Invalid value: \"-1\""),
        (NT, _link(bandwidthAllocated="1e999999"), "bandwidthAllocated: Invalid value: \"1e999999\""),
        (NT, _configmap("metrics/../x"), "spec.configmapName: Invalid value: \"metrics/../x\""),
        (NT, _configmap(""), "spec.configmapName: Invalid value: \"\""),
    ],
    ids=[
        "nrt-quantity-1e999999",
        "nrt-exponent-beyond-the-apiservers-own-parser",
        "nrt-negative-capacity",
        "nrt-negative-integer",
        "nrt-available-above-allocatable",
        "nrt-more-cpus-than-a-machine",
        "nrt-duplicate-zone",
        "nrt-negative-distance",
        "nrt-distance-above-255",
        "nrt-distance-to-itself-not-10",
        "appgroup-bandwidth-1e999999999",
        "appgroup-negative-bandwidth",
        "appgroup-bandwidth-above-10T",
        "appgroup-selector-expression",
        "networktopology-duplicate-weight",
        "networktopology-negative-capacity",
        "networktopology-huge-allocated",
        "networktopology-configmap-path",
        "networktopology-empty-configmap",
    ],
)  # fmt: skip
async def test_values_no_machine_has_are_rejected_quickly(
    api: client.ApiClient, namespace: str, name: str, spoil: Any, expected: str
) -> None:
    """Issue 15, items 4 and 5: these were accepted, and then stopped scheduling or every cost computation.
    Quickly: comparing 1e99999999999 as a quantity would keep the apiserver busy past its timeout."""
    body = fixture(name)
    spoil(body)
    started = time.monotonic()
    with pytest.raises(ApiException) as info:
        await create(api, namespace, body)
    assert time.monotonic() - started < 10
    assert info.value.status == 422
    message = json.loads(info.value.body)["message"]
    assert expected in message, message


async def test_the_examples_and_the_largest_real_values_are_accepted(api: client.ApiClient, namespace: str) -> None:
    for name in ("noderesourcetopology-worker-1.yaml", "appgroup-online-boutique.yaml", "networktopology.yaml"):
        body = yaml.safe_load((EXAMPLES / name).read_text())
        await create(api, namespace, body)
    body = fixture(NRT)
    body["zones"][0]["resources"][0].update(capacity=8192, allocatable="8192", available="8k")
    body["zones"][0]["resources"].append(
        {"name": "memory", "capacity": "4Pi", "allocatable": "4Pi", "available": "1.5e15"}
    )
    body["zones"][0]["costs"] = [{"name": "numa-node-0", "value": 10}, {"name": "numa-node-1", "value": 255}]
    await create(api, namespace, body)
    body = fixture(AG)
    body["metadata"]["name"] = "at-the-bounds"
    body["spec"]["workloads"][0]["dependencies"][0]["minBandwidth"] = "10T"
    await create(api, namespace, body)
