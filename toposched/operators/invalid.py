"""Objects whose spec cannot be read: said in their status and in an Event, never a crash loop.

Such an object was accepted by an older CRD schema, or written while the CRD was not installed
with its validations; the operator cannot compute anything for it, so it reports what is wrong,
once per problem, and goes on with every other object.
"""

import logging
from datetime import UTC, datetime
from typing import Any

from toposched.apis.meta import KubeObject
from toposched.kube import rest
from toposched.operators import k8s, metrics
from toposched.operators.conditions import INVALID_SPEC, invalid_status
from toposched.operators.runtime import Runtime

logger = logging.getLogger(__name__)


async def report_invalid(
    runtime: Runtime,
    kind: type[KubeObject],
    key: tuple[str, str],
    body: dict[str, Any],
    problem: str,
    reported: dict[str, str],
) -> None:
    """Ready=False (InvalidSpec) with ``problem`` in the status, and a Warning Event, when they do
    not say so already. ``reported`` (uid -> message) remembers what was said: the object a watch
    hands back may not show the status just written yet."""
    kind_name = kind.__name__
    metrics.RECONCILE_ERRORS.labels(kind_name, "Unparseable").inc()
    message = f"invalid spec: {problem}"
    uid = str((body.get("metadata") or {}).get("uid", ""))
    patch = invalid_status(body, message, datetime.now(UTC).replace(microsecond=0))
    if patch is None or reported.get(uid) == message:
        return
    reported[uid] = message
    logger.error("%s %s/%s cannot be read: %s", kind_name, key[0], key[1], problem)
    try:
        await k8s.patch_status(runtime.api, kind, key[0], key[1], patch)
    except rest.ApiError as exc:  # reported in the log and the Event; a retry would fail the same way
        logger.warning("%s %s/%s: could not write the status (%s)", kind_name, key[0], key[1], exc.reason)
    await runtime.post_warning(body, INVALID_SPEC, message)
