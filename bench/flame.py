"""Where the extender's time goes under load: flame graphs of a backlog, sampled by py-spy.

One toposched backlog on kwok nodes with raised client limits (as the throughput goals are judged),
py-spy sampling the extender process while the pods bind. Out come one flame graph (SVG) per path --
filter, prioritize, bind, and the whole process -- and the shares of the samples by where they were
(``SHARES``), which the report shows beside them. py-spy comes with the dev extra and needs ptrace
rights over the extender (root, or a ptrace scope of 0); without them the section says so.

``python -m bench.flame NODES PODS OUT_DIR``.
"""

import asyncio
import html
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.harness import RAISED_LIMITS, Bound, Harness, NodeSpec, SetupError
from bench.throughput import bench_pod, rate
from testkit.nrt import nrt

RATE = 250
"""Samples per second."""
PATHS = {"filter": "Extender.filter", "prioritize": "Extender.prioritize", "bind": "Extender.bind"}
"""The flame graphs drawn apart: the stacks through each handler, from it up."""
SHARES = {
    "filter": ("Extender.filter",),
    "prioritize": ("Extender.prioritize",),
    "bind": ("Extender.bind",),
    "placement (evaluate)": ("evaluate",),
    "binding call to the apiserver": ("Binder._post",),
    "TLS handshakes": ("SSLProtocol._do_handshake",),
    "TLS reads and writes": ("SSLProtocol._do_read", "SSLProtocol._do_write", "SSLProtocol._process_outgoing"),
    "socket writes": ("_SelectorSocketTransport.write",),
    "watch events": ("ObjectStore.event",),
}
"""Shares of the samples whose stack holds one of the functions. Idle threads (waiting on a socket,
a lock or a timer) are not sampled; a thread waiting for a core is, where it was preempted."""
WIDTH, ROW = 1200, 16


def py_spy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return found if Path(found).exists() else None


def stacks(raw: str) -> Counter[tuple[str, ...]]:
    """py-spy's collapsed stacks (``a;b;c N`` per line), each frame reduced to its function."""
    out: Counter[tuple[str, ...]] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            out[tuple(frame.split(" (")[0] for frame in stack.split(";"))] += int(count)
    return out


def shares(sampled: Counter[tuple[str, ...]]) -> dict[str, float]:
    """Per entry of ``SHARES``, the fraction of the samples whose stack holds one of its functions."""
    total = sum(sampled.values()) or 1
    return {
        name: round(sum(n for s, n in sampled.items() if any(f.startswith(w) for f in s for w in where)) / total, 3)
        for name, where in SHARES.items()
    }


def rooted(sampled: Counter[tuple[str, ...]], function: str) -> Counter[tuple[str, ...]]:
    """The stacks through ``function``, cut to start at it."""
    out: Counter[tuple[str, ...]] = Counter()
    for stack, n in sampled.items():
        if function in stack:
            out[stack[stack.index(function) :]] += n
    return out


def svg(sampled: Counter[tuple[str, ...]], title: str) -> str:
    """A flame graph: a frame's width is its share of the samples, callers below their callees."""
    total = sum(sampled.values()) or 1
    depth = max((len(s) for s in sampled), default=0)
    height = (depth + 2) * ROW
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="monospace" '
        f'font-size="11"><text x="4" y="12">{html.escape(title)} ({total} samples)</text>'
    ]
    _frames(parts, sorted(sampled.items()), 0, 0.0, total, height)
    parts.append("</svg>")
    return "\n".join(parts)


