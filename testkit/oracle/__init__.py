"""The oracle: toposched's admission predictor checked against real kubelets, case by seeded case
(``python -m testkit.oracle``, ``make oracle``; the documented disagreements are in docs/oracle.md)."""
