"""The tree's own rules: tests mirror brain/, modules share only public names, fixtures
are shared rather than copied between conftest files."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests import ROOT

BRAIN = ROOT / "brain"
TESTS = ROOT / "tests"
_NAMED_TEST: re.Pattern[str] = re.compile(r"tests/[\w/]+\.py")


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def _own_tests(module: Path) -> list[Path]:
    """Where a module's own tests would be: tests/brain/<package>/test_<module>.py, and
    for a sub-package also its test directory."""
    parts = module.relative_to(BRAIN).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
        if not parts:
            return [TESTS / "brain" / "test_surface.py"]
        return [
            TESTS.joinpath("brain", *parts[:-1], f"test_{parts[-1]}.py"),
            TESTS.joinpath("brain", *parts),
        ]
    return [TESTS.joinpath("brain", *parts[:-1], f"test_{parts[-1]}.py")]


def test_every_engine_module_has_its_own_test_file_or_says_where_it_is_tested() -> None:
    missing = []
    for module in sorted(BRAIN.rglob("*.py")):
        if any(path.exists() for path in _own_tests(module)):
            continue
        if not re.search(r"\b[Tt]ested\b|\bTests:|tests/", _docstring(module)):
            missing.append(str(module.relative_to(ROOT)))
    assert missing == []


def test_the_test_files_a_module_docstring_names_exist() -> None:
    stale = [
        f"{module.relative_to(ROOT)}: {named}"
        for package in ("brain", "daemon", "protocol")
        for module in sorted((ROOT / package).rglob("*.py"))
        for named in _NAMED_TEST.findall(_docstring(module))
        if not (ROOT / named).exists()
    ]
    assert stale == []


def test_no_engine_module_imports_an_underscore_name_from_another() -> None:
    reaching = []
    for module in sorted(BRAIN.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("brain"):
                reaching += [
                    f"{module.relative_to(ROOT)}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert reaching == []


def _fixtures(conftest: Path) -> dict[str, str]:
    """A conftest's fixtures: name -> the body's AST (names and docstring left out)."""
    found: dict[str, str] = {}
    for node in ast.parse(conftest.read_text()).body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if not any("fixture" in ast.unparse(d) for d in node.decorator_list):
            continue
        body = node.body[1:] if ast.get_docstring(node) else node.body
        found[node.name] = "\n".join(ast.dump(statement) for statement in body)
    return found


def test_no_fixture_is_defined_twice_or_copied_between_conftest_files() -> None:
    seen_names: dict[str, Path] = {}
    seen_bodies: dict[str, str] = {}
    repeated = []
    for conftest in sorted(TESTS.rglob("conftest.py")):
        for name, body in _fixtures(conftest).items():
            where = f"{conftest.relative_to(ROOT)}::{name}"
            if name in seen_names:
                repeated.append(f"{where} (name, as in {seen_names[name].relative_to(ROOT)})")
            if body in seen_bodies:
                repeated.append(f"{where} (body, as {seen_bodies[body]})")
            seen_names.setdefault(name, conftest)
            seen_bodies.setdefault(body, where)
    assert repeated == []
