"""Prometheus metrics of the operators."""

from prometheus_client import Counter, Gauge, Histogram

RECONCILE_SECONDS = Histogram(
    "toposched_reconcile_duration_seconds",
    "Time to reconcile one object, from reading it to its status write.",
    ["kind"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
RECONCILE_ERRORS = Counter(
    "toposched_reconcile_errors_total",
    "Reconciles that did not complete, by reason.",
    ["kind", "reason"],
)
STATUS_WRITES = Counter(
    "toposched_status_writes_total",
    "Status writes; reconciles that found nothing to change do not write.",
    ["kind"],
)
APPGROUPS = Gauge(
    "toposched_appgroups",
    "AppGroups by the status and reason of their Ready condition.",
    ["ready", "reason"],
)
