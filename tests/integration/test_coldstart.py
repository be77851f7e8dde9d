"""The extender's cold start on kwok nodes: it turns Ready only once it has read every node and NRT
there were when it started (streaming lists, parsed as they arrive), and says where its start went."""

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from kubernetes_asyncio import client

from testkit.builders import nrt_body
from testkit.certs import ExtenderPKI
from testkit.cluster import ensure_kwok_node
from testkit.coldstart import cold_start
from toposched.apis.noderesourcetopology import NodeResourceTopology

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crds")]
NRTS = (NodeResourceTopology.GROUP, NodeResourceTopology.VERSION, NodeResourceTopology.PLURAL)
NODES = 40


@pytest.fixture
async def nodes(api: client.ApiClient) -> AsyncIterator[list[str]]:
    """``NODES`` kwok nodes, each with its NRT."""
    tag = uuid.uuid4().hex[:6]
    names = [f"cold-{tag}-{i}" for i in range(NODES)]
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)

    async def one(name: str) -> None:
        await ensure_kwok_node(api, name, {"toposched-test": tag})
        uid = (await core.read_node(name)).metadata.uid
        zones = [{"cpu": (16, 16, 8), "memory": ("64Gi", "60Gi", "30Gi")} for _ in range(2)]
        await custom.create_cluster_custom_object(*NRTS, nrt_body(name, zones, owner_uid=uid))

    await asyncio.gather(*(one(n) for n in names))
    yield names
    await asyncio.gather(*(core.delete_node(n) for n in names), return_exceptions=True)


async def count(list_call: Any) -> int:
    """How many objects a list call's collection holds (raw JSON, a page at a time)."""
    total, token = 0, None
    while True:
        answer = await list_call(limit=1000, _continue=token, _preload_content=False)
        page = orjson.loads(await answer.read())
        total += len(page["items"])
        token = page["metadata"].get("continue")
        if not token:
            return total


async def test_ready_only_after_every_node_and_nrt_is_read(
    kubeconfig: Path, api: client.ApiClient, pki: ExtenderPKI, nodes: list[str], tmp_path: Path
) -> None:
    present = {
        "nodes": await count(client.CoreV1Api(api).list_node),
        "nrts": await count(partial(client.CustomObjectsApi(api).list_cluster_custom_object, *NRTS)),
    }
    assert min(present.values()) >= NODES
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    figures = await cold_start(pki, env, tmp_path / "extender.log", 120)  # as /readyz first said ok
    for kind, before in present.items():  # read in full by the time it said Ready
        assert figures[f"list_objects.{kind}"] >= before, (kind, figures)
    assert figures["seconds.ready"] >= figures["seconds.lists"] >= figures["seconds.list_nrts"] > 0
    lines = [x for x in (tmp_path / "extender.log").read_text().splitlines() if "ready in" in x]
    assert len(lines) == 1, "one line says where the start went"
