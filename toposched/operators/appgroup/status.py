"""The AppGroup status the operator wants, computed from the object and its member pods.

Pure and idempotent: the same object and pods give the same status, so the operator writes
only when something changed and a restart mid-reconcile cannot duplicate or lose a write.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from toposched.apis.appgroup import AppGroup, AppGroupStatus, TopologyInfo
from toposched.apis.meta import Condition
from toposched.operators.appgroup.toposort import InvalidSpecError, SortResult, describe_cycles, sort_spec
from toposched.operators.conditions import set_condition

READY = "Ready"


@dataclass(frozen=True)
class PodView:
    """What the status needs to know of one member pod."""

    running: bool
    bound_at: datetime | None = None
    """When the pod was bound to a node (PodScheduled=True), None while pending."""
    node: str | None = None
    workload: str | None = None
    """The pod's workload selector (label appgroup.diktyo.x-k8s.io.workload)."""


@dataclass(frozen=True)
class WarningEvent:
    reason: str
    message: str


@dataclass
class Reconciled:
    status: AppGroupStatus
    warnings: list[WarningEvent] = field(default_factory=list)
    """Warnings to post as Events; only when the spec was (re)evaluated, so once per generation."""


def topology_order(result: SortResult, appgroup: AppGroup) -> list[TopologyInfo]:
    """Upstream's shape: entries sorted by selector (the scheduler plugin binary-searches it), 1-based index."""
    by_selector = {item.workload.selector: item.workload for item in appgroup.spec.workloads}
    index = {selector: i + 1 for i, selector in enumerate(result.order)}
    return [TopologyInfo(workload=by_selector[s], index=index[s]) for s in sorted(result.order)]


def reconcile(appgroup: AppGroup, pods: Iterable[PodView], now: datetime) -> Reconciled:
    """The status ``appgroup`` should have now, and the warnings to report."""
    old = appgroup.status or AppGroupStatus()
    generation = appgroup.metadata.get("generation")
    status = old.model_copy(deep=True)
    warnings: list[WarningEvent] = []
    conditions: list[Condition] = list(old.conditions or [])

    if old.observed_generation != generation or old.topology_order is None:
        try:
            result = sort_spec(appgroup.spec)
        except InvalidSpecError as exc:
            # Keep the last valid order: scheduling goes on while the user fixes the spec.
            message = f"invalid spec: {exc}"
            conditions = set_condition(conditions, READY, "False", "InvalidSpec", message, generation, now)
            warnings.append(WarningEvent("InvalidSpec", message))
        else:
            status.topology_order = topology_order(result, appgroup)
            status.topology_calculation_time = now
            if result.cycles:
                message = (
                    f"{describe_cycles(result.cycles)}; each cycle is placed as one group "
                    "(members in spec order) so scheduling can proceed"
                )
                conditions = set_condition(conditions, READY, "False", "DependencyCycle", message, generation, now)
                warnings.append(WarningEvent("DependencyCycle", message))
            else:
                message = f"{len(result.order)} workloads ordered with {appgroup.spec.topology_sorting_algorithm}"
                conditions = set_condition(conditions, READY, "True", "OrderComputed", message, generation, now)
        status.observed_generation = generation
        status.conditions = conditions

    pods = list(pods)
    status.running_workloads = sum(1 for p in pods if p.running)
    bound = [p.bound_at for p in pods if p.bound_at is not None]
    if bound:
        first = min(bound)
        if status.schedule_start_time is None or first < status.schedule_start_time:
            status.schedule_start_time = first
    return Reconciled(status=status, warnings=warnings)


def pod_view(pod_status: Mapping[str, Any], node: str | None = None, workload: str | None = None) -> PodView:
    """The PodView of a pod's ``status`` as the apiserver returns it."""
    bound_at = None
    for condition in pod_status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            stamp = condition.get("lastTransitionTime")
            if stamp:
                bound_at = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    return PodView(running=pod_status.get("phase") == "Running", bound_at=bound_at, node=node, workload=workload)
