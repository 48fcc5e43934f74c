"""brain's tests, mirroring the packages (tests/brain/<sub-package>/, tests/daemon, ...)."""

from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
"""The repository's root: where subprocesses run and scripts live, however deep a test is."""
