"""Where toposched's prediction and the kubelet's decision differ, and which differences are known.

Compared per pod: admission (rejected means ``TopologyAffinityError`` or the Memory Manager's
``UnexpectedAdmissionError``) and, for admitted pods, the NUMA zones: the zones of a container's
exclusive CPUs and of its pinned memory must lie within the zones predicted for it (the aligned
mask, plus the zones its CPUs or devices spill over to when the mask cannot hold them all), and
every device it got must be attached to one of them (as the device manager calls a device
aligned; a device without topology is aligned nowhere and checked for nothing). Pure.

A documented disagreement is one the NRT cannot tell the predictor about; each has an entry in
``docs/oracle.md`` with the kubelet's reason and why toposched differs. Everything else is a bug
to fix in the predictor (or the exporter).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from testkit.oracle import runs
from testkit.oracle.cases import Case
from testkit.oracle.observe import REJECTIONS, CaseRun, Step


@dataclass(frozen=True)
class Disagreement:
    case: int
    pod: int
    kind: str
    """``admission`` or ``zones``."""
    detail: str
    documented: str = ""
    """The docs/oracle.md entry that explains it; empty when nothing does."""


Known = runs.Known[Callable[[Case, Step, Disagreement], bool]]
"""A documented disagreement and how to recognise it."""


def _asks_unhealthy(case: Case, step: Step, found: Disagreement) -> bool:
    """The pod asks a device resource of which the node has unhealthy devices, and toposched
    admitted it where the kubelet rejected it, or predicted other zones: the kubelet counts those
    devices for its preferred mask size and its masks, the NRT cannot say where they are
    (PodResources lists healthy devices only)."""
    if step.observation is None:
        return False
    if found.kind == "admission" and step.observation.admit:
        return False
    unhealthy = {r.name for r in case.devices.resources if any(not d.healthy for d in r.devices)}
    asked = {
        resource
        for containers in (step.spec.get("containers", []), step.spec.get("initContainers", []))
        for c in containers
        for resource in ((c.get("resources") or {}).get("limits") or {})
    }
    return bool(step.prediction is not None and step.prediction.admit and unhealthy & asked)


def _single_zone_device_chosen(case: Case, step: Step, found: Disagreement) -> bool:
    """toposched rejected a pod the kubelet admitted, and a container of it got a device on one
    zone of a resource the node also has on several zones, which another container of the pod
    asks too: which aligned device a container gets is the plugin's preference (or the kubelet's
    id order); toposched assumes the shared one, which leaves the pod's later containers the
    fewest devices (it then never admits what the kubelet would reject)."""
    observed = step.observation
    if observed is None or not observed.admit or found.kind != "admission":
        return False
    if step.prediction is None or step.prediction.admit:
        return False
    shared = {r.name for r in case.devices.resources if any(len(d.numa) > 1 for d in r.devices)}
    asking: dict[str, int] = {}
    for containers in (step.spec.get("containers", []), step.spec.get("initContainers", [])):
        for c in containers:
            for resource in (c.get("resources") or {}).get("limits") or {}:
                asking[resource] = asking.get(resource, 0) + 1
    single = {r for got in observed.device_zones.values() for r, zones in got if len(zones) == 1}
    return any(asking.get(r, 0) > 1 for r in shared & single)


KNOWN: tuple[Known, ...] = (
    Known(
        "unhealthy-devices",
        "the kubelet sizes preferred device masks with unhealthy devices, whose zones the NRT cannot tell",
        _asks_unhealthy,
    ),
    Known(
        "device-choice",
        "which of the aligned devices a container gets (one on a zone or one shared by two) is the plugin's choice",
        _single_zone_device_chosen,
    ),
)
"""Documented disagreements (docs/oracle.md), tried in order."""


def compare(run: CaseRun, known: Sequence[Known] = KNOWN) -> list[Disagreement]:
    found = []
    for step in run.steps:
        for raw in _differences(run.case, step):
            documented = next((k.id for k in known if k.matches(run.case, step, raw)), "")
            found.append(Disagreement(raw.case, raw.pod, raw.kind, raw.detail, documented))
    return found


def _differences(case: Case, step: Step) -> list[Disagreement]:
    predicted, observed = step.prediction, step.observation
    if predicted is None or observed is None:
        return []
    if observed.reason and not observed.admit and observed.reason not in REJECTIONS:
        return [Disagreement(case.number, step.index, "admission", f"rejected for another reason: {observed.reason}")]
    if predicted.admit != observed.admit:
        said = "admit" if predicted.admit else f"reject ({predicted.reason})"
        did = "admitted" if observed.admit else f"rejected ({observed.reason})"
        return [Disagreement(case.number, step.index, "admission", f"toposched: {said}; kubelet: {did}")]
    if not observed.admit:
        return []
    out = []
    pod_scope = case.settings.topology_manager_scope == "pod" and "pod" in predicted.zones
    for container, zones in sorted(observed.cpu_zones.items()):
        expected = predicted.zones.get("pod" if pod_scope else container)
        if expected is not None and not set(zones) <= set(expected):
            detail = f"{container}: exclusive CPUs on zones {list(zones)}, predicted {list(expected)}"
            out.append(Disagreement(case.number, step.index, "zones", detail))
    for container, zones in sorted(observed.memory_zones.items()):
        expected = predicted.zones.get("pod" if pod_scope else container)
        if expected is not None and not set(zones) <= set(expected):
            detail = f"{container}: memory pinned to zones {list(zones)}, predicted {list(expected)}"
            out.append(Disagreement(case.number, step.index, "zones", detail))
    for container, devices in sorted(observed.device_zones.items()):
        expected = predicted.zones.get("pod" if pod_scope else container)
        stray = [(r, list(z)) for r, z in devices if z and expected is not None and not set(z) & set(expected)]
        if stray:
            detail = f"{container}: devices {stray} attached to none of the predicted zones {list(expected or ())}"
            out.append(Disagreement(case.number, step.index, "zones", detail))
    return out
