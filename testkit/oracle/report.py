"""What a run of the oracle says: the lines of a case, the two closing lines, the JSON of ``--out``
and the exit status. Pure.

A case ends one of three ways (``CaseRun.outcome``): judged to its end; not judged, when the
kubelet, still running, did not decide on a pod in time (its hint merge on a machine of many
zones, see ``deadline``), which says nothing against toposched and fails nothing; or an error,
when the case could not run (a node that did not start, a kubelet that died, a PodResources
stream cut), which fails the run. The pods judged before a case ended are compared all the same.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from testkit.oracle import runs as oracle_runs
from testkit.oracle.compare import KNOWN, Disagreement
from testkit.oracle.observe import CaseRun

EXIT_AGREED = oracle_runs.EXIT_AGREED
EXIT_UNDOCUMENTED = oracle_runs.EXIT_UNDOCUMENTED
EXIT_FAILED = oracle_runs.EXIT_FAILED


def case_lines(run: CaseRun, found: Sequence[Disagreement], verbose: bool) -> list[str]:
    """What is printed for a case: always for an error, a case not judged or a disagreement; for
    every case with ``verbose``."""
    if run.error:
        return [f"{run.case.label} on {run.node}: ERROR {run.error}", f"    {run.case.describe()}"]
    if not found and not verbose and not run.not_judged:
        return []
    judged = [s.observation for s in run.steps if s.observation is not None]
    pods = f"{len(judged)} pods ({sum(1 for o in judged if o.admit)} admitted)"
    tally = f"{len(found)} disagreements, {run.seconds:.1f}s"
    head = f"not judged: {run.not_judged}; {pods} judged before it, {tally}" if run.not_judged else f"{pods}, {tally}"
    lines = [f"{run.case.label} on {run.node}: {head}", f"    {run.case.describe()}"]
    for d in found:
        tag = f"documented: {d.documented}" if d.documented else "UNDOCUMENTED"
        spec = json.dumps(next(s.spec for s in run.steps if s.index == d.pod), separators=(",", ":"))
        lines += [f"    pod {d.pod} [{d.kind}, {tag}] {d.detail}", f"      {spec}"]
    return lines


def tally_line(runs: Sequence[CaseRun], disagreements: Sequence[Disagreement], seconds: float) -> str:
    """The line before the last: pods judged, disagreements by kind, cases that could not run and
    cases not judged."""
    pods = sum(1 for r in runs for s in r.steps if s.observation is not None)
    by_kind = Counter(f"{d.kind}/{d.documented or 'undocumented'}" for d in disagreements)
    errors = sum(1 for r in runs if r.outcome == "error")
    not_judged = sum(1 for r in runs if r.outcome == "not judged")
    return (
        f"{pods} pods judged by kubelets in {seconds:.0f}s; "
        f"disagreements by kind: {dict(sorted(by_kind.items())) or 'none'}; cases that could not run: {errors}; "
        f"cases not judged (the kubelet did not decide in time): {not_judged}"
    )


def last_line(runs: Sequence[CaseRun], disagreements: Sequence[Disagreement]) -> str:
    """The run's last line, exactly so: ``make oracle`` and the tests read it."""
    return oracle_runs.summary("oracle", len(runs), disagreements)


def exit_status(runs: Sequence[CaseRun], disagreements: Sequence[Disagreement]) -> int:
    """2 when a case could not run, else 1 when a disagreement is undocumented, else 0; a case not
    judged changes nothing."""
    return oracle_runs.exit_status((r.outcome for r in runs), disagreements)


def to_json(runs: Sequence[CaseRun], disagreements: Sequence[Disagreement]) -> dict[str, Any]:
    def case_dict(run: CaseRun) -> dict[str, Any]:
        return {
            "case": run.case.number,
            "seed": run.case.seed,
            "node": run.node,
            "describe": run.case.describe(),
            "topology": run.case.topology.to_dict(),
            "settings": run.case.settings.to_dict(),
            "devices": run.case.devices.specs(),
            "seconds": round(run.seconds, 2),
            "outcome": run.outcome,
            "error": run.error,
            "not_judged": run.not_judged,
            "steps": [dataclasses.asdict(s) for s in run.steps],
        }

    return {
        "cases": [case_dict(r) for r in runs],
        "disagreements": [dataclasses.asdict(d) for d in disagreements],
        "known": [{"id": k.id, "title": k.title} for k in KNOWN],
    }
