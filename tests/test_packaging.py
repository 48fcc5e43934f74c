"""What ``pip install .`` puts in the wheel: every file the packages read at run time.

A non-editable install has only what pyproject's package data names; a data file it
leaves out works in the clone and fails only for users (the node ranker's weights
did: ``query`` after a compaction answered -32008 "No such file or directory").
``scripts/wheel_check`` builds the real wheel and runs a daemon from it.
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

from tests import ROOT

PACKAGES = ("brain", "daemon", "protocol")


def _package_data() -> dict[str, list[str]]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data: dict[str, list[str]] = pyproject["tool"]["setuptools"]["package-data"]
    return data


def _data_files(package: str) -> list[Path]:
    """Every file under the package that is not Python source or a build leftover."""
    root = ROOT / package
    return sorted(
        path.relative_to(root)
        for path in root.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    )


def _matched(package: str, pattern: str) -> set[Path]:
    """The files a package-data pattern takes: a glob relative to the package, as
    setuptools expands it."""
    root = ROOT / package
    return {path.relative_to(root) for path in root.glob(pattern) if path.is_file()}


def test_every_data_file_in_the_packages_is_named_by_the_wheels_package_data() -> None:
    data = _package_data()
    left_out = [
        f"{package}/{path}"
        for package in PACKAGES
        for path in _data_files(package)
        if not any(path in _matched(package, pattern) for pattern in data.get(package, []))
    ]
    assert left_out == []


def test_every_package_data_pattern_names_a_file_that_exists() -> None:
    # A stale pattern (a file renamed or moved) is as wrong as a missing one.
    data = _package_data()
    stale = [
        f"{package}/{pattern}"
        for package in PACKAGES
        for pattern in data.get(package, [])
        if not _matched(package, pattern)
    ]
    assert stale == []


def _extras() -> dict[str, list[str]]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras: dict[str, list[str]] = pyproject["project"]["optional-dependencies"]
    return extras


def test_the_install_hints_ask_for_exactly_the_extras_requirements() -> None:
    from brain.vectors.embedders import ONNX_REQUIREMENTS
    from daemon.commands import MCP_REQUIREMENT

    extras = _extras()
    assert extras["mcp"] == [MCP_REQUIREMENT]
    assert [r.split("#")[0].strip() for r in extras["onnx"]] == list(ONNX_REQUIREMENTS)


def test_no_install_hint_names_the_unpublished_brain_memory_package() -> None:
    """``brain-memory`` is not on PyPI: ``pip install 'brain-memory[mcp]'`` fails, or installs
    whatever a stranger published under the name. Hints say ``'.[mcp]'`` or the wheel."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    naming = [
        name.decode()
        for name in tracked
        if name
        and name != b"tests/test_packaging.py"
        and (ROOT / name.decode()).is_file()
        and b"brain-memory[" in (ROOT / name.decode()).read_bytes()
    ]
    assert naming == []
