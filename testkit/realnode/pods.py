"""Pod manifests for real nodes (plain dicts: any Kubernetes client accepts them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testkit.realnode.images import WORKLOAD_IMAGE
from testkit.realnode.node import NODE_TOLERATION


def workload_pod(
    name: str,
    *,
    node: str | None = None,
    cpu: str | int | None = None,
    memory: str | None = None,
    hugepages_2mi: str | None = None,
    hugepages_1gi: str | None = None,
    devices: Mapping[str, int] | None = None,
    claims: Mapping[str, str] | None = None,
    containers: int = 1,
    command: list[str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod running :data:`WORKLOAD_IMAGE` that tolerates the real nodes' taint.

    ``node`` binds it directly (skipping the scheduler); ``cpu``/``memory``/hugepages and
    ``devices`` (extended resource -> count, served by the node's device plugin) become both
    requests and limits of every container, so with an integer ``cpu`` and a ``memory`` the pod is
    Guaranteed and the static CPU manager gives each container exclusive CPUs. ``claims`` (the
    pod's claim name -> a ResourceClaimTemplate's name) become the pod's resource claims, each
    used by every container: the DRA devices its node's driver publishes.
    """
    resources: dict[str, str] = {}
    for key, value in (
        ("cpu", cpu),
        ("memory", memory),
        ("hugepages-2Mi", hugepages_2mi),
        ("hugepages-1Gi", hugepages_1gi),
    ):
        if value is not None:
            resources[key] = str(value)
    resources.update({name: str(count) for name, count in (devices or {}).items()})
    container: dict[str, Any] = {"image": WORKLOAD_IMAGE, "imagePullPolicy": "Never"}
    if resources:
        container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    if command:
        container["command"] = command
    if claims:
        container.setdefault("resources", {})["claims"] = [{"name": claim} for claim in claims]
    spec: dict[str, Any] = {
        "containers": [{"name": "app" if containers == 1 else f"app{i}", **container} for i in range(containers)],
        "tolerations": [dict(NODE_TOLERATION)],
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
    }
    if claims:
        spec["resourceClaims"] = [{"name": c, "resourceClaimTemplateName": t} for c, t in claims.items()]
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def scheduled_pod(
    name: str, cpu: int, scheduler: str, candidates: list[str], prefer: str | None = None
) -> dict[str, Any]:
    """A Guaranteed :func:`workload_pod` for ``scheduler`` that may go to ``candidates`` only
    (required node affinity), to ``prefer`` first when it fits (so a scheduler that ignores NUMA
    zones is led to a fragmented node)."""
    body = workload_pod(name, cpu=cpu, memory="256Mi")

    def named(node: str) -> dict[str, Any]:  # a field selector takes one value: one term per node
        return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}

    affinity: dict[str, Any] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [named(n) for n in candidates]}
    }
    if prefer:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [{"weight": 100, "preference": named(prefer)}]
    body["spec"].update(schedulerName=scheduler, affinity={"nodeAffinity": affinity})
    return body
