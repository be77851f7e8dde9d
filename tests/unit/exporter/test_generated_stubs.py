import subprocess
import sys
from pathlib import Path

import pytest

from testkit.paths import REPO

# What hack/gen-proto.sh generates: the exporter's PodResources client, the test kit's device plugin
# and its DRA driver.
GENERATED = [
    Path("toposched/exporter/podresources/_generated"),
    Path("testkit/deviceplugin/_generated"),
    Path("testkit/dra/_generated"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("generated", GENERATED, ids=str)
def test_committed_stubs_match_the_proto(generated: Path, tmp_path: Path) -> None:
    subprocess.run(
        [str(REPO / "hack" / "gen-proto.sh"), str(tmp_path)],
        check=True,
        cwd=REPO,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
    )
    protos = sorted((REPO / generated).glob("*.proto"))
    assert protos, f"no .proto in {generated}"
    for proto in protos:
        for name in (f"{proto.stem}_pb2.py", f"{proto.stem}_pb2.pyi", f"{proto.stem}_pb2_grpc.py"):
            fresh = tmp_path / generated / name
            assert fresh.read_text() == (REPO / generated / name).read_text(), f"{name} is stale: run hack/gen-proto.sh"
