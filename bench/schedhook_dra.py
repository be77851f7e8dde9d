"""Extender hot path with DRA pods: filter + prioritize over HTTPS at N nodes with 8 GPUs each in
2 pools (4 per NUMA zone), a pod asking one GPU through a ResourceClaim beside 4 pinned CPUs,
against the same pod without a claim, side by side in one run on one extender.

The cluster changes underneath as in the extender section (NRT updates and bind reservations at
``schedhook.CHURN_PER_SECOND``), and the devices too: between two pods one more claim is
allocated a GPU somewhere, as the binds before it would have done. Each pod has a claim of its
own (a Deployment's pods have one each from their template), all of one shape.
"""

import asyncio
import copy
import gc
import random
import tempfile
from pathlib import Path
from typing import Any

from bench.schedhook import _over_http
from bench.stats import summary
from testkit.builders import claim_body, deviceclass_body, gpu_slice_body, pod_body, with_claim
from testkit.certs import extender_pki
from testkit.extender import in_process
from testkit.nrt import nrt
from testkit.schedstack import bin_dir
from toposched.schedhook.extender.coordinator import Coordinator

DRIVER = "gpu.bench.example"
GPUS_PER_POOL = 4


def gpu_slices(node: str) -> list[dict[str, Any]]:
    """Two pools of 4 GPUs, one per NUMA zone."""
    return [
        gpu_slice_body(
            f"{node}-{zone}",
            node,
            DRIVER,
            [(f"gpu-{zone * GPUS_PER_POOL + i}", zone) for i in range(GPUS_PER_POOL)],
            pool=f"{node}-{zone}",
        )
        for zone in (0, 1)
    ]


def claim(name: str, allocated: tuple[str, str] | None = None) -> dict[str, Any]:
    """A claim of one GPU; ``allocated``: (pool, device) it holds."""
    held = (DRIVER, *allocated) if allocated is not None else None
    return claim_body(name, DRIVER, namespace="default", allocated=held)


def gpu_pod(i: int, claimed: bool) -> dict[str, Any]:
    pod = pod_body(f"p{i}", namespace="default", uid=f"u{i}", cpu=4, memory="8Gi")
    return with_claim(pod, claim=f"c{i}") if claimed else pod


async def _device_churn(coordinator: Coordinator, names: list[str], rng: random.Random) -> None:
    """A GPU allocated somewhere between two pods, as binds do."""
    store = coordinator.view.store
    n = 0
    while True:
        await asyncio.sleep(0.02)
        n += 1
        node = rng.choice(names)
        zone = rng.randint(0, 1)
        device = f"gpu-{zone * GPUS_PER_POOL + rng.randrange(GPUS_PER_POOL)}"
        store.event("resourceclaims", "ADDED", claim(f"bound-{n}", (f"{node}-{zone}", device)))


async def _measure(coordinator: Coordinator, bodies: list[dict[str, Any]], repeats: int, pki: Any) -> list[float]:
    names = list(bodies[0]["NodeNames"])
    churn = asyncio.create_task(_device_churn(coordinator, names, random.Random(9)))
    try:
        pairs, _ = await _over_http(coordinator, bodies, repeats, pki)
    finally:
        churn.cancel()
    return [f + p for f, p in pairs]


def run(nodes: int = 1000, repeats: int = 200, allocator: str = "") -> dict[str, Any]:
    rng = random.Random(4)
    nrts = [nrt(f"n{i}", rng) for i in range(nodes)]
    for i, body in enumerate(nrts):
        body["metadata"]["resourceVersion"] = str(i)
    names = sorted(b["metadata"]["name"] for b in nrts)
    claims = [claim(f"c{i}") for i in range(repeats + 3)]
    objects = {
        "nrts": nrts,
        "resourceslices": [s for n in names for s in gpu_slices(n)],
        "deviceclasses": [deviceclass_body(DRIVER)],
        "resourceclaims": claims,
    }
    coordinator = in_process(objects, dra_allocator=allocator or str(bin_dir() / "toposched-dra-allocate"))
    coordinator.warm()
    gc.collect()
    gc.freeze()
    pki = extender_pki(Path(tempfile.mkdtemp(prefix="toposched-bench-pki-")))

    def bodies(claimed: bool) -> list[dict[str, Any]]:
        return [{"Pod": gpu_pod(i, claimed), "NodeNames": names} for i in range(repeats + 3)]

    async def both() -> tuple[list[float], list[float]]:
        plain = await _measure(coordinator, copy.deepcopy(bodies(False)), repeats, pki)
        dra = await _measure(coordinator, bodies(True), repeats, pki)
        await coordinator.devices.close()
        return plain, dra

    plain, dra = asyncio.run(both())
    p99 = summary(dra, "ms")["p99"] - summary(plain, "ms")["p99"]
    return {
        "nodes": nodes,
        "gpus_per_node": 2 * GPUS_PER_POOL,
        "pools_per_node": 2,
        "filter_and_prioritize_ms": summary(plain, "ms"),
        "filter_and_prioritize_dra_ms": summary(dra, "ms"),
        "p99_added_ms": round(p99, 2),
        "samples_ms": {"plain": plain, "dra": dra},
    }


if __name__ == "__main__":
    import json
    import sys

    found = run(*(int(a) for a in sys.argv[1:3]), *sys.argv[3:4])  # type: ignore[arg-type]
    found.pop("samples_ms")
    print(json.dumps(found, indent=2))
