import subprocess
import sys
from pathlib import Path

import pytest

from testkit.paths import REPO

# What hack/gen-proto.sh generates: the exporter's PodResources client, the test kit's device plugin.
GENERATED = [Path("toposched/exporter/podresources/_generated"), Path("testkit/deviceplugin/_generated")]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("generated", GENERATED, ids=str)
def test_committed_stubs_match_the_proto(generated: Path, tmp_path: Path) -> None:
    subprocess.run(
        [str(REPO / "hack" / "gen-proto.sh"), str(tmp_path)],
        check=True,
        cwd=REPO,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
    )
    for name in ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py"):
        fresh = tmp_path / generated / name
        assert fresh.read_text() == (REPO / generated / name).read_text(), f"{name} is stale: run hack/gen-proto.sh"
