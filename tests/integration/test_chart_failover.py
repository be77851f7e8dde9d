"""The chart's warm standby on real nodes (testkit.chart): two kube-scheduler replicas, each with the
extender beside it, on three real kubelet nodes. While a stream of toposched pods is placed, the
acting replica (the one whose kube-scheduler holds the Lease) is hit in turn by kill -9 of its
extender, kill -9 of its kube-scheduler and, last, the power loss of its node; between these, the
standby's node loses power (nothing may change) and a new standby takes its place on the third node.

Failover time: the longest time without a bind from the last bind before the fault; the goal is
the Lease's duration + 5 s (20 s). Judged by the kubelets: no pod rejected (no
TopologyAffinityError), none bound twice or without predicted zones (those the kubelets chose are
printed beside), and every pod of the stream bound in the end, within ``SETTLE`` of the last
fault: pods the extender refused for NUMA alignment are woken once room frees in its view, and
those a killed extender refused by the one that acts after it (kube-scheduler alone would try them
again only at its 5-minute retry). The stream's pods go to the nodes a fault spares: a pod bound to
a node in the seconds after its power loss, before anything can know of it, waits for the node
lifecycle (eviction after the `unreachable` toleration) whatever the extender does.
"""

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from testkit.chaos.stream import Stream
from testkit.chart import COMPONENT, Release, is_ready, on_new_nodes
from testkit.cluster import wait_default_service_account, wait_for
from testkit.paths import REPO
from testkit.realnode import RealNode, Topology
from toposched.apis.noderesourcetopology import NodeResourceTopology

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds", "real_nodes"), pytest.mark.timeout(900)]

LEASE = "toposched-scheduler"
RELEASE_PODS = ["exporter"] * 3 + ["operator"] + ["schedhook"] * 2 + ["scheduler"] * 2
STEADY_GAP = 8.0
"""Seconds between two binds the standby's loss may not exceed: the stream binds about every second,
and a failover would take the Lease's 15 s."""
AGAIN = 3
"""Binds after a fault that say binds flow again."""
SETTLE = 60.0
"""Seconds the last pods may take to be bound once the stream stops (shortly after the last fault):
a pod left for kube-scheduler's 5-minute retry of unschedulable pods would not make it."""
SETUP_WAIT = 180.0
"""Seconds the cluster may take to reach a step's state (pods placed on the spared nodes, both
replicas Ready): not a measured figure, and on a loaded machine pods sit in ContainerCreating for
minutes (60 s failed there)."""


@dataclass(frozen=True)
class Failover:
    what: str
    seconds: float
    """The last bind before the fault -> the first bind after it."""
    longest: float
    """The longest time without a bind from the last bind before the fault, while watched: the
    failover."""
    before: str
    """The node of the acting replica before the fault."""
    after: str
    """... and once binds went on."""

    def line(self) -> str:
        moved = f"{self.before} -> {self.after}" if self.after != self.before else f"stays on {self.before}"
        return (
            f"{self.what}: failover {self.longest:.1f} s (the longest gap between binds; the last before to"
            f" the first after: {self.seconds:.1f} s); the acting replica {moved}"
        )


@pytest.fixture
async def release(kubeconfig: Path) -> AsyncIterator[Release]:
    tag = uuid.uuid4().hex[:6]
    names = [f"ha-{x}-{tag}" for x in "abc"]
    async with on_new_nodes(kubeconfig, names, Topology.uniform(2, 4, "4Gi")) as release:
        yield release


def kubelet_zones(nodes: dict[str, RealNode], node: str, uid: str) -> list[str] | None:
    """The NUMA zones of the CPUs ``node``'s kubelet gave pod ``uid`` (its checkpoint)."""
    cpus = nodes[node].assigned_cpus(uid)
    return nodes[node].numa_zones([c for each in cpus.values() for c in each]) if cpus else None


async def test_placement_survives_losing_the_acting_replica(
    api: client.ApiClient, namespace: str, release: Release
) -> None:
    await asyncio.to_thread(release.install, "--set", "schedhook.logLevel=debug")  # for extender_lines
    await release.pods_ready(api, RELEASE_PODS, within=240)
    await wait_default_service_account(api, namespace)
    nodes = {node.name: node for node in release.nodes}
    stream = Stream(api, namespace, "toposched", None, seed=36, interval=1.0, lifetime=2.0, cpus=(1, 1, 2, 3))
    stream.zones, stream.force, stream.patience = partial(kubelet_zones, nodes), False, float("inf")  # keep them
    stop = asyncio.Event()
    began = time.monotonic()
    print(f"stream began at {began:.1f} (monotonic)")
    streaming = asyncio.create_task(stream.run(stop, settle=SETTLE))
    try:
        failovers, duration = await scenario(api, release, stream)
    except BaseException:
        print(await asyncio.to_thread(release.debug, namespace))
        raise
    finally:
        stop.set()
        await streaming
    tally = stream.tally(began)
    print({k: v for k, v in tally.items() if k not in ("rejectedPods", "mispredicted")})
    print(f"{len(tally['mispredicted'])} of {tally['running']} running pods on other zones than predicted")
    print(*tally["mispredicted"], sep="\n")
    print(*extender_lines(release, [m["pod"] for m in tally["mispredicted"]][:5]), sep="\n")
    left = await unplaced(api, namespace, stream, began)
    print(*left, sep="\n")
    print(*woken(stream, began), sep="\n")

    goal = duration + 5
    for failover in failovers:
        if "standby" in failover.what:
            assert failover.after == failover.before, failover
            assert failover.longest <= STEADY_GAP, failover
        else:
            assert failover.longest <= goal, (failover, goal)
    assert failovers[-1].after != failovers[-1].before
    assert tally["rejected"] == {}, tally["rejectedPods"]
    assert (tally["blindPasses"], tally["boundTwice"]) == ([], [])
    assert tally["created"] > 30, tally
    # Refused pods are woken once room frees in the extender's view, and those a killed extender
    # refused by the one acting after it. A pod left is failed with what the extender saw of its
    # node each time it refused it, that node's NRT and the stream's pods still there.
    if left:
        state = await node_state(api, namespace, release)
        said = extender_lines(release, [line.split(" ", 1)[0] for line in left])
        print("", *left, *state, *said, sep="\n")
    assert left == [], f"{len(left)} pod(s) of the stream still unbound {SETTLE:.0f} s after it stopped"


