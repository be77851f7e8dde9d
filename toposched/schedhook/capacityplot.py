"""``toposched capacity --plot``: nodes x NUMA zones, as heatmaps side by side.

Per zone the free CPUs, memory (GiB) and devices, then per shape the copies that would use the
zone. Blind nodes (NUMA knowledge missing, stale or unreadable) are grey and marked with a red
cross: their capacity is unknown. matplotlib is an optional dependency (``toposched[plot]``).
"""

import math
from decimal import Decimal
from pathlib import Path
from typing import Any

from toposched.schedhook.capacityreport import CapacityInputError, Result
from toposched.schedhook.placement.kubelet.claims import device

GIB = Decimal(1024**3)
LABELLED_NODES = 60
"""Up to this many nodes each row is labelled with its name."""
ANNOTATED_CELLS = 400
"""Up to this many cells each shows its value."""


def panels(result: Result) -> list[tuple[str, list[list[float]]]]:
    """(title, [node][zone] values, NaN where the node has no such zone or its value is unknown)."""
    width = max((len(nrt.zones) for nrt in result.snapshot.nrts.values()), default=1) or 1
    blind = {f.node for c in result.shapes for f in c.unknown}

    def grid(value: Any, known_only: bool = False) -> list[list[float]]:
        rows = []
        for name in result.nodes:
            nrt = result.snapshot.nrts.get(name)
            zones = [] if nrt is None or (known_only and name in blind) else sorted(nrt.zones, key=lambda z: z.numa)
            row = [float(value(name, z)) for z in zones]
            rows.append(row + [math.nan] * (width - len(row)))
        return rows

    out = [
        ("free CPUs", grid(lambda _, z: z.available.get("cpu", 0))),
        ("free memory (GiB)", grid(lambda _, z: z.available.get("memory", Decimal(0)) / GIB)),
        ("free devices", grid(lambda _, z: sum((q for r, q in z.available.items() if device(r)), Decimal(0)))),
    ]
    for c in result.shapes:
        fits = {f.node: f for f in c.nodes}
        out.append((f"{c.shape.name}: copies", grid(lambda n, z, fits=fits: fits[n].zones.get(z.numa, 0), True)))
    return out


def plot(result: Result, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        raise CapacityInputError("--plot needs matplotlib (pip install 'toposched[plot]')") from None
    drawn = panels(result)
    nodes = result.nodes
    height = min(60.0, 1.5 + 0.22 * len(nodes))
    figure, axes = plt.subplots(1, len(drawn), figsize=(2.4 * len(drawn) + 2, height), sharey=True, squeeze=False)
    unknown = {f.node for c in result.shapes for f in c.unknown}
    blind = [i for i, n in enumerate(nodes) if n in unknown]
    for ax, (title, values) in zip(axes[0], drawn, strict=True):
        cmap = matplotlib.colormaps["viridis"].with_extremes(bad="lightgrey")
        image = ax.imshow(values, aspect="auto", interpolation="nearest", cmap=cmap)
        figure.colorbar(image, ax=ax, shrink=0.6)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("NUMA zone")
        ax.set_xticks(range(len(values[0]) if values else 0))
        if len(nodes) * len(values[0]) <= ANNOTATED_CELLS:
            for (row, col), value in ((rc, v) for rc, v in _cells(values) if not math.isnan(v)):
                ax.text(col, row, f"{value:g}", ha="center", va="center", fontsize=7, color="white")
        if blind:
            ax.scatter([-0.45] * len(blind), blind, marker="x", color="red", s=30, clip_on=False)
    if len(nodes) <= LABELLED_NODES:
        axes[0][0].set_yticks(range(len(nodes)), nodes, fontsize=7)
    else:
        axes[0][0].set_ylabel(f"{len(nodes)} nodes (by name)")
    figure.suptitle("toposched capacity: red x = blind node (capacity unknown)", fontsize=10)
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=100)
    except OSError as exc:
        raise CapacityInputError(f"{path}: {exc.strerror or exc}") from None
    finally:
        plt.close(figure)


def _cells(values: list[list[float]]) -> list[tuple[tuple[int, int], float]]:
    return [((r, c), v) for r, row in enumerate(values) for c, v in enumerate(row)]
