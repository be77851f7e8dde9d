"""Random garbage in one object of a cluster never changes the extender's answers for the others."""

import copy
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.builders import appgroup_body, member_labels, networktopology_body, pod_body, topology_order
from testkit.extender import in_process
from testkit.fuzz import mutate_tree
from testkit.nrt import nrt
from toposched.apis.noderesourcetopology import NodeResourceTopology
from toposched.schedhook.placement.evaluate import PlacementConfig, evaluate
from toposched.schedhook.placement.parse import from_nrt, node_allocatable, node_location

NAMES = [f"n{i}" for i in range(5)]
KINDS = ("nodes", "nrts", "appgroups", "networktopologies", "pods")
ANSWER = ("fit", "reason", "zones", "numa")
NUMA = ("numa",)  # the zones of a node that fails are not shown


def appgroup(namespace: str) -> dict[str, Any]:
    workloads = {"a": [("b", {"maxNetworkCost": 20})], "b": []}
    body = appgroup_body("ag", workloads, api_version="apps/v1", namespace=namespace, min_bandwidth="1Gi")
    return body | {"status": {"topologyOrder": topology_order(["b", "a"])}}


def topology(namespace: str) -> dict[str, Any]:
    costs = [{"destination": "z1", "networkCost": 5, "bandwidthCapacity": "10Gi"}]
    origins = [{"origin": "z0", "costList": costs}, {"origin": "z1", "costList": [{**costs[0], "destination": "z0"}]}]
    weights = [
        {"name": "UserDefined", "topologyList": [{"topologyKey": "topology.kubernetes.io/zone", "originList": origins}]}
    ]
    return networktopology_body("nt", weights, configmap="m", namespace=namespace)


def pod(name: str, namespace: str, uid: str, workload: str | None = None, node: str | None = None) -> dict[str, Any]:
    """A pod asking for what testkit's POD asks, of AppGroup ag's ``workload`` and bound to ``node``
    if given."""
    return pod_body(
        name,
        namespace=namespace,
        uid=uid,
        labels=member_labels("ag", workload) if workload else None,
        node_name=node,
        cpu=8,
        memory="16Gi",
        devices={"example.com/nic": 1},
    )


def cluster() -> dict[str, list[dict[str, Any]]]:
    """Two namespaces: the pod under test lives in ``a``; ``b`` holds objects that must not matter to it."""
    rng = random.Random(5)
    # Written out: node_body would copy the allocatable to a capacity nothing reads, where much of
    # the garbage meant for the nodes would land.
    nodes = [
        {
            "metadata": {"name": n, "labels": {"topology.kubernetes.io/zone": f"z{i % 2}"}},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi"}},
        }
        for i, n in enumerate(NAMES)
    ]
    pods = [
        pod(f"b-{namespace}", namespace, f"u-{namespace}", "b", node) for namespace, node in (("a", "n1"), ("b", "n3"))
    ]
    return {
        "nodes": nodes,
        "nrts": [nrt(n, rng) for n in NAMES],
        "appgroups": [appgroup("a"), appgroup("b")],
        "networktopologies": [topology("b")],
        "pods": pods,
    }


def versioned(objects: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    for items in objects.values():
        for i, item in enumerate(items):
            item["metadata"]["resourceVersion"] = str(i + 1)
    return objects


def answers(objects: dict[str, list[dict[str, Any]]], pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    view = in_process(objects).view
    results = evaluate(pod, NAMES, view.snapshot(exclude="u-test"), PlacementConfig())
    out = {}
    for r in results.all():
        out[r.node] = {"fit": r.fit, "reason": r.reason, "zones": r.numa_zones, "numa": r.scores.get("numa")}
    return out


def readable(kind: str, body: dict[str, Any]) -> bool:
    try:
        if kind == "nodes":
            node_allocatable(body)
        else:
            from_nrt(NodeResourceTopology.model_validate(body))
    except ValueError:
        return False
    return True


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    index=st.integers(0, 4),
    seed=st.integers(0, 2**32),
    mutations=st.integers(1, 3),
)
def test_garbage_in_one_object_never_changes_the_answers_for_the_others(
    kind: str, index: int, seed: int, mutations: int
) -> None:
    """The pod is an AppGroup member in namespace a. Garbage goes into one Node or NRT (only that
    node's answer may change, and then to a failure naming the object), or into an AppGroup, a
    NetworkTopology or a bound pod of namespace b (nothing may change)."""
    good = versioned(cluster())
    bad = copy.deepcopy(good)
    items = bad[kind]
    victim = items[index % len(items)] if kind in ("nodes", "nrts") else items[-1]
    if kind == "appgroups":
        victim = next(i for i in items if i["metadata"]["namespace"] == "b")
    rng = random.Random(seed)
    spoiled: Any = victim
    for _ in range(mutations):
        spoiled, _ = mutate_tree(spoiled, rng)
    if not isinstance(spoiled, dict):
        spoiled = {"spec": spoiled}
    # What the apiserver always sends: the object's identity.
    meta = spoiled.get("metadata")
    spoiled["metadata"] = dict(meta) if isinstance(meta, dict) else {}
    for key in ("name", "namespace"):
        if key in victim["metadata"]:
            spoiled["metadata"][key] = victim["metadata"][key]
    spoiled["metadata"]["resourceVersion"] = "spoiled"
    items[items.index(victim)] = spoiled
    # Costs are cluster-wide (links of every NetworkTopology), and a node's labels say where the
    # pods placed on it are: changing either may change the member's network answers, rightly.
    network_may_change = kind == "networktopologies" or (
        kind == "nodes" and node_location(spoiled) != node_location(victim)
    )
    touched = victim["metadata"]["name"] if kind in ("nodes", "nrts") else None
    outsider, member = pod("p", "a", "u-test"), pod("test", "a", "u-test", "a")
    for tested, fields in ((outsider, ANSWER), (member, NUMA if network_may_change else ANSWER)):
        before, after = answers(good, tested), answers(bad, tested)
        for name in NAMES:
            if name != touched:
                assert {f: after[name][f] for f in fields} == {f: before[name][f] for f in fields}, name
        if touched is not None and not readable(kind, spoiled):  # else it is a valid, different object
            kind_name = "Node" if kind == "nodes" else "NodeResourceTopology"
            assert not after[touched]["fit"]
            assert after[touched]["reason"].startswith(f"invalid {kind_name} {touched}: ")
