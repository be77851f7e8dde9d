import types
import typing
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from testkit.paths import CRDS, EXAMPLES, UPSTREAM_FIXTURES
from toposched.apis.appgroup import AppGroup, SortingAlgorithm
from toposched.apis.meta import KubeObject
from toposched.apis.networktopology import NetworkTopology
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.apis.quantity import parse_quantity

MODELS: dict[str, type[KubeObject]] = {
    "AppGroup": AppGroup,
    "NetworkTopology": NetworkTopology,
    "NodeResourceTopology": NodeResourceTopology,
}


def _kinds(path: Path) -> set[str]:
    return {doc.get("kind") for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict)}


# The project's own kinds (examples/ also holds the Nodes and the ConfigMap of `make run`).
SAMPLES = sorted(p for p in [*UPSTREAM_FIXTURES.glob("*.yaml"), *EXAMPLES.glob("*.yaml")] if _kinds(p) <= set(MODELS))


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sample_round_trips_unchanged(path: Path) -> None:
    data = load(path)
    model = MODELS[data["kind"]].from_dict(data)
    assert model.to_dict() == data


def test_unknown_fields_survive_a_round_trip() -> None:
    data = load(UPSTREAM_FIXTURES / "networktopology.yaml")
    data["spec"]["weights"][0]["futureField"] = {"kept": True}
    assert NetworkTopology.from_dict(data).to_dict() == data


def test_absent_algorithm_means_kahn() -> None:
    data = load(EXAMPLES / "appgroup-online-boutique.yaml")
    del data["spec"]["topologySortingAlgorithm"]
    assert AppGroup.from_dict(data).spec.topology_sorting_algorithm is SortingAlgorithm.KAHN


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100Mi", Decimal(100 * 2**20)),
        ("1G", Decimal(10**9)),
        ("1500m", Decimal("1.5")),
        ("10e3", Decimal(10_000)),
        ("1Gi", Decimal(2**30)),
        (4, Decimal(4)),
        ("0", Decimal(0)),
    ],
    ids=["binary-suffix", "decimal-suffix", "milli", "exponent", "gibi", "int", "zero"],
)
def test_parse_quantity(text: str | int, value: Decimal) -> None:
    assert parse_quantity(text) == value


# What the official client library's parser (kubernetes.utils.quantity, v35) returns for each.
CLIENT_VECTORS = {
    "1n": "1E-9", "1u": "0.000001", "1m": "0.001", "1": "1", "1k": "1000", "1M": "1000000",
    "1G": "1000000000", "1T": "1000000000000", "1P": "1000000000000000",
    "1Ki": "1024", "1Mi": "1048576", "1Gi": "1073741824", "1Ti": "1099511627776",
    "1Pi": "1125899906842624", "1.5Gi": "1610612736.0", "0.5m": "0.0005", "100Mi": "104857600",
    "1500m": "1.500", "10e3": "1.0E+4", "1E3": "1E+3", "2e-3": "0.002", ".5k": "500.0", "5.": "5",
    "+1Ki": "1024", "-1m": "-0.001", "123456789n": "0.123456789",
}  # fmt: skip


@pytest.mark.parametrize(("text", "exact"), CLIENT_VECTORS.items(), ids=list(CLIENT_VECTORS))
def test_parse_quantity_agrees_with_the_client_library(text: str, exact: str) -> None:
    """The same value and the same Decimal spelling (precision), suffix by suffix."""
    assert str(parse_quantity(text)) == exact


@pytest.mark.parametrize("text", ["ten", "1Qi", "", "1.2.3"], ids=["word", "bad-suffix", "empty", "two-dots"])
def test_bad_quantity_is_a_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        parse_quantity(text)


def test_bad_quantity_in_an_object_names_the_field() -> None:
    data = load(EXAMPLES / "networktopology.yaml")
    data["spec"]["weights"][0]["topologyList"][0]["originList"][0]["costList"][0]["bandwidthCapacity"] = "lots"
    with pytest.raises(ValidationError, match="bandwidthCapacity"):
        NetworkTopology.from_dict(data)


# --- the models and the CRD schemas must name the same fields at every level -------------


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside ``X``, ``X | None`` or ``list[X] | None``, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _item_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return schema["items"] if schema.get("type") == "array" else schema


def _drift(model: type[BaseModel], schema: dict[str, Any], where: str) -> list[str]:
    fields = {(info.alias or name): info for name, info in model.model_fields.items()}
    props: dict[str, Any] = schema.get("properties", {})
    problems = [f"{where}: {name} only in the model" for name in sorted(fields.keys() - props.keys())]
    problems += [f"{where}: {name} only in the CRD" for name in sorted(props.keys() - fields.keys())]
    for name in sorted(fields.keys() & props.keys()):
        nested = _model_in(fields[name].annotation)
        if nested is not None:
            problems += _drift(nested, _item_schema(props[name]), f"{where}.{name}")
    return problems


@pytest.mark.parametrize("crd_path", sorted(CRDS.glob("*.yaml")), ids=lambda p: p.name)
def test_model_fields_match_the_crd(crd_path: Path) -> None:
    crd = load(crd_path)
    model = MODELS[crd["spec"]["names"]["kind"]]
    (version,) = crd["spec"]["versions"]
    assert _drift(model, version["schema"]["openAPIV3Schema"], crd["spec"]["names"]["kind"]) == []


@pytest.mark.parametrize("crd_path", sorted(CRDS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_crd_field_has_a_description(crd_path: Path) -> None:
    def missing(schema: dict[str, Any], where: str) -> list[str]:
        out = [] if "description" in schema or where.endswith(".metadata") else [where]
        for name, prop in schema.get("properties", {}).items():
            out += missing(prop, f"{where}.{name}")
        if "items" in schema:
            out += [p for p in missing(schema["items"], f"{where}[]") if p != f"{where}[]"]
        return out

    crd = load(crd_path)
    (version,) = crd["spec"]["versions"]
    assert missing(version["schema"]["openAPIV3Schema"], "") == []


@pytest.mark.parametrize("crd_path", sorted(CRDS.glob("*.yaml")), ids=lambda p: p.name)
def test_crd_file_is_named_group_underscore_plural(crd_path: Path) -> None:
    crd = load(crd_path)
    assert crd_path.name == f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"
