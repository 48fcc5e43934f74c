"""Structured logs to stderr (never stdout: that is the wire)."""

from __future__ import annotations

import logging
import sys

import structlog

from daemon.config import LogFormat


def configure_logging(level: str, fmt: LogFormat) -> None:
    """Send structlog output to stderr at ``level`` in ``console`` or ``json`` format."""
    processors: list[structlog.types.Processor] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        # The console renderer formats tracebacks itself; JSON needs them as text.
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=False))
    # Libraries (brain.llm's retry warnings, httpx) log through the standard
    # logging module: send it to stderr at the same level.
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.getLevelNamesMapping()[level.upper()],
        format="%(asctime)s [%(levelname)-8s] %(name)s: %(message)s",
        force=True,
    )
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


log = structlog.get_logger("brain")
"""The daemon's logger."""
