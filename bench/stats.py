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
