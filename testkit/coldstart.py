"""The extender's cold start as a local process: spawn ``toposched schedhook`` alone, wait for
/readyz, and read where its start went (the ``toposched_extender_start_*`` gauges) at that moment."""

import asyncio
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from testkit.certs import ExtenderPKI
from testkit.cluster import free_port
from testkit.extender import ready, schedhook_tls_args
from testkit.paths import REPO

START = "toposched_extender_start_"


class NotReadyError(RuntimeError):
    """The extender did not turn Ready in the time allowed (or exited)."""


def start_figures(text: str) -> dict[str, float]:
    """``toposched_extender_start_*`` samples of a /metrics page, keyed ``metric{labels}`` without
    the prefix (``seconds{step="list_nodes"}`` -> ``seconds.list_nodes``)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(START):
            continue
        name, value = line.rsplit(" ", 1)
        metric, _, labels = name.removeprefix(START).partition("{")
        label = labels.rstrip("}").partition('="')[2].rstrip('"')
        out[f"{metric}.{label}" if label else metric] = float(value)
    return out


async def cold_start(
    pki: ExtenderPKI, env: dict[str, str], log: Path, within: float, source: Path = REPO
) -> dict[str, float]:
    """One cold start of the extender alone (the code in ``source``, against the cluster of
    ``env``'s KUBECONFIG): seconds from spawning it to /readyz, the machine's load then, and the
    breakdown as /readyz first said ok. Raises NotReadyError past ``within`` seconds."""
    port, metrics = free_port(), free_port()
    args = [sys.executable, "-m", "toposched", "schedhook", "--address", "127.0.0.1", "--port", str(port)]
    args += ["--metrics-port", str(metrics), "--no-remediation", "--no-controllers", *schedhook_tls_args(pki)]
    started = time.monotonic()
    proc = _spawn(args, source, env, log)
    try:
        while not await asyncio.to_thread(ready, port, pki):
            if time.monotonic() - started > within or proc.poll() is not None:
                raise NotReadyError(f"the extender was not ready within {within:.0f} s; see {log}")
            await asyncio.sleep(0.05)
        spawned_to_ready = time.monotonic() - started
        page = await asyncio.to_thread(_get, f"http://127.0.0.1:{metrics}/metrics")
        # The machine's load when it turned Ready: on shared cores, the lists wait for CPU.
        load = os.getloadavg()[0]
        return {"spawn_to_ready": round(spawned_to_ready, 2), "load_1m": load, **start_figures(page)}
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _spawn(args: list[str], source: Path, env: dict[str, str], log: Path) -> "subprocess.Popen[bytes]":
    """``args`` run from ``source``: its ``toposched`` is the one imported."""
    with log.open("wb") as out:
        return subprocess.Popen(args, cwd=source, env=env, stdout=out, stderr=subprocess.STDOUT)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read().decode())
