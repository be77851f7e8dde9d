"""The repository's shape: what the import contracts in pyproject.toml cannot say."""

import ast
from pathlib import Path

import grimp

from testkit.paths import REPO
from toposched.operators.appgroup.toposort import strongly_connected_components

MAX_CLASS_LINES = 250
MAX_FUNCTION_LINES = 60


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


def import_cycles(*packages: str) -> list[list[str]]:
    """The modules of each import cycle among ``packages`` (TYPE_CHECKING imports count: mypy follows them)."""
    graph = grimp.build_graph(*packages)
    modules = sorted(graph.modules)
    index = {m: i for i, m in enumerate(modules)}
    deps = [sorted(index[t] for t in graph.find_modules_directly_imported_by(m)) for m in modules]
    members: dict[int, list[str]] = {}
    for module, component in zip(modules, strongly_connected_components(len(modules), deps), strict=True):
        members.setdefault(component, []).append(module)
    return sorted(found for found in members.values() if len(found) > 1)


def test_no_import_cycles() -> None:
    """Modules import each other one way; each cycle found is named by its modules."""
    cycles = import_cycles("toposched", "testkit")
    assert not cycles, "import cycles:\n" + "\n".join(", ".join(cycle) for cycle in cycles)


def oversized(root: Path) -> list[str]:
    """Classes over MAX_CLASS_LINES and functions (methods too) over MAX_FUNCTION_LINES, generated code aside."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if "_generated" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                limit = MAX_CLASS_LINES
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                limit = MAX_FUNCTION_LINES
            else:
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {lines} lines (at most {limit})")
    return found


def test_no_class_or_function_is_too_long() -> None:
    found = oversized(REPO / "toposched")
    assert not found, "too long:\n" + "\n".join(found)
