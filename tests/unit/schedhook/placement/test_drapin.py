"""Pinning a new claim to one NUMA node: which claims, the selector, the patch and the choice."""

from typing import Any

import pytest

from toposched.apis.resourceslice import NUMA_ATTRIBUTES
from toposched.schedhook.placement.drapin import (
    EXTENDED_RESOURCE_ANNOTATION,
    PIN_ANNOTATION,
    POD_CLAIM_ANNOTATION,
    choose,
    decision_patch,
    numa_expression,
    owner_pod,
    pin_patch,
    wants_pin,
)

OWNER = [{"kind": "Pod", "name": "train-0", "controller": True, "apiVersion": "v1", "uid": "u"}]


def made_claim(annotations: dict[str, str] | None = None, owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "generateName": "train-0-gpu-",
            "annotations": {POD_CLAIM_ANNOTATION: "gpu", **(annotations or {})},
            "ownerReferences": OWNER if owners is None else owners,
        },
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }


@pytest.mark.parametrize(
    ("claim", "owner"),
    [
        pytest.param(made_claim(), "train-0", id="made-for-a-pod"),
        pytest.param({"metadata": {"name": "shared"}}, None, id="a-claim-of-its-own"),
        pytest.param(made_claim({EXTENDED_RESOURCE_ANNOTATION: "example.com/gpu"}), None, id="scheduler-made"),
        pytest.param(made_claim(owners=[{**OWNER[0], "controller": False}]), None, id="not-the-controller"),
        pytest.param(made_claim(owners=[]), None, id="no-owner"),
    ],
)
def test_owner_pod(claim: dict[str, Any], owner: str | None) -> None:
    assert owner_pod(claim) == owner


@pytest.mark.parametrize(
    ("annotation", "default", "pins"),
    [
        pytest.param(None, False, False, id="annotated-mode-unannotated"),
        pytest.param("true", False, True, id="annotated-mode-asked"),
        pytest.param(None, True, True, id="all-mode"),
        pytest.param("false", True, False, id="all-mode-refused"),
        pytest.param("yes", False, False, id="unreadable-is-the-default"),
    ],
)
def test_wants_pin(annotation: str | None, default: bool, pins: bool) -> None:
    pod = {"metadata": {"annotations": {PIN_ANNOTATION: annotation} if annotation else {}}}
    assert wants_pin(pod, default) is pins


def test_the_selector_reads_each_attribute_only_where_present_first_one_deciding() -> None:
    expression = numa_expression(1)
    for name in NUMA_ATTRIBUTES:
        domain, _, attribute = name.rpartition("/")
        guard = f'"{attribute}" in device.attributes["{domain}"]'
        assert guard in expression
        assert expression.index(guard) < expression.index(f'device.attributes["{domain}"].{attribute} == 1')
    assert expression.startswith('("numaNode" in device.attributes["resource.kubernetes.io"]')
    assert expression.endswith(": false)))))")


def test_patch_adds_the_selector_to_every_request_and_alternative() -> None:
    claim = made_claim()
    claim["spec"]["devices"]["requests"] = [
        {"name": "a", "exactly": {"deviceClassName": "gpu", "selectors": [{"cel": {"expression": "true"}}]}},
        {"name": "b", "firstAvailable": [{"name": "big"}, {"name": "small"}]},
    ]
    ops = pin_patch(claim, 1)
    paths = [(op["op"], op["path"]) for op in ops]
    assert paths == [
        ("add", "/spec/devices/requests/0/exactly/selectors/-"),
        ("add", "/spec/devices/requests/1/firstAvailable/0/selectors"),
        ("add", "/spec/devices/requests/1/firstAvailable/1/selectors"),
        ("add", "/metadata/annotations/toposched.io~1dra-pin-numa"),
    ]
    assert ops[0]["value"] == {"cel": {"expression": numa_expression(1)}}
    assert ops[-1]["value"] == "1"


def test_nothing_to_pin_patches_nothing() -> None:
    assert pin_patch({"metadata": {}, "spec": {"devices": {"requests": []}}}, 0) == []


@pytest.mark.parametrize(
    ("fitting", "pending", "chosen"),
    [
        pytest.param({0: 3, 1: 5, None: 2}, {}, 1, id="most-nodes"),
        pytest.param({0: 2, 1: 2, None: 0}, {}, 0, id="lowest-on-a-tie"),
        pytest.param({0: 2, 1: 2, None: 2}, {}, None, id="as-written-wins-a-tie"),
        pytest.param({0: 3, 1: 5, None: 2}, {"1": 3}, 0, id="a-burst-spreads"),
        pytest.param({0: 3, 1: 5, None: 4}, {"1": 3, "0": 1}, None, id="as-written-has-most-left"),
        pytest.param({0: 0, 1: 0, None: 0}, {}, None, id="fits-nowhere"),
        pytest.param({}, {}, None, id="no-candidates"),
    ],
)
def test_choose(fitting: dict[int | None, int], pending: dict[str, int], chosen: int | None) -> None:
    assert choose(fitting, pending) == chosen


def test_a_claim_left_as_written_says_so() -> None:
    assert decision_patch(made_claim(), None) == [
        {"op": "add", "path": "/metadata/annotations/toposched.io~1dra-pin-numa", "value": "none"}
    ]
