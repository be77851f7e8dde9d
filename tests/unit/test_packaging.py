import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from testkit.paths import REPO
from toposched.cli import COMMANDS, main


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("toposched-*.whl")
    return built


@pytest.mark.timeout(120)
def test_wheel_holds_one_package_and_the_entry_point(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"toposched"}
    for package in ("toposched", "toposched/apis", "toposched/operators", "toposched/exporter", "toposched/schedhook"):
        assert f"{package}/__init__.py" in names
    assert "toposched/exporter/podresources/_generated/api_pb2.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "toposched = toposched.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


@pytest.mark.timeout(180)
def test_every_module_imports_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    """In a new venv that has the wheel and its dependencies, but not this checkout on its path."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The dependencies come from the development environment's site-packages, added as a plain
    # path: its .pth files (the editable install that points at this checkout) are not run.
    deps = next(p for p in map(Path, sys.path) if p.name == "site-packages" and (p / "pydantic").is_dir())
    (Path(site) / "dependencies.pth").write_text(f"{deps}\n")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    script = (
        "import importlib, importlib.util, pkgutil, sys, toposched\n"
        "assert toposched.__file__.startswith(sys.argv[1]), toposched.__file__\n"
        "names = [m.name for m in pkgutil.walk_packages(toposched.__path__, 'toposched.')]\n"
        "for name in names:\n"
        "    if not name.endswith('.__main__'):  # that one runs the command\n"
        "        importlib.import_module(name)\n"
        "for other in ('testkit', 'bench', 'tests'):\n"
        "    assert importlib.util.find_spec(other) is None, other\n"
        "print(len(names))\n"
    )
    result = subprocess.run([str(python), "-I", "-c", script, site], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 50


@pytest.mark.parametrize("command", [c.name for c in COMMANDS])
def test_every_command_starts(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: toposched " + command in capsys.readouterr().out
