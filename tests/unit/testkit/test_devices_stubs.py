import subprocess
import sys
from pathlib import Path

import pytest

from testkit.paths import REPO

GENERATED = REPO / "testkit" / "deviceplugin" / "_generated"


@pytest.mark.timeout(60)
def test_committed_device_plugin_stubs_match_the_proto(tmp_path: Path) -> None:
    subprocess.run(
        [str(REPO / "hack" / "gen-proto.sh"), str(tmp_path)],
        check=True,
        cwd=REPO,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
    )
    for name in ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py"):
        fresh = tmp_path / "testkit" / "deviceplugin" / "_generated" / name
        assert fresh.read_text() == (GENERATED / name).read_text(), f"{name} is stale: run hack/gen-proto.sh"


def test_the_services_have_the_kubelets_method_paths() -> None:
    """The kubelet calls /v1beta1.Registration/Register and /v1beta1.DevicePlugin/<method>."""
    from testkit.deviceplugin._generated import api_pb2

    services = {s.full_name: [m.name for m in s.methods] for s in api_pb2.DESCRIPTOR.services_by_name.values()}
    assert services == {
        "v1beta1.Registration": ["Register"],
        "v1beta1.DevicePlugin": [
            "GetDevicePluginOptions", "ListAndWatch", "GetPreferredAllocation", "Allocate", "PreStartContainer",
        ],
    }  # fmt: skip
