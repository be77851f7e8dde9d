"""Paths of the repo's own files that tests read."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CRDS = REPO / "crds"
EXAMPLES = REPO / "examples"
UPSTREAM_FIXTURES = REPO / "tests" / "fixtures" / "upstream"
