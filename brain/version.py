"""The package version (single source for pyproject and ``info``)."""

__version__ = "0.1.0"
