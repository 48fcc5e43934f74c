"""The import contracts in pyproject.toml hold: brain's layers point one way, brain
never imports the daemon, the protocol or an event loop, and no sub-package has a cycle.

``scripts/check`` runs import-linter too; running it here keeps a plain ``pytest`` honest.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests import ROOT


def test_the_import_contracts_of_pyproject_all_hold() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint is not None, "import-linter is in the dev extra: pip install -e '.[dev]'"
    run = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-4000:]
    assert "0 broken" in run.stdout
