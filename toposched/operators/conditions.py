"""Status conditions as Kubernetes keeps them: one per type, transition time kept while unchanged."""

from datetime import datetime
from typing import Literal

from toposched.apis.meta import Condition


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
