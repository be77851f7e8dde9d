"""The largest NodeResourceTopology the CRD accepts, and a writer that keeps changing it.

The CRD (``crds/topology.node.k8s.io_noderesourcetopologies.yaml``, the figures of
``toposched.apis.limits``) allows 128 zones, a distance to each of the 128 zones in every zone and
64 resources per zone; the apiserver takes all of it at once (about 1.3 MB as a request, a watch
event of about 2 MB with its managed fields), far above the 512 KiB a line-reading client gives up
at. ``changing`` writes one such object again and again, as a busy exporter of a huge machine would.

    body = largest_nrt("huge-1", owner_uid=uid)
    await changing(api, "huge-1", interval=0.1, stop=event, written=times)   # appends each write's time
"""

import asyncio
import contextlib
import time
from typing import Any

from kubernetes_asyncio import client

from testkit.builders import Figures, nrt_body
from toposched.apis.limits import MAX_ZONE_RESOURCES, MAX_ZONES
from toposched.apis.noderesourcetopology import NodeResourceTopology

NRTS = (NodeResourceTopology.GROUP, NodeResourceTopology.VERSION, NodeResourceTopology.PLURAL)
DEVICES = MAX_ZONE_RESOURCES - 2
"""Device resources per zone beside cpu and memory."""


def largest_nrt(name: str, owner_uid: str | None = None) -> dict[str, Any]:
    """128 zones of 64 CPUs, 256 GiB and 62 device resources, with a full distance table."""
    zone: dict[str, Figures] = {"cpu": (64, 64, 32), "memory": ("256Gi", "250Gi", "200Gi")}
    zone |= {f"example.com/device-{i:02d}": (8, 8, 4) for i in range(DEVICES)}
    distances = [[10 if i == j else 11 + (i + j) % 200 for j in range(MAX_ZONES)] for i in range(MAX_ZONES)]
    # A machine of more than 8 NUMA nodes runs its Topology Manager only with max-allowable-numa-nodes.
    options = {"topologyManagerPolicyOptions": f"max-allowable-numa-nodes={MAX_ZONES}"}
    return nrt_body(name, [zone] * MAX_ZONES, distances=distances, owner_uid=owner_uid, attributes=options)


async def changing(
    api: client.ApiClient, name: str, interval: float, stop: asyncio.Event, written: list[float]
) -> None:
    """Change NRT ``name`` (one free amount, in turn in every zone) every ``interval`` seconds, or as
    often as the apiserver takes the writes when they last longer, until ``stop`` is set; appends
    to ``written`` when each write was accepted (monotonic). A write the apiserver fails (5xx) is
    not counted."""
    custom = client.CustomObjectsApi(api)
    step = 0
    while not stop.is_set():
        began = time.monotonic()
        path = f"/zones/{step % MAX_ZONES}/resources/0/available"
        patch = [{"op": "replace", "path": path, "value": str(step % 64)}]
        step += 1
        try:
            await custom.patch_cluster_custom_object(*NRTS, name, patch, _content_type="application/json-patch+json")
        except client.ApiException as exc:
            if exc.status < 500:
                raise
            continue  # the apiserver gave up on it (504 after a minute on a busy machine): the next one
        written.append(time.monotonic())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, interval - (time.monotonic() - began)))
