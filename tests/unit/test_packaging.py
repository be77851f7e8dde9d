import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.paths import REPO
from toposched.cli import COMMANDS, main


@pytest.mark.timeout(120)
def test_wheel_builds_with_every_package_and_the_entry_point(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("toposched-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for package in ("toposched", "apis", "operators", "exporter", "schedhook"):
        assert f"{package}/__init__.py" in names
    assert "exporter/podresources/_generated/api_pb2.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "toposched = toposched.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


@pytest.mark.parametrize("command", [c.name for c in COMMANDS])
def test_every_command_starts(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: toposched " + command in capsys.readouterr().out
