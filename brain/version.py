"""The package version (single source for pyproject and ``info``).

A constant: ``tests/e2e/test_cli.py`` checks ``--version`` prints it.
"""

__version__ = "0.1.0"
