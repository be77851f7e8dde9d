import subprocess
import sys
from pathlib import Path

import pytest

from testkit.paths import REPO

GENERATED = REPO / "toposched" / "exporter" / "podresources" / "_generated"


@pytest.mark.timeout(60)
def test_committed_stubs_match_the_proto(tmp_path: Path) -> None:
    subprocess.run(
        [str(REPO / "hack" / "gen-proto.sh"), str(tmp_path)],
        check=True,
        cwd=REPO,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
    )
    for name in ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py"):
        fresh = tmp_path / "toposched" / "exporter" / "podresources" / "_generated" / name
        assert fresh.read_text() == (GENERATED / name).read_text(), f"{name} is stale: run hack/gen-proto.sh"
