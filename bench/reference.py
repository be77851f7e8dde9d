"""The reference results (``docs/benchmarks/results.json``): the latest run of each section.

A run of ``python -m bench`` measures some sections (``--only``); merged into the reference, it
replaces those and keeps every other, each with the run it came from (date, quick or full,
versions, machine, seconds), so the report rendered from the reference is the latest run of
every section and says when each was made.

Shape: ``{"sections": {name: {"run": {...}, "figures": {figure name: ...}}}}``.
"""

import json
from pathlib import Path
from typing import Any

SECTIONS = ("components", "extender", "numa", "devices", "dra", "smt", "network", "scale")
"""Every section, in the order ``--only`` names them and the reference keeps them."""


def empty() -> dict[str, Any]:
    return {"sections": {}}


def load(path: Path) -> dict[str, Any]:
    """The reference at ``path`` (none yet: empty)."""
    return json.loads(path.read_text()) if path.exists() else empty()


def dump(results: dict[str, Any]) -> str:
    return json.dumps(results, indent=1) + "\n"


def merge(reference: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """``reference`` with the sections ``run`` measured replaced by the run's."""
    merged = {**reference.get("sections", {}), **run.get("sections", {})}
    return {"sections": {name: merged[name] for name in SECTIONS if name in merged}}


def figures(results: dict[str, Any]) -> dict[str, Any]:
    """Every section's figures in one mapping, by figure name (the report's sections read them so)."""
    out: dict[str, Any] = {}
    for section in results.get("sections", {}).values():
        out.update(section["figures"])
    return out


def run_of(results: dict[str, Any], section: str) -> dict[str, Any] | None:
    """The run ``section`` comes from (None: never run)."""
    entry = results.get("sections", {}).get(section)
    return entry["run"] if entry else None
