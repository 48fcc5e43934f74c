"""Structured logs to stderr (never stdout: that is the wire).

Every line goes through one stdlib ``logging`` handler on stderr, rendered by
structlog: the daemon's own events, the lines libraries log through the
standard ``logging`` module (httpx requests, ``brain.llm`` retries, asyncio),
Python warnings and uncaught exceptions in threads. So ``--log-format json``
makes every stderr line one JSON object, and one lock orders the writes of
every thread.
"""

from __future__ import annotations

import logging
import sys
import threading
from types import TracebackType
from typing import Any

import structlog

from daemon.config import LogFormat


def configure_logging(level: str, fmt: LogFormat) -> None:
    """Send every log line to stderr at ``level`` in ``console`` or ``json`` format."""
    levelno = logging.getLevelNamesMapping()[level.upper()]
    shared: list[structlog.types.Processor] = [
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: list[structlog.types.Processor]
    if fmt == "json":
        # The console renderer formats tracebacks itself; JSON needs them as text.
        renderer = [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        renderer = [structlog.dev.ConsoleRenderer(colors=False)]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            # Records from stdlib loggers: their logger name says which library spoke.
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
        )
    )
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(levelno)
    logging.captureWarnings(True)  # warnings.warn(...) becomes a "py.warnings" record
    threading.excepthook = _thread_excepthook
    sys.unraisablehook = _unraisablehook
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(levelno),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )


def _thread_excepthook(args: threading.ExceptHookArgs) -> None:
    # Python would print this traceback raw to stderr, breaking a JSON log.
    if args.exc_type is SystemExit:
        return
    exc_info = _exc_info(args.exc_type, args.exc_value, args.exc_traceback)
    name = None if args.thread is None else args.thread.name
    log.error("uncaught exception in a thread", thread=name, exc_info=exc_info)


def _unraisablehook(args: Any) -> None:
    # An exception in a finalizer (``__del__``, a closed generator): same reason.
    exc_info = _exc_info(args.exc_type, args.exc_value, args.exc_traceback)
    log.error(args.err_msg or "exception ignored", object=repr(args.object), exc_info=exc_info)


def _exc_info(
    exc_type: type[BaseException], value: BaseException | None, tb: TracebackType | None
) -> tuple[type[BaseException], BaseException, TracebackType | None] | bool:
    return (exc_type, value, tb) if value is not None else False


log = structlog.get_logger("brain")
"""The daemon's logger."""
