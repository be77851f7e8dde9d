"""Status conditions as Kubernetes keeps them: one per type, transition time kept while unchanged."""

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import ValidationError

from toposched.apis.meta import Condition

READY = "Ready"
INVALID_SPEC = "InvalidSpec"


def set_condition(
    conditions: list[Condition],
    type_: str,
    status: Literal["True", "False", "Unknown"],
    reason: str,
    message: str,
    generation: int | None,
    now: datetime,
) -> list[Condition]:
    """A new list with the condition of ``type_`` set; lastTransitionTime moves only when status does."""
    previous = next((c for c in conditions if c.type == type_), None)
    since = previous.last_transition_time if previous is not None and previous.status == status else now
    updated = Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=since,
        observed_generation=generation,
    )
    return [updated if c.type == type_ else c for c in conditions] if previous else [*conditions, updated]


def invalid_status(body: Mapping[str, Any], message: str, now: datetime) -> dict[str, Any] | None:
    """The status patch for an object whose spec cannot be read: Ready=False, reason InvalidSpec,
    ``message`` naming each problem; the other conditions kept. None when it says so already.

    Works on the raw body, since the object does not parse; conditions that do not parse either
    are left out rather than fail the report."""
    status = body.get("status") if isinstance(body.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    conditions = []
    for raw in status.get("conditions") or [] if isinstance(status.get("conditions"), list) else []:
        try:
            conditions.append(Condition.model_validate(raw))
        except ValidationError:
            continue
    ready = next((c for c in conditions if c.type == READY), None)
    if ready is not None and (ready.status, ready.reason, ready.message) == ("False", INVALID_SPEC, message):
        return None
    meta = body.get("metadata") if isinstance(body.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    generation = meta.get("generation") if isinstance(meta.get("generation"), int) else None
    conditions = set_condition(conditions, READY, "False", INVALID_SPEC, message, generation, now)
    return {"conditions": [c.to_dict() for c in conditions], "observedGeneration": generation}
