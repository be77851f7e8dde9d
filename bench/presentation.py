"""What the report calls each scheduler under test, its colour in the plots, how a figure of
repeated runs is written and how a plot is saved."""

from pathlib import Path
from typing import Any

LABELS = {
    "plain": "kube-scheduler alone",
    "toposched": "+ toposched (default: MostAllocated)",
    "toposched-spread": "+ toposched (LeastAllocated)",
    "toposched-balanced": "+ toposched (BalancedAllocation)",
    "toposched-least-numa": "+ toposched (LeastNUMANodes)",
    "toposched-strict": "+ toposched, DRA alignment strict",
    "toposched-prefer": "+ toposched, DRA alignment prefer",
    "toposched-off": "+ toposched, DRA alignment off",
    "toposched-strict-pinned": "+ toposched, DRA alignment strict, claims pinned",
    "sp-numa": "scheduler-plugins (NodeResourceTopologyMatch)",
    "sp-network": "scheduler-plugins (TopologicalSort + NetworkOverhead)",
}
COLORS = {
    "plain": "#9e9e9e",
    "toposched": "#1f77b4",
    "toposched-spread": "#2ca02c",
    "toposched-balanced": "#9467bd",
    "toposched-least-numa": "#8c564b",
    "toposched-strict": "#1f77b4",
    "toposched-prefer": "#17becf",
    "toposched-off": "#bcbd22",
    "sp-numa": "#d62728",
    "sp-network": "#d62728",
}


def ranged(v: dict[str, float], fmt: str = "{:g}") -> str:
    """``median (min-max)`` of a figure of repeated runs (``bench.stats.spread``)."""
    return f"{fmt.format(v['median'])} ({fmt.format(v['min'])}-{fmt.format(v['max'])})"


def save(fig: Any, ax: Any, path: Path, xlabel: str, ylabel: str, xscale: str, **scale: float) -> None:
    """Labels ``ax`` of ``fig`` (``xscale`` with its ``scale`` arguments) and writes the plot to ``path``."""
    ax.set_xscale(xscale, **scale)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
