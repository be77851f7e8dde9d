"""The DRA oracle's kwok nodes: a few per worker, labelled with the worker's name and tainted so
that no other pod lands there. kwok keeps them Ready and runs every pod bound to them (no
container, nothing to prepare): which devices a pod gets is the scheduler's alone to decide."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any

from testkit.builders import node_body
from testkit.oracle_dra.objects import LABEL
from toposched.kube import rest

NODES = rest.path("", "v1", "nodes")


def worker_nodes(prefix: str, worker: int, count: int) -> list[str]:
    return [f"{prefix}-{worker}-{i}" for i in range(count)]


async def ensure_nodes(api: rest.Kube, worker: str, names: Sequence[str], within: float = 60.0) -> None:
    """Create the worker's nodes (kept when they exist) and wait until kwok has them Ready."""
    for name in names:
        body = node_body(
            name,
            labels={LABEL: worker, "kubernetes.io/hostname": name, "type": "kwok"},
            annotations={"node.alpha.kubernetes.io/ttl": "0"},
            allocatable={"cpu": "64", "memory": "256Gi", "pods": "250"},
            kwok=True,
        )
        body["spec"] = {"taints": [{"key": LABEL, "value": worker, "effect": "NoSchedule"}]}
        try:
            await api.create(NODES, body)
        except rest.ApiError as exc:
            if exc.status != 409:
                raise
    deadline = time.monotonic() + within
    while not all([_ready(await api.get(f"{NODES}/{name}")) for name in names]):
        if time.monotonic() > deadline:
            raise TimeoutError(f"kwok nodes {', '.join(names)} not Ready in {within:.0f}s")
        await asyncio.sleep(0.2)


async def remove_nodes(api: rest.Kube, names: Sequence[str]) -> None:
    for name in names:
        with contextlib.suppress(rest.ApiError):
            await api.delete(f"{NODES}/{name}")


def _ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
