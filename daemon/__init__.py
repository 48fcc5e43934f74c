"""daemon: the brain process. The stdio loop, dispatch, concurrency, auto-save,
signals and the ``brain`` command line; the only package that uses anyio and
touches stdin/stdout."""

from daemon.config import DaemonConfig, load_config
from daemon.dispatch import Dispatcher, to_wire
from daemon.server import Server

__all__ = ["DaemonConfig", "Dispatcher", "Server", "load_config", "to_wire"]
