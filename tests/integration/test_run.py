"""`make run`'s script (hack/run.sh) on the local control plane: what a person sees first."""

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.paths import EXAMPLES, REPO

pytestmark = pytest.mark.cluster


@pytest.fixture
def demo(kubectl: list[str]) -> Iterator[None]:
    yield
    # What run.sh leaves for the person to look at goes, so the next tests see their own nodes only.
    for args in (
        ["delete", "namespace", "toposched-demo", "--wait=false"],
        ["delete", "-f", str(EXAMPLES / "nodes.yaml")],
        ["delete", "-f", str(EXAMPLES / "noderesourcetopology-worker-1.yaml")],
    ):
        subprocess.run([*kubectl, *args, "--ignore-not-found"], check=False, capture_output=True)


@pytest.mark.usefixtures("demo")
def test_run_shows_the_order_the_costs_and_why(kubeconfig: Path) -> None:
    done = subprocess.run(
        ["bash", str(REPO / "hack" / "run.sh")], cwd=REPO, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "1\tfrontend" in out
    assert re.search(r"\bTrue\s+OrderComputed\s", out)
    assert re.search(r"\bTrue\s+CostsPublished\s+NetperfCosts: 2 region pairs, 4 zone pairs", out)
    assert "us-east-1 -> us-west-1=62" in out
    assert "z1 -> z2=2" in out
    assert "The operators have stopped" in out
