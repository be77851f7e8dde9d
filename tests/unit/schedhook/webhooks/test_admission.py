import base64
import json
from typing import Any

import pytest
import yaml

from testkit.builders import pod_body
from testkit.paths import EXAMPLES
from toposched.apis.constants import ORDER_GATE
from toposched.schedhook.webhooks.admission import (
    Rules,
    mutate_pod,
    review_response,
    validate_appgroup,
    validate_pod,
)


def pod(labels: dict[str, str] | None = None, scheduler: str | None = None, **spec: Any) -> dict[str, Any]:
    body = pod_body("p", labels=labels or {}, scheduler=scheduler or None, container="c")
    body["spec"] |= spec
    return body


AG = {"appgroup.diktyo.x-k8s.io": "shop"}


@pytest.mark.parametrize(
    ("body", "namespace", "rules", "ops"),
    [
        (pod(), "other", Rules(namespaces=["numa"]), []),
        (
            pod(),
            "numa",
            Rules(namespaces=["numa"]),
            [{"op": "add", "path": "/spec/schedulerName", "value": "toposched"}],
        ),
        (
            pod({"team": "hpc"}),
            "x",
            Rules(match_labels={"team": "hpc"}),
            [{"op": "add", "path": "/spec/schedulerName", "value": "toposched"}],
        ),
        (pod(scheduler="other-scheduler"), "numa", Rules(namespaces=["numa"]), []),
        (
            pod(AG, scheduler="toposched"),
            "x",
            Rules(),
            [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": ORDER_GATE}]}],
        ),
        (pod(AG), "x", Rules(), []),  # an AppGroup pod of another scheduler is not gated
        (pod(AG, scheduler="toposched", nodeName="n1"), "x", Rules(), []),
        (
            pod(AG, scheduler="toposched", schedulingGates=[{"name": "other"}]),
            "x",
            Rules(),
            [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": "other"}, {"name": ORDER_GATE}]}],
        ),
    ],
    ids=[
        "untouched",
        "routed-by-namespace",
        "routed-by-label",
        "other-scheduler-kept",
        "gated",
        "not-ours",
        "already-bound",
        "keeps-other-gates",
    ],
)
def test_mutate_pod(body: dict[str, Any], namespace: str, rules: Rules, ops: list[dict[str, Any]]) -> None:
    assert mutate_pod(body, namespace, rules) == ops


def test_validation_messages() -> None:
    bad = pod()
    bad["metadata"]["annotations"] = {
        "scheduling.koordinator.sh/numa-topology-spec": '{"numaTopologyPolicy": "Single"}'
    }
    assert "numaTopologyPolicy 'Single' is not one of" in (validate_pod(bad) or "")
    assert validate_pod(pod()) is None
    appgroup = yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text())
    assert validate_appgroup(appgroup) is None
    appgroup["spec"]["workloads"][1]["dependencies"][0]["workload"]["selector"] = "ghost"
    assert "no workload has selector 'ghost'" in (validate_appgroup(appgroup) or "")


def test_review_response_shapes() -> None:
    allowed = review_response({"uid": "u1"}, patch=[{"op": "add", "path": "/x", "value": 1}])
    assert allowed["response"]["allowed"] is True
    assert json.loads(base64.b64decode(allowed["response"]["patch"])) == [{"op": "add", "path": "/x", "value": 1}]
    denied = review_response({"uid": "u2"}, "nope")
    assert denied["response"] == {
        "uid": "u2",
        "allowed": False,
        "status": {"code": 422, "reason": "Invalid", "message": "nope"},
    }


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("minBandwidth", "1e999999999", "minBandwidth: '1e999999999' is more than any machine has"),
        ("minBandwidth", "-1", "minBandwidth: '-1' is negative"),
        ("minBandwidth", "20T", "minBandwidth: '20T' is more than any link carries (at most 10T)"),
        ("selector", "app in (a, b)", "workload.selector: String should match pattern"),
    ],
    ids=["bandwidth-1e999999999", "negative-bandwidth", "bandwidth-above-10T", "selector-expression"],
)
def test_an_appgroup_beyond_the_bounds_is_refused_naming_the_field(field: str, value: str, message: str) -> None:
    appgroup = yaml.safe_load((EXAMPLES / "appgroup-online-boutique.yaml").read_text())
    dependency = appgroup["spec"]["workloads"][0]["dependencies"][0]
    if field == "selector":
        dependency["workload"]["selector"] = value
    else:
        dependency[field] = value
    refused = validate_appgroup(appgroup) or ""
    assert refused.startswith("invalid AppGroup: spec.workloads[0].dependencies[0].")
    assert message in refused
    assert "http" not in refused


def test_a_pod_no_machine_can_run_is_refused() -> None:
    bad = pod()
    bad["spec"] = {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1e999999"}}}]}
    assert (validate_pod(bad) or "").startswith(
        "invalid pod: spec.containers[0].resources.limits.cpu: '1e999999' is more than any machine has"
    )
    bad["spec"] = {"containers": 5}
    assert validate_pod(bad) == "invalid pod: spec.containers: expected a list of containers"
