"""Pod-level NUMA policy: koordinator's annotation, its pod-vs-node matrix and NUMA exclusivity. Pure.

Annotation ``scheduling.koordinator.sh/numa-topology-spec``:
``{"numaTopologyPolicy": ""|"BestEffort"|"Restricted"|"SingleNUMANode",
"singleNUMANodeExclusive": "Preferred"|"Required"}``.
A pod policy applies where the node has none or the same one; a different node policy is a
mismatch. Exclusivity (Required): a pod on one NUMA node refuses a node shared by a pod spanning
several, and a pod spanning several refuses nodes that hold single-NUMA pods. Preferred turns
the same conflict into the lowest score instead of a rejection (koordinator makes it a no-op).
"""

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from toposched.apis.kubelet import BEST_EFFORT, NONE, RESTRICTED, SINGLE_NUMA_NODE

POLICY_NAMES = {"": NONE, "BestEffort": BEST_EFFORT, "Restricted": RESTRICTED, "SingleNUMANode": SINGLE_NUMA_NODE}
EXCLUSIVE = ("Preferred", "Required")
IDLE, SINGLE, SHARED = "idle", "single", "shared"


class PolicyError(ValueError):
    pass


@dataclass(frozen=True)
class PodPolicy:
    policy: str = NONE
    exclusive: str | None = None
    """Preferred, Required, or None (not asked)."""


def parse_annotation(raw: object) -> PodPolicy:
    """The pod's policy; PolicyError with a message a user can act on."""
    if raw is None:
        return PodPolicy()
    if not isinstance(raw, str):
        raise PolicyError("expected a JSON string")
    if not raw.strip():
        return PodPolicy()
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise PolicyError(f"not JSON: {exc.msg} at position {exc.pos}") from None
    except (ValueError, RecursionError) as exc:  # a number of thousands of digits, nesting too deep
        raise PolicyError(f"not JSON a program can read: {_clip(str(exc))}") from None
    if not isinstance(data, dict):
        raise PolicyError('expected a JSON object such as {"numaTopologyPolicy": "SingleNUMANode"}')
    unknown = set(data) - {"numaTopologyPolicy", "singleNUMANodeExclusive"}
    if unknown:
        raise PolicyError(f"unknown fields: {_clip(', '.join(sorted(unknown)))}")
    policy = data.get("numaTopologyPolicy", "")
    if policy not in POLICY_NAMES:
        choices = ", ".join(repr(p) for p in POLICY_NAMES)
        raise PolicyError(f"numaTopologyPolicy {_short(policy)} is not one of {choices}")
    exclusive = data.get("singleNUMANodeExclusive")
    if exclusive is not None and exclusive not in EXCLUSIVE:
        raise PolicyError(f"singleNUMANodeExclusive {_short(exclusive)} is not one of 'Preferred', 'Required'")
    return PodPolicy(POLICY_NAMES[policy], exclusive)


def _clip(text: str, limit: int = 60) -> str:
    """As an error message quotes what it refuses: an annotation can be kilobytes of garbage."""
    return text if len(text) <= limit else f"{text[: limit - 4]}..."


def _short(value: object) -> str:
    return _clip(repr(value))


def effective_policy(pod: PodPolicy, node_policy: str) -> str:
    """The policy that applies, or PolicyError when pod and node disagree."""
    if pod.policy != NONE and node_policy != NONE and pod.policy != node_policy:
        raise PolicyError(f"the pod asks for {pod.policy} but the node runs {node_policy}")
    return pod.policy if pod.policy != NONE else node_policy


def numa_status(placements: Iterable[Sequence[int]], numa: int) -> str:
    """idle, single (a pod sits on this NUMA node alone) or shared (a pod spans it and others)."""
    status = IDLE
    for zones in placements:
        if numa in zones:
            if len(zones) > 1:
                return SHARED
            status = SINGLE
    return status


def exclusive_ok(hint: Sequence[int], statuses: dict[int, str]) -> bool:
    """Koordinator's Required check for a hint (the NUMA ids the pod would use)."""
    if len(hint) > 1:
        return all(statuses.get(n, IDLE) != SINGLE for n in hint)
    return all(statuses.get(n, IDLE) != SHARED for n in hint)
