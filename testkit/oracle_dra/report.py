"""What a run of the DRA oracle says: a case's lines, the line before the last and the JSON of
``--out``. Pure. The last line and the exit status are every oracle's (``testkit.oracle.runs``).

A case ends judged; not judged, when the scheduler, still running, did not decide on its pod in
time (nothing against toposched, and it fails nothing); or an error, when the case could not run
(an API call refused, the store or the allocator helper not answering), which fails the run.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from typing import Any

from testkit.oracle_dra.compare import KNOWN, Disagreement
from testkit.oracle_dra.observe import CaseRun


def case_lines(run: CaseRun, found: Sequence[Disagreement], verbose: bool) -> list[str]:
    """Printed for an error, a case not judged or a disagreement; for every case with ``verbose``."""
    head = f"{run.case.label} on {run.worker} ({run.namespace}, {run.seconds:.1f}s)"
    if run.error:
        return [f"{head}: ERROR {run.error}", f"    {run.case.describe()}"]
    if run.not_judged:
        return [f"{head}: not judged: {run.not_judged}", f"    {run.case.describe()}"]
    if not found and not verbose:
        return []
    observed = run.observation
    outcome = "?" if observed is None else f"bound to {observed.node}" if observed.node else observed.reason
    lines = [f"{head}: {outcome}; {len(found)} disagreements", f"    {run.case.describe()}"]
    for d in found:
        tag = f"documented: {d.documented}" if d.documented else "UNDOCUMENTED"
        lines.append(f"    [{d.kind}, {tag}] {d.detail}")
    return lines


def outcome_of(run: CaseRun) -> str:
    """What the scheduler did with the case pod: bound, unschedulable or aborted (its error)."""
    observed = run.observation
    if observed is None:
        return run.outcome
    if observed.node:
        return "bound"
    return "aborted" if observed.reason.startswith("SchedulerError") else "unschedulable"


def tally_line(runs: Sequence[CaseRun], disagreements: Sequence[Disagreement], seconds: float) -> str:
    """The line before the last: what the scheduler did, disagreements by kind, cases that could
    not run and cases not judged."""
    outcomes = Counter(outcome_of(r) for r in runs)
    by_kind = Counter(f"{d.kind}/{d.documented or 'undocumented'}" for d in disagreements)
    observed = [(r.observation, r.claims) for r in runs if r.observation is not None]
    devices = sum(len(o.allocations.get(c) or ()) for o, claims in observed for c in claims)
    return (
        f"case pods: {dict(sorted(outcomes.items()))}, {devices} devices allocated, in {seconds:.0f}s; "
        f"disagreements by kind: {dict(sorted(by_kind.items())) or 'none'}; "
        f"cases that could not run: {outcomes.get('error', 0)}; "
        f"cases not judged (the scheduler did not decide in time): {outcomes.get('not judged', 0)}"
    )


def to_json(runs: Sequence[CaseRun], disagreements: Sequence[Disagreement]) -> dict[str, Any]:
    def case_dict(run: CaseRun) -> dict[str, Any]:
        return {
            "case": run.case.number,
            "seed": run.case.seed,
            "worker": run.worker,
            "namespace": run.namespace,
            "describe": run.case.describe(),
            "drawn": run.case.to_dict(),
            "outcome": run.outcome,
            "error": run.error,
            "not_judged": run.not_judged,
            "seconds": round(run.seconds, 2),
            "earlier": run.earlier,
            "allocated_seen": run.allocated_seen,
            "claims": run.claims,
            "prediction": run.prediction.to_dict() if run.prediction is not None else None,
            "observation": dataclasses.asdict(run.observation) if run.observation is not None else None,
        }

    return {
        "cases": [case_dict(r) for r in runs],
        "disagreements": [dataclasses.asdict(d) for d in disagreements],
        "known": [{"id": k.id, "title": k.title} for k in KNOWN],
    }