def woken(stream: Stream, began: float) -> list[str]:
    """The pods of the stream the extender woke after refusing them, and how long each took to be bound."""
    return [
        f"{r.name} created {r.created - began:.0f} s in, woken, bound {r.bound - r.created:.1f} s after its creation"
        if r.bound is not None
        else f"{r.name} created {r.created - began:.0f} s in, woken, never bound"
        for r in stream.pods.values()
        if r.woken
    ]


def extender_lines(release: Release, pods: list[str]) -> list[str]:
    """What the extenders said of ``pods`` (refused, with their view of the node; woken; bound):
    the debug log of each extender container, kept under .cluster/failover/<namespace>/ too, as
    the nodes go with the test."""
    kept = REPO / ".cluster" / "failover" / release.namespace
    kept.mkdir(parents=True, exist_ok=True)
    out = []
    for node in release.nodes:
        for log in sorted(node.layout.pod_logs.glob(f"{release.namespace}_*/extender/*.log")):
            text = log.read_text(errors="replace")
            (kept / f"{node.name}-{log.parent.parent.name}-{log.name}").write_text(text)
            said = [line for line in text.splitlines() if any(f"/{pod} " in line for pod in pods)]
            out += [f"--- {node.name} {log.parent.parent.name} extender: {len(said)} lines of {', '.join(pods)}"]
            out += said[-30:]
    return [*out, f"(whole extender logs in {kept})"]


async def node_state(api: client.ApiClient, namespace: str, release: Release) -> list[str]:
    """Each node's NRT (CPUs available per zone) and the pods of the stream still on it: what the
    extender saw when it refused the pods left."""
    custom, core, out = client.CustomObjectsApi(api), client.CoreV1Api(api), []
    for node in release.nodes:
        try:
            nrt = await custom.get_cluster_custom_object(
                NodeResourceTopology.GROUP, NodeResourceTopology.VERSION, NodeResourceTopology.PLURAL, node.name
            )
        except client.ApiException as exc:
            out.append(f"{node.name}: NRT {exc.status}")
            continue
        cpus = {
            zone["name"]: next((r.get("available") for r in zone.get("resources") or [] if r["name"] == "cpu"), None)
            for zone in nrt.get("zones") or []
        }
        pods = await core.list_namespaced_pod(namespace, field_selector=f"spec.nodeName={node.name}")
        there = [
            f"{p.metadata.name} {p.status.phase}{' deleting' if p.metadata.deletion_timestamp else ''}"
            for p in pods.items
        ]
        version = nrt["metadata"].get("resourceVersion")
        out.append(f"{node.name}: NRT {version}, CPUs available by zone {cpus}; stream pods there: {there}")
    return out


async def unplaced(api: client.ApiClient, namespace: str, stream: Stream, began: float) -> list[str]:
    """Why each pod of the stream not bound is not (its PodScheduled condition), and its node affinity."""
    core, out = client.CoreV1Api(api), []
    for record in (r for r in stream.pods.values() if r.node is None):
        try:
            pod = await core.read_namespaced_pod(record.name, namespace)
        except client.ApiException as exc:
            out.append(f"{record.name}: {exc.status}")
            continue
        why = [(c.reason, c.message) for c in pod.status.conditions or [] if c.type == "PodScheduled"]
        required = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
        nodes = required.node_selector_terms[0].match_expressions[0].values
        out.append(f"{record.name} created {record.created - began:.0f} s in, for {nodes}: {why}")
    return out


