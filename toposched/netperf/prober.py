"""The prober's I/O: run netperf, read the nodes, merge results into the ConfigMap."""

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from toposched.apis.constants import ZONE_LABEL
from toposched.apis.netperf import latency_key, timestamp_key
from toposched.kube.nodeclient import ApiError, KubeAPI
from toposched.netperf.plan import Latency, NodeAddress, Probe, parse_output

logger = logging.getLogger(__name__)


async def measure(probe: Probe, seconds: float, control_port: int, data_port: int, netperf: str = "netperf") -> Latency:
    """One TCP_RR run of the real netperf against the netserver at ``probe.address``."""
    proc = await asyncio.create_subprocess_exec(
        netperf,
        "-H",
        probe.address,
        "-p",
        str(control_port),
        "-t",
        "TCP_RR",
        "-l",
        str(seconds),
        "-P",
        "0",
        "--",
        "-P",
        f",{data_port}",
        "-o",
        "P50_LATENCY,P90_LATENCY,P99_LATENCY",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=seconds + 20)
    except TimeoutError:
        proc.kill()
        raise
    text = out.decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"netperf to {probe.destination} ({probe.address}) failed: {text.strip()[-300:]}")
    return parse_output(text)


async def list_nodes(api: KubeAPI, selector: str = "") -> list[NodeAddress]:
    nodes = await api.request("GET", "/api/v1/nodes", **({"labelSelector": selector} if selector else {}))
    found = []
    for node in nodes["items"]:
        addresses = {a["type"]: a["address"] for a in node.get("status", {}).get("addresses") or []}
        found.append(
            NodeAddress(
                name=node["metadata"]["name"],
                address=addresses.get("InternalIP") or addresses.get("ExternalIP"),
                zone=(node["metadata"].get("labels") or {}).get(ZONE_LABEL),
            )
        )
    return found


def configmap_entries(probe: Probe, latency: Latency, when: datetime) -> dict[str, str]:
    entries = {latency_key(pct, probe.origin, probe.destination): str(ms) for pct, ms in latency.milliseconds().items()}
    entries[timestamp_key(probe.origin, probe.destination)] = when.isoformat(timespec="seconds").replace("+00:00", "Z")
    return entries


async def merge_into_configmap(api: KubeAPI, namespace: str, name: str, entries: dict[str, str]) -> None:
    """Add or update our keys only; other keys of the ConfigMap are never touched."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    merge = "application/merge-patch+json"
    try:
        await api.request("PATCH", f"{path}/{name}", {"data": entries}, content_type=merge)
    except ApiError as exc:
        if exc.status != 404:
            raise
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": entries}
        try:
            await api.request("POST", path, body)
        except ApiError as again:
            if again.status != 409:  # another prober created it first: merge into theirs
                raise
            await api.request("PATCH", f"{path}/{name}", {"data": entries}, content_type=merge)


async def probe_round(
    api: KubeAPI,
    probes: Sequence[Probe],
    namespace: str,
    configmap: str,
    seconds: float,
    control_port: int,
    data_port: int,
) -> int:
    """Measure every probe once (one at a time, so runs do not disturb each other); returns successes."""
    done = 0
    for probe in probes:
        try:
            latency = await measure(probe, seconds, control_port, data_port)
        except (RuntimeError, ValueError, TimeoutError, OSError) as exc:
            logger.warning("probe %s -> %s: %s", probe.origin, probe.destination, exc)
            continue
        entries = configmap_entries(probe, latency, datetime.now(UTC))
        await merge_into_configmap(api, namespace, configmap, entries)
        logger.info(
            "%s -> %s: p50 %.0f us, p90 %.0f us, p99 %.0f us",
            probe.origin,
            probe.destination,
            latency.p50_us,
            latency.p90_us,
            latency.p99_us,
        )
        done += 1
    return done
