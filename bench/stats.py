"""Summaries of repeated measurements: median with min and max, percentiles."""

import statistics
from collections.abc import Sequence
from typing import Any


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of a few runs' figures (the report prints them as ``median (min-max)``)."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summary(values: Sequence[float], unit: str) -> dict[str, Any]:
    ordered = sorted(values)
    return {
        "unit": unit,
        "n": len(ordered),
        "median": statistics.median(ordered),
        "min": ordered[0],
        "max": ordered[-1],
        "p99": percentile(ordered, 99),
    }


def percentile(ordered: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not ordered:
        raise ValueError("no values")
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def fit_line(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares line through ``points`` (x, y): (slope, intercept); None below two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return slope, my - slope * mx