def _frames(
    parts: list[str], items: Iterable[tuple[tuple[str, ...], int]], level: int, x: float, total: int, height: int
) -> None:
    groups: dict[str, list[tuple[tuple[str, ...], int]]] = {}
    for stack, n in items:
        if len(stack) > level:
            groups.setdefault(stack[level], []).append((stack, n))
    for function, members in groups.items():
        count = sum(n for _, n in members)
        width = WIDTH * count / total
        y = height - (level + 1) * ROW
        if width >= 0.5:
            shown = html.escape(function)
            hue = 20 + zlib.crc32(function.encode()) % 40  # the same colour run after run
            parts.append(
                f"<g><title>{shown} ({count} samples, {100 * count / total:.1f}%)</title>"
                f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{ROW - 1}" fill="hsl({hue},85%,60%)"/>'
                + (f'<text x="{x + 2:.1f}" y="{y + 11}">{shown[: int(width / 7)]}</text>' if width > 30 else "")
                + "</g>"
            )
            _frames(parts, members, level + 1, x, total, height)
        x += width


async def _measure(kubeconfig: Path, nodes: int, pods: int, out: Path) -> dict[str, Any]:
    spy = py_spy()
    if spy is None:
        raise SetupError("py-spy is not installed (pip install -e '.[dev]')")
    tag = uuid.uuid4().hex[:6]
    rng = random.Random(7)
    specs = [
        NodeSpec(f"fl-{tag}-{i:04d}", {"cpu": "64", "memory": "256Gi", "pods": "250"}, nrt=nrt("", rng))
        for i in range(nodes)
    ]
    async with Harness(kubeconfig, Path(tempfile.mkdtemp(prefix="toposched-flame-"))) as h:
        h.limits = RAISED_LIMITS
        await h.create_nodes(specs, tag)
        namespace = f"flame-{tag}"
        try:
            await h.namespace(namespace)
            await h.create_pods(namespace, [bench_pod(i, "toposched", tag) for i in range(pods)])
            binds: dict[str, Bound] = {}
            watcher = asyncio.create_task(h.watch_binds(namespace, pods, 900, binds))
            await h.start_toposched()
            (extender,) = [p for p in h.processes if "schedhook" in p.args]  # type: ignore[operator]
            raw = out / "flame-extender.txt"
            record = [spy, "record", "--pid", str(extender.pid), "--rate", str(RATE)]
            sampler = subprocess.Popen(  # noqa: ASYNC220 -- started once, and it must outlive this await
                [*record, "--format", "raw", "--output", str(raw), "--nonblocking"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            sampling = time.monotonic()
            await watcher
            seconds = time.monotonic() - sampling
            sampler.send_signal(2)  # py-spy writes what it has on SIGINT
            _, err = await asyncio.to_thread(sampler.communicate, None, 60)
            if not raw.exists():
                raise SetupError(f"py-spy wrote nothing: {err.decode(errors='replace').strip()[-300:]}")
        finally:
            h.stop_all()
            await h.delete_namespace(namespace)
            await h.delete_nodes(s.name for s in specs)
    sampled = stacks(raw.read_text())
    raw.unlink()
    # py-spy samples running threads only: every sample is a busy one, the waits are not in it
    graphs = {"extender": svg(sampled, f"toposched extender, {pods}-pod backlog at {nodes} nodes, busy samples")}
    for name, function in PATHS.items():
        graphs[name] = svg(rooted(sampled, function), f"{function}, {pods}-pod backlog at {nodes} nodes")
    files = {}
    for name, text in graphs.items():
        path = out / f"flame-{name}.svg"
        path.write_text(text)
        files[name] = path.name
    return {
        "nodes": nodes,
        "pods": pods,
        "pods_per_second": round(rate(binds), 1),
        "rate": RATE,
        "samples": sum(sampled.values()),
        "cores_busy": round(sum(sampled.values()) / (RATE * seconds), 2),
        "shares": shares(sampled),
        "files": files,
    }


def run(kubeconfig: Path, nodes: int, pods: int, out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    return asyncio.run(_measure(kubeconfig, nodes, pods, out))


if __name__ == "__main__":
    import json

    from testkit.paths import REPO

    size, backlog = (int(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (1000, 1000)
    where = Path(sys.argv[3]) if len(sys.argv) > 3 else REPO / "docs" / "benchmarks"
    print(json.dumps(run(REPO / ".cluster" / "kubeconfig", size, backlog, where), indent=2))
