"""daemon: the brain process. The stdio loop, dispatch, concurrency, auto-save,
signals and the ``brain`` command line; the only package that uses anyio and
touches stdin/stdout."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from daemon.config import DaemonConfig, load_config
    from daemon.dispatch import Dispatcher, to_wire
    from daemon.server import Server

_WHERE: dict[str, str] = {
    "DaemonConfig": "daemon.config",
    "Dispatcher": "daemon.dispatch",
    "Server": "daemon.server",
    "load_config": "daemon.config",
    "to_wire": "daemon.dispatch",
}
"""Each re-exported name and its module: resolved on first access (PEP 562), so
``brain --help`` or ``python -m daemon`` import only what their command needs."""


def __getattr__(name: str) -> Any:
    """Import the module defining ``name`` on first access."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'daemon' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["DaemonConfig", "Dispatcher", "Server", "load_config", "to_wire"]
