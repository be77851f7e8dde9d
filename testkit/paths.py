"""Paths of the repo's own files that tests read."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CRDS = REPO / "crds"
EXAMPLES = REPO / "examples"
UPSTREAM_FIXTURES = REPO / "tests" / "fixtures" / "upstream"
SCHEDULER_CONFIG = REPO / "charts" / "toposched" / "files" / "kube-scheduler-config.yaml"
"""The second kube-scheduler's configuration: one file, used by the chart, the tests and the benchmarks."""