async def scenario(api: client.ApiClient, release: Release, stream: Stream) -> tuple[list[Failover], float]:
    """The faults in turn; the Lease's duration."""
    nodes = {node.name: node for node in release.nodes}
    await narrow(stream, list(nodes))
    lease = await read_lease(api, release)
    duration = float(lease.spec.lease_duration_seconds)
    failovers = []

    acting = acting_node(lease)
    failovers.append(
        await fault(api, release, stream, "kill -9 of the acting extender", extender_killer(nodes[acting]))
    )
    await replicas_ready(api, release, set(nodes))
    acting = acting_node(await read_lease(api, release))
    killer = scheduler_killer(nodes[acting])
    failovers.append(await fault(api, release, stream, "kill -9 of the acting kube-scheduler", killer))
    await replicas_ready(api, release, set(nodes))

    acting = acting_node(await read_lease(api, release))
    standby = next(p.spec.node_name for p in await scheduler_pods(api, release) if p.spec.node_name != acting)
    await narrow(stream, [n for n in nodes if n != standby])
    loss = f"power loss of the standby's node {standby}"
    failovers.append(await fault(api, release, stream, loss, nodes[standby].power_off, watch=duration + 2))
    # As the node lifecycle would (its taint, then eviction once the `unreachable` toleration ran
    # out), sooner: a new standby elsewhere.
    await evict(api, release, standby)
    survivors = {n for n in nodes if n != standby}
    await replicas_ready(api, release, survivors)

    acting = acting_node(await read_lease(api, release))
    await narrow(stream, sorted(survivors - {acting}))
    loss = f"power loss of the acting node {acting}"
    failovers.append(await fault(api, release, stream, loss, nodes[acting].power_off))
    return failovers, duration


async def fault(
    api: client.ApiClient, release: Release, stream: Stream, what: str, act: Callable[[], Any], watch: float = 3.0
) -> Failover:
    """Do ``act`` while the stream binds; wait until binds flow again (``AGAIN`` after it), then
    ``watch`` seconds more. The longest gap between binds from the last before the fault on is the
    failover: a bind under way when the acting replica is lost may still land just after it."""
    before = acting_node(await read_lease(api, release))
    at = time.monotonic()
    print(f"{what} at {at:.1f} (monotonic)", flush=True)
    await asyncio.to_thread(act)

    async def flowing() -> bool:
        return sum(1 for r in stream.pods.values() if r.bound is not None and r.bound > at) >= AGAIN

    await wait_for(flowing, within=90, what=f"binds again after the {what}")
    await asyncio.sleep(watch)
    binds = sorted(r.bound for r in stream.pods.values() if r.bound is not None)
    last = stream.last_bound_before(at) or at
    after = [b for b in binds if b > at]
    gaps = [b - a for a, b in zip([last, *after], after, strict=False)]
    failover = Failover(what, gaps[0], max(gaps), before, acting_node(await read_lease(api, release)))
    print(failover.line(), flush=True)
    return failover


async def narrow(stream: Stream, names: list[str]) -> None:
    """From now on the stream's pods go to ``names``; returns once every pod created before is bound
    (or gone) and one created after is bound."""
    stream.nodes = names
    since = time.monotonic()

    async def settled() -> bool:
        records = list(stream.pods.values())
        older = all(r.node or r.deleted for r in records if r.created < since)
        return older and any(r.node for r in records if r.created >= since)

    await wait_for(settled, within=SETUP_WAIT, what=f"the stream placing pods on {', '.join(names)}")


async def read_lease(api: client.ApiClient, release: Release) -> Any:
    return await client.CoordinationV1Api(api).read_namespaced_lease(LEASE, release.namespace)


def acting_node(lease: Any) -> str:
    """kube-scheduler's identity is ``<hostname>_<uuid>``; a real node's host-network containers
    have its name as hostname."""
    return str(lease.spec.holder_identity).split("_", 1)[0]


def extender_killer(node: RealNode) -> Callable[[], None]:
    def kill() -> None:
        assert node.kill("schedhook", "--scheduler-lease"), f"no extender on {node.name}"

    return kill


def scheduler_killer(node: RealNode) -> Callable[[], None]:
    def kill() -> None:
        assert node.kill("kube-scheduler", "--config="), f"no kube-scheduler on {node.name}"

    return kill


async def scheduler_pods(api: client.ApiClient, release: Release) -> list[Any]:
    pods = (await client.CoreV1Api(api).list_namespaced_pod(release.namespace)).items
    return [p for p in pods if p.metadata.labels.get(COMPONENT) == "scheduler"]


async def replicas_ready(api: client.ApiClient, release: Release, on: set[str]) -> None:
    """Both kube-scheduler replicas Ready (each container with its extender), on nodes of ``on``."""

    async def ready() -> bool:
        pods = [p for p in await scheduler_pods(api, release) if p.spec.node_name in on]
        return len(pods) == 2 and all(is_ready(p) for p in pods)

    await wait_for(ready, within=SETUP_WAIT, what=f"both scheduler replicas Ready on {', '.join(sorted(on))}")


async def evict(api: client.ApiClient, release: Release, node: str) -> None:
    """Cordon ``node`` and force-delete the release's pods on it."""
    core = client.CoreV1Api(api)
    await core.patch_node(node, {"spec": {"unschedulable": True}})
    for pod in (await core.list_namespaced_pod(release.namespace, field_selector=f"spec.nodeName={node}")).items:
        await core.delete_namespaced_pod(pod.metadata.name, release.namespace, grace_period_seconds=0)
