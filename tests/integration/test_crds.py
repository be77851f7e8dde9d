"""The CRDs in crds/ against a real kube-apiserver: upstream objects in, bad objects out."""

import copy
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from testkit.paths import UPSTREAM_FIXTURES
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
    ],
    ids=[
        "negative-network-cost",
        "unknown-algorithm",
        "nrt-without-zones",
        "nrt-empty-zones",
        "bad-quantity",
        "max-network-cost-above-10000",
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


def test_printer_columns(kubectl: list[str], tmp_path: Path) -> None:
    out = subprocess.run(
        [
            *kubectl,
            "get",
            "crd",
            "appgroups.appgroup.diktyo.x-k8s.io",
            "-o",
            "jsonpath={.spec.versions[0].additionalPrinterColumns[*].name}",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert out.split() == ["Algorithm", "Members", "Running", "Ready", "Age"]
