"""What a NetworkTopology should look like after a reconcile: its weights and its status. Pure.

The operator owns exactly one entry of ``spec.weights``, the one named NetperfCosts; every
other entry is the user's and is carried over untouched, in its place.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from toposched.apis.constants import WEIGHT_NETPERF
from toposched.apis.limits import MAX_NAME_LENGTH
from toposched.apis.meta import Condition
from toposched.apis.netperf import Measurements
from toposched.apis.networktopology import NetworkTopology, NetworkTopologyStatus, WeightInfo
from toposched.operators.conditions import INVALID_SPEC, set_condition
from toposched.operators.networktopology.costs import Computed

READY = "Ready"
DEGRADED = "Degraded"
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LISTED = 10
"""How many offending items a condition message names before it says "and N more"."""


@dataclass(frozen=True)
class Outcome:
    weights: list[WeightInfo] | None
    """The new spec.weights, or None when they need no write."""
    status: NetworkTopologyStatus
    warnings: list[tuple[str, str]] = field(default_factory=list)
    """(reason, message) of Warning Events; only when the problems changed."""


def with_netperf(weights: Sequence[WeightInfo], netperf: WeightInfo) -> list[WeightInfo]:
    """The user's weights with the NetperfCosts entry replaced in place, or appended."""
    out = [netperf if w.name == WEIGHT_NETPERF else w for w in weights]
    return out if any(w.name == WEIGHT_NETPERF for w in weights) else [*out, netperf]


def configmap_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a ConfigMap (a DNS subdomain), or None."""
    if len(name) <= MAX_NAME_LENGTH and _DNS_SUBDOMAIN.fullmatch(name):
        return None
    shown = repr(name) if len(name) <= 64 else f"{name[:60]!r}..."
    return (
        f"spec.configmapName {shown} is not a ConfigMap name (lower-case letters, digits, '-' and '.', "
        f"at most {MAX_NAME_LENGTH} characters)"
    )


def _listing(items: Sequence[str]) -> str:
    shown = ", ".join(items[:LISTED])
    return shown if len(items) <= LISTED else f"{shown} and {len(items) - LISTED} more"


def problems(computed: Computed, measurements: Measurements) -> list[str]:
    found = []
    if computed.unknown:
        pairs = [f"{p.origin}->{p.destination}" for p in computed.unknown]
        found.append(f"no measurement for {len(pairs)} pairs: {_listing(pairs)}")
    if computed.kept:
        pairs = [f"{p.origin}->{p.destination}" for p in computed.kept]
        found.append(f"kept the last good cost of {len(pairs)} pairs: {_listing(pairs)}")
    if measurements.malformed:
        keys = [f"{k} ({why})" for k, why in sorted(measurements.malformed.items())]
        found.append(f"{len(keys)} ConfigMap keys ignored: {_listing(keys)}")
    if computed.stale:
        pairs = [f"{o}->{d}" for o, d in computed.stale]
        found.append(f"{len(pairs)} measurements older than the allowed age: {_listing(pairs)}")
    if computed.unlabeled_nodes:
        found.append(
            f"{len(computed.unlabeled_nodes)} nodes lack region or zone labels: {_listing(computed.unlabeled_nodes)}"
        )
    return found


def _degraded_message(conditions: Sequence[Condition]) -> str | None:
    return next((c.message for c in conditions if c.type == DEGRADED and c.status == "True"), None)


def reconcile(
    nt: NetworkTopology,
    computed: Computed | None,
    measurements: Measurements | None,
    node_count: int,
    now: datetime,
    missing: str | None = None,
    invalid: str | None = None,
) -> Outcome:
    """``missing`` says why there are no measurements at all (e.g. the ConfigMap does not exist);
    ``invalid`` what is wrong with the spec, so that none can be read."""
    old = nt.status or NetworkTopologyStatus()
    conditions = list(old.conditions or [])
    generation = nt.metadata.get("generation")
    status = old.model_copy(deep=True)
    status.node_count = node_count
    warnings: list[tuple[str, str]] = []
    weights: list[WeightInfo] | None = None

    if invalid is not None:
        message = f"invalid spec: {invalid}; the last published costs stay in place"
        previous = next((c for c in conditions if c.type == READY), None)
        if previous is None or previous.message != message:
            warnings.append((INVALID_SPEC, message))
        conditions = set_condition(conditions, READY, "False", INVALID_SPEC, message, generation, now)
    elif missing is not None or computed is None or measurements is None:
        message = f"{missing or 'no measurements'}; the last published costs stay in place"
        previous = next((c for c in conditions if c.type == READY), None)
        if previous is None or previous.message != message:
            warnings.append(("MeasurementsUnavailable", message))
        conditions = set_condition(conditions, READY, "False", "MeasurementsUnavailable", message, generation, now)
    else:
        new_weights = with_netperf(nt.spec.weights, computed.weight)
        if new_weights != nt.spec.weights:
            weights = new_weights
            status.weight_calculation_time = now
        elif status.weight_calculation_time is None:
            status.weight_calculation_time = now
        levels = {
            t.topology_key: sum(len(o.cost_list or ()) for o in t.origin_list) for t in computed.weight.topology_list
        }
        summary = ", ".join(f"{n} {key.rsplit('/', 1)[-1]} pairs" for key, n in levels.items()) or "no pairs"
        conditions = set_condition(
            conditions, READY, "True", "CostsPublished", f"NetperfCosts: {summary}", generation, now
        )
        found = problems(computed, measurements)
        if found:
            message = "; ".join(found)
            if _degraded_message(conditions) != message:
                warnings.append(("Degraded", message))
            conditions = set_condition(conditions, DEGRADED, "True", "IncompleteMeasurements", message, generation, now)
        else:
            conditions = set_condition(conditions, DEGRADED, "False", "AllPairsMeasured", "", generation, now)
    status.conditions = conditions
    status.observed_generation = generation
    return Outcome(weights=weights, status=status, warnings=warnings)
