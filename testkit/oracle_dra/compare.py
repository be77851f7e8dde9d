"""Where toposched's prediction of the DRA pick and the real kube-scheduler differ. Pure.

Compared per case, for the case pod:

- **scheduled or not**: the scheduler binds it exactly when some node is predicted to fit and no
  node's allocation fails with an error (a CEL runtime error aborts the scheduler's attempt on
  the pod whatever the other nodes say); one that was not bound must have failed the way
  predicted, with an error (``SchedulerError``) or for want of devices (``Unschedulable``);
- **the pick**: on the node it chose, each claim's ``status.allocation`` -- its devices'
  (request, driver, pool, device), in order -- is the one predicted there.

A documented disagreement has an entry in ``docs/oracle.md`` (the DRA oracle's section) saying
why toposched cannot know; the table below recognises them. Everything else is a bug to fix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from testkit.oracle import runs
from testkit.oracle_dra.observe import CaseRun


@dataclass(frozen=True)
class Disagreement:
    case: int
    kind: str
    """``unknown`` (no prediction), ``scheduled`` (bound or not, or how it failed), ``node`` (bound
    where no fit was predicted) or ``pick`` (other devices)."""
    detail: str
    documented: str = ""
    """The id of the docs/oracle.md entry that explains it; empty: a bug to fix."""


Known = runs.Known[Callable[[CaseRun, Disagreement], bool]]


TIMED_OUT = "timed out trying to allocate devices"


def _search_timed_out(run: CaseRun, found: Disagreement) -> bool:
    """One side gave up on a node's search after the 10 s the scheduler's Filter allows (its
    ``DRASchedulerFilterTimeout``), the other finished it: the same search on the same objects,
    timed by two processes sharing the machine's cores differently."""
    observed, predicted = run.observation, run.prediction
    said = [observed.reason if observed is not None else ""]
    said += list(predicted.errors.values()) if predicted is not None else []
    return found.kind == "scheduled" and any(TIMED_OUT in s for s in said)


def _taken_in_flight(run: CaseRun, found: Disagreement) -> bool:
    """An earlier pod's claim, not allocated in the extender's store when toposched predicted,
    holds a device toposched predicted for the case pod: the scheduler had allocated it (in its
    Reserve, written in PreBind) after the store's view or before its status landed there."""
    predicted, observed = run.prediction, run.observation
    if predicted is None or observed is None or found.kind not in ("pick", "scheduled"):
        return False
    later = {
        (driver, pool, device)
        for claim, devices in observed.allocations.items()
        if claim not in run.claims and claim not in run.allocated_seen
        for _, driver, pool, device in devices or ()
    }
    return any((p.driver, p.pool, p.device) in later for picks in predicted.picks.values() for p in picks)


KNOWN: tuple[Known, ...] = (
    Known(
        "in-flight",
        "the scheduler had allocated a device to an earlier pod whose allocation the store had not seen yet",
        _taken_in_flight,
    ),
    Known(
        "filter-timeout",
        "a node's search outlasted the 10 s filter timeout in the scheduler or in the helper, not in both",
        _search_timed_out,
    ),
)
"""Documented disagreements (docs/oracle.md), tried in order."""


def compare(run: CaseRun, known: Sequence[Known] = KNOWN) -> list[Disagreement]:
    """The case's disagreements, each with the first documented entry that explains it."""
    return [replace(d, documented=next((k.id for k in known if k.matches(run, d)), "")) for d in _differences(run)]


def _differences(run: CaseRun) -> list[Disagreement]:
    predicted, observed = run.prediction, run.observation
    if predicted is None or observed is None:
        return []

    def differ(kind: str, detail: str) -> list[Disagreement]:
        return [Disagreement(run.case.number, kind, detail)]

    if predicted.unknown:
        return differ("unknown", f"toposched predicted nothing: {predicted.unknown}")
    errors = predicted.errors
    aborted = observed.reason.startswith("SchedulerError")
    if errors and not aborted:
        node, error = sorted(errors.items())[0]
        did = f"bound it to {observed.node}" if observed.node else observed.reason
        return differ("scheduled", f"toposched: the scheduler aborts ({node}: {error}); the scheduler {did}")
    if aborted != bool(errors):
        return differ("scheduled", f"toposched: no error predicted; the scheduler: {observed.reason}")
    if aborted and not any(error in observed.reason for error in errors.values()):
        return differ(
            "scheduled",
            f"toposched: the scheduler aborts with one of {sorted(set(errors.values()))}; it: {observed.reason}",
        )
    if aborted:
        return []
    if not observed.node:
        fits = sorted(predicted.picks)
        return differ("scheduled", f"toposched: fits on {fits}; the scheduler: {observed.reason}") if fits else []
    picked = predicted.picks.get(observed.node)
    if picked is None:
        left = predicted.left_out.get(observed.node)
        why = (left.error or "the claims do not fit") if left is not None else "not asked"
        return differ("node", f"bound to {observed.node}, where toposched predicted no fit ({why})")
    out = []
    for claim in run.claims:
        expected = [(p.request, p.driver, p.pool, p.device) for p in picked if p.claim == claim]
        got = observed.allocations.get(claim)
        if got != expected:
            out += differ("pick", f"claim {claim} on {observed.node}: predicted {expected}, allocated {got}")
    return out
