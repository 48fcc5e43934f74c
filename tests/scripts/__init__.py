"""Tests of the scripts in scripts/ (loaded from their files: scripts/ is not a package)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

from tests import ROOT


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module, registered under ``name`` (its dataclasses need it)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def bench_module(name: str) -> ModuleType:
    """``scripts/benches/<name>.py``: the package beside ``scripts/bench.py`` (its entry point)
    imports it from scripts/, so scripts/ goes on ``sys.path`` as it does for that script."""
    scripts = str(ROOT / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    return importlib.import_module(f"benches.{name}")
