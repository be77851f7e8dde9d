"""kube-scheduler's label and taint filters, as the claim webhook applies them before choosing a NUMA node."""

from typing import Any

import pytest

from toposched.schedhook.placement.nodefit import selects

NODE = {
    "metadata": {"name": "n1", "labels": {"zone": "a", "gpus": "8"}},
    "spec": {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]},
}
TOLERATE = [{"key": "gpu", "operator": "Exists"}]


def pod(**spec: Any) -> dict[str, Any]:
    return {"spec": {"tolerations": TOLERATE, **spec}}


def required(*expressions: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": list(expressions)}
    if fields:
        term["matchFields"] = fields
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


@pytest.mark.parametrize(
    ("body", "passes"),
    [
        pytest.param(pod(), True, id="no-constraint"),
        pytest.param(pod(nodeSelector={"zone": "a"}), True, id="node-selector-matches"),
        pytest.param(pod(nodeSelector={"zone": "b"}), False, id="node-selector-differs"),
        pytest.param(pod(affinity=required({"key": "zone", "operator": "In", "values": ["a", "c"]})), True, id="in"),
        pytest.param(pod(affinity=required({"key": "zone", "operator": "NotIn", "values": ["a"]})), False, id="not-in"),
        pytest.param(pod(affinity=required({"key": "gpus", "operator": "Gt", "values": ["4"]})), True, id="gt"),
        pytest.param(pod(affinity=required({"key": "gpus", "operator": "Lt", "values": ["4"]})), False, id="lt"),
        pytest.param(pod(affinity=required({"key": "x", "operator": "DoesNotExist"})), True, id="does-not-exist"),
        pytest.param(pod(affinity=required({"key": "x", "operator": "Exists"})), False, id="exists"),
        pytest.param(
            pod(affinity=required(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}])),
            True,
            id="match-fields-name",
        ),
        pytest.param({"spec": {}}, False, id="untolerated-taint"),
        pytest.param(
            {"spec": {"tolerations": [{"key": "gpu", "value": "yes", "operator": "Equal"}]}}, True, id="equal"
        ),
        pytest.param({"spec": {"tolerations": [{"operator": "Exists"}]}}, True, id="tolerate-everything"),
        pytest.param(
            {"spec": {"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}]}},
            False,
            id="other-effect",
        ),
    ],
)
def test_selects(body: dict[str, Any], passes: bool) -> None:
    assert selects(body, NODE) is passes
