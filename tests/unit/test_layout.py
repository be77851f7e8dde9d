"""The repository's shape: what the import contracts in pyproject.toml cannot say."""

import ast
from pathlib import Path

from testkit.paths import REPO


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_no_test_module_imports_another() -> None:
    """Helpers that two test modules share live in testkit/, not in a test module."""
    offenders = {
        str(path.relative_to(REPO)): sorted(m for m in imported_modules(path) if m == "tests" or m.startswith("tests."))
        for path in (REPO / "tests").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_unit_tests_mirror_the_package() -> None:
    """tests/unit/<path> tests toposched/<path>: every test directory names a package that exists."""
    unit = REPO / "tests" / "unit"
    missing = [
        str(d.relative_to(unit))
        for d in unit.rglob("*")
        if d.is_dir()
        and d.name != "__pycache__"
        and d.name != "testkit"
        and not (REPO / "toposched" / d.relative_to(unit)).is_dir()
    ]
    assert missing == []
