"""The DRA oracle: toposched's prediction of kube-scheduler's device pick checked against the real
kube-scheduler, case by seeded case (``python -m testkit.oracle_dra``, ``make oracle-dra``; the
documented disagreements are in docs/oracle.md)."""
