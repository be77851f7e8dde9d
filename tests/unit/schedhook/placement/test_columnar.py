"""The columnar path answers exactly as the one-by-one path: verdict, reason, zones and scores."""

from dataclasses import replace
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.placement import RESOURCES, nodes
from toposched.schedhook.placement.columnar import NodeTable
from toposched.schedhook.placement.evaluate import PlacementConfig, evaluate_pod
from toposched.schedhook.placement.kubelet.topologymanager import mask
from toposched.schedhook.placement.model import NodeTopology, NumaZone
from toposched.schedhook.placement.score import LEAST_ALLOCATED, MOST_ALLOCATED
from toposched.schedhook.placement.snapshot import Snapshot

QUANTITIES = ["0", "1", "2", "3", "4", "5", "6", "8", "12", "0.5", "250m", "1Gi", "3Gi"]


@st.composite
def pod_bodies(draw: st.DrawFn) -> dict[str, Any]:
    requests = {r: draw(st.sampled_from(QUANTITIES)) for r in RESOURCES if draw(st.booleans())}
    guaranteed = draw(st.booleans())
    resources: dict[str, Any] = {"limits": requests} if guaranteed else {"requests": requests}
    if guaranteed:
        requests.setdefault("cpu", "1")
        requests.setdefault("memory", "1")
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "resources": resources}]}}


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, NodeTopology]:
    out = {}
    for i in range(draw(st.integers(1, 6))):
        node = draw(nodes())
        policy = draw(st.sampled_from(["single-numa-node", "single-numa-node", "restricted", "none"]))
        # Sometimes pinned memory grouped over two zones: no single-zone memory hint there.
        groups = draw(st.sampled_from([(), (mask(0, 1),)])) if len(node.zones) > 1 else ()
        out[f"n{i}"] = replace(node, name=f"n{i}", policy=policy, memory_groups=groups)
    return out


@settings(max_examples=200, deadline=None)
@given(clusters(), pod_bodies(), st.sampled_from([LEAST_ALLOCATED, MOST_ALLOCATED]))
def test_columnar_agrees_with_one_by_one(cluster: dict[str, NodeTopology], pod: dict[str, Any], strategy: str) -> None:
    names = [*cluster, "no-nrt"]
    columnar = evaluate_pod(pod, names, Snapshot(nrts=cluster), PlacementConfig(numa_strategy=strategy))
    single = evaluate_pod(pod, names, Snapshot(nrts=cluster), PlacementConfig(numa_strategy=strategy, vectorize=False))
    assert [r.to_dict() for r in columnar] == [r.to_dict() for r in single]


def zone(numa: int, cpu: int) -> NumaZone:
    amounts = {"cpu": Decimal(cpu)}
    return NumaZone(numa, {"cpu": Decimal(8)}, {"cpu": Decimal(8)}, amounts)


def test_sync_refills_only_changed_rows_and_rebuilds_on_new_names() -> None:
    a = NodeTopology("a", (zone(0, 8), zone(1, 2)), "single-numa-node", "container", "static", "None")
    b = NodeTopology("b", (zone(0, 1),), "single-numa-node", "container", "static", "None")
    table = NodeTable()
    table.sync({"a": a, "b": b})
    assert table.available[table.columns["cpu"], 1, table.index["a"]] == 2000
    a2 = replace(a, zones=(zone(0, 8), zone(1, 6)))
    table.sync({"a": a2, "b": b})
    assert table.available[table.columns["cpu"], 1, table.index["a"]] == 6000
    assert table.nodes[table.index["b"]] is b
    c = NodeTopology("c", (zone(0, 1), zone(1, 1), zone(2, 3)), "none", "container", None, None)
    table.sync({"a": a2, "b": b, "c": c})
    assert table.zones_of(table.index["c"]) == [0, 1, 2]
    assert list(table.rows(["c", "x", "a"])) == [2, -1, 0]


@settings(max_examples=100, deadline=None)
@given(st.lists(clusters(), min_size=2, max_size=4), pod_bodies(), st.booleans())
def test_a_table_followed_through_changes_answers_as_a_fresh_one(
    steps: list[dict[str, NodeTopology]], pod: dict[str, Any], by_name: bool
) -> None:
    # Rename some nodes at each step so that syncs remove, add and keep names; every step is
    # evaluated, so the answers memoised for the pod are carried through the changes.
    table = NodeTable()
    previous: dict[str, NodeTopology] = {}
    for step, cluster in enumerate(steps):
        cluster = {(n if int(n[1:]) % (step + 2) else f"s{step}-{n}"): node for n, node in cluster.items()}
        if by_name:
            table.update(cluster, {*previous, *cluster})  # what the extender's cache does
        else:
            table.sync(cluster)
        names = sorted({*previous, *cluster})
        synced = evaluate_pod(pod, names, Snapshot(nrts=cluster, table=table))
        fresh = evaluate_pod(pod, names, Snapshot(nrts=cluster), PlacementConfig(vectorize=False))
        assert [r.to_dict() for r in synced] == [r.to_dict() for r in fresh]
        previous = cluster


@settings(max_examples=100, deadline=None)
@given(clusters())
def test_a_row_refilled_holds_nothing_of_the_view_before(cluster: dict[str, NodeTopology]) -> None:
    fresh, refilled = NodeTable(), NodeTable()
    fresh.sync(cluster)
    # Every row first holds another node's view (the rows in reverse), then its own, one at a time.
    refilled.sync(dict(zip(cluster, reversed(cluster.values()), strict=True)))
    for name, node in cluster.items():
        refilled.update({**cluster, name: node}, [name])
    assert (fresh.columns, fresh.large) == (refilled.columns, refilled.large)
    for array in NodeTable._ARRAYS:
        if array != "version":  # bumped once more per row refilled
            assert getattr(fresh, array).tolist() == getattr(refilled, array).tolist(), array


def test_rows_are_reused_and_the_table_grows() -> None:
    a = NodeTopology("a", (zone(0, 8),), "single-numa-node", "container", "static", "None")
    table = NodeTable()
    table.sync({f"n{i}": a for i in range(3)})
    table.sync({"n0": a, "n2": a})
    assert "n1" not in table.index
    table.sync({"n0": a, "n2": a, "m": a})
    assert table.index["m"] == 1  # the freed row
    table.sync({f"x{i}": a for i in range(40)} | {"n0": a})
    assert (len(table.index), table.numa.shape[1] >= 41) == (41, True)
    assert all(table.zones_of(table.index[f"x{i}"]) == [0] for i in range(40))


@settings(max_examples=60, deadline=None)
@given(clusters(), clusters(), pod_bodies())
def test_nodes_answered_one_by_one_are_predicted_again_only_when_their_view_changed(
    first: dict[str, NodeTopology], second: dict[str, NodeTopology], pod: dict[str, Any]
) -> None:
    """The second evaluation of a pod shape reuses the predictions of nodes whose NRT view is the
    same object, and predicts again where it was replaced: both answer as a fresh table would."""
    table = NodeTable()
    names = sorted({*first, *second})
    evaluate_pod(pod, names, Snapshot(nrts=first, table=table))
    changed = {n: second.get(n, node) for n, node in first.items()}  # some views replaced, some kept
    table.sync(changed)
    again = evaluate_pod(pod, names, Snapshot(nrts=changed, table=table))
    fresh = evaluate_pod(pod, names, Snapshot(nrts=changed), PlacementConfig(vectorize=False))
    assert [r.to_dict() for r in again] == [r.to_dict() for r in fresh]
