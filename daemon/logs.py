"""Structured logs to stderr (never stdout: that is the wire).

Every line goes through one stdlib ``logging`` handler on stderr, rendered by
structlog: the daemon's own events, the lines libraries log through the
standard ``logging`` module (httpx requests, ``brain.providers.llm`` retries, asyncio),
Python warnings and uncaught exceptions in threads. So ``--log-format json``
makes every stderr line one JSON object, and one lock orders the writes of
every thread.

structlog (~10 ms, and asyncio with it, ~30 ms) is not imported at start:
``configure_logging`` installs the handler and remembers the settings, and the
handler's formatter and ``log`` build their structlog parts on first use. Until
then, a plain event (``log.info("serving", db=..., pid=...)``: string, number,
bool or None values, no exception) is rendered here into exactly the line
structlog renders for it (``_plain_line``; a test compares the two), so a
daemon answers its first requests without loading structlog. Anything else
(an exception, another value type, a record from a library) goes to structlog.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from daemon.config import LogFormat

if TYPE_CHECKING:
    import structlog


class _Settings:
    """What ``configure_logging`` was last told, and whether structlog has it yet."""

    levelno: int | None = None
    fmt: LogFormat = "console"
    applied = False
    lock = threading.Lock()


def configure_logging(level: str, fmt: LogFormat) -> None:
    """Send every log line to stderr at ``level`` in ``console`` or ``json`` format."""
    levelno = logging.getLevelNamesMapping()[level.upper()]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(fmt))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(levelno)
    logging.captureWarnings(True)  # warnings.warn(...) becomes a "py.warnings" record
    threading.excepthook = _thread_excepthook
    sys.unraisablehook = _unraisablehook
    with _Settings.lock:
        _Settings.levelno, _Settings.fmt, _Settings.applied = levelno, fmt, False
    if "structlog" in sys.modules:  # already loaded: apply now (costs nothing more)
        _structlog()


def _shared() -> list[structlog.types.Processor]:
    """The processors every line goes through: its level and a UTC timestamp."""
    import structlog

    return [
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def _structlog() -> Any:
    """structlog, imported and configured with the last ``configure_logging`` settings."""
    import structlog

    with _Settings.lock:
        if not _Settings.applied and _Settings.levelno is not None:
            structlog.configure(
                processors=[*_shared(), structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
                wrapper_class=structlog.make_filtering_bound_logger(_Settings.levelno),
                logger_factory=structlog.stdlib.LoggerFactory(),
                cache_logger_on_first_use=False,
            )
            _Settings.applied = True
    return structlog


class _Formatter(logging.Formatter):
    """structlog's ``ProcessorFormatter`` for ``fmt``, built on the first record formatted.

    The handler calls it under its own lock, so it is built once.
    """

    def __init__(self, fmt: LogFormat) -> None:
        super().__init__()
        self.fmt = fmt
        self._built: logging.Formatter | None = None

    def format(self, record: logging.LogRecord) -> str:
        """The record rendered by structlog (console or JSON), or a plain event by ``log``."""
        plain: PlainEvent | None = getattr(record, "brain_plain", None)
        if plain is not None:
            return _plain_line(self.fmt, plain)
        if self._built is None:
            self._built = _processor_formatter(self.fmt)
        return self._built.format(record)


def _processor_formatter(fmt: LogFormat) -> logging.Formatter:
    import structlog

    renderer: list[structlog.types.Processor]
    if fmt == "json":
        # The console renderer formats tracebacks itself; JSON needs them as text.
        renderer = [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        # The default formatter (rich, when installed) prints every frame's locals,
        # which holds request params and message text: a plain traceback does not.
        renderer = [
            structlog.dev.ConsoleRenderer(
                colors=False, exception_formatter=structlog.dev.plain_traceback
            )
        ]
    return structlog.stdlib.ProcessorFormatter(
        # Records from stdlib loggers: their logger name says which library spoke.
        foreign_pre_chain=[*_shared(), structlog.stdlib.add_logger_name],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
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


PlainEvent = tuple[str, str, dict[str, Any], str]
"""A plain event as ``log`` hands it to the handler: level, event, values, timestamp."""

_PLAIN_LEVELS: Final = {
    "debug": ("debug", logging.DEBUG),
    "info": ("info", logging.INFO),
    "warning": ("warning", logging.WARNING),
    "warn": ("warning", logging.WARNING),
    "error": ("error", logging.ERROR),
    "critical": ("critical", logging.CRITICAL),
}
"""Logger methods a plain event may use: the level name structlog writes, and its number."""

_PLAIN_TYPES: Final = (str, int, float, bool, type(None))
_RESERVED: Final = frozenset(
    {"event", "level", "timestamp", "logger", "logger_name", "exc_info", "exception", "stack"}
)
_QUOTED: Final = frozenset(" \t=\r\n\"'")
"""Characters that make structlog's console renderer repr() a string value."""
_LEVEL_WIDTH: Final = 9  # len("exception"), the longest of structlog's level names
_EVENT_WIDTH: Final = 30  # structlog's ConsoleRenderer pad_event


def _plain_line(fmt: LogFormat, plain: PlainEvent) -> str:
    """The line structlog renders for a plain event (``ConsoleRenderer(colors=False)``
    or ``JSONRenderer``, after ``add_log_level`` and the ISO UTC ``TimeStamper``)."""
    level, event, values, stamp = plain
    if fmt == "json":
        return json.dumps({**values, "event": event, "level": level, "timestamp": stamp})
    parts = [stamp, f"[{level.ljust(_LEVEL_WIDTH)}]", event.ljust(_EVENT_WIDTH)]
    for key in sorted(values):
        value = values[key]
        plain_str = isinstance(value, str) and not _QUOTED.intersection(value)
        parts.append(f"{key}={value if plain_str else repr(value)}")
    return " ".join(parts).rstrip(" ")


def _is_plain(event: object, values: dict[str, Any]) -> bool:
    return type(event) is str and all(
        type(v) in _PLAIN_TYPES and k not in _RESERVED for k, v in values.items()
    )


class _Log:
    """The daemon's logger: structlog's, looked up (and structlog loaded) on first use.

    Until something loads structlog, plain events are rendered without it (see
    the module docstring). Its proxy reads structlog's configuration on every
    call, so it is kept: once structlog is loaded, ``configure_logging`` applies
    new settings at once.
    """

    _logger: Any = None

    def __getattr__(self, name: str) -> Any:
        if name in _PLAIN_LEVELS and "structlog" not in sys.modules:
            return lambda event, **values: self._plain(name, event, values)
        return getattr(self._structlog_logger(), name)

    def _structlog_logger(self) -> Any:
        logger = _Log._logger
        if logger is None:
            logger = _Log._logger = _structlog().get_logger("brain")
        return logger

    def _plain(self, method: str, event: Any, values: dict[str, Any]) -> None:
        levelno = _Settings.levelno
        if levelno is None or not _is_plain(event, values):
            # Not configured (structlog's defaults apply) or not plain: structlog's way.
            getattr(self._structlog_logger(), method)(event, **values)
            return
        level, number = _PLAIN_LEVELS[method]
        if number < levelno:
            return
        stamp = datetime.datetime.now(tz=datetime.UTC).isoformat().replace("+00:00", "Z")
        # Through the stdlib logger structlog would use: the same handler, lock and stream.
        logging.getLogger("brain").log(
            number, event, extra={"brain_plain": (level, event, values, stamp)}
        )


log: Any = _Log()
"""The daemon's logger (``log.info("event", key=value)``, as structlog's)."""
