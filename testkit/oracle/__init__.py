"""The oracle: toposched's admission predictor checked against real kubelets, case by seeded case
(``python -m testkit.oracle``, ``make oracle``; the documented disagreements are in docs/oracle.md)."""

import os

# The oracle starts processes (kubectl) beside live gRPC channels (PodResources), and gRPC's core
# says so at INFO each time: set before gRPC is first imported.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
