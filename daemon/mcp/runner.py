"""Running ``brain mcp``: the engine kept open, the MCP session on stdio, a bounded stop.

As ``daemon.runner.run`` for ``brain serve``: the engine is opened (created if
new) once, background embedding and compaction run beside the session,
writes are auto-saved, and the end (EOF, SIGTERM/SIGINT, the database file
lost) answers what was received, closes the engine within
``shutdown_timeout_s`` and returns. Every acknowledged write was committed
before its answer, so nothing acknowledged is lost, whatever ends the process.
Several ``brain mcp`` and ``brain serve`` processes may serve one database.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from daemon.config import DaemonConfig
from daemon.logs import log
from daemon.runner import (
    AutoSaver,
    background_start,
    close_engine,
    context_for,
    open_brain,
    watch_signals,
)
from daemon.stopping import Shutdown

if TYPE_CHECKING:
    from daemon.server import ByteSource, FrameSink


async def run(
    config: DaemonConfig, source: ByteSource, sink: FrameSink, *, backstop: bool = False
) -> int:
    """Serve MCP over ``source`` and ``sink`` until EOF or a stop; return the exit code.

    ``backstop``: end the process if stopping overruns its bound (the real
    process only; never in a test's interpreter).
    """
    from brain import __version__
    from daemon.dispatch import Dispatcher
    from daemon.mcp.app import build
    from daemon.mcp.calls import Calls
    from daemon.mcp.tools import Pin
    from daemon.mcp.transport import Stop, serve

    brain = await anyio.to_thread.run_sync(functools.partial(open_brain, config, serve=True))
    log.info("serving mcp", db=str(brain.path), pid=os.getpid())
    shutdown = Shutdown(config.shutdown_timeout_s, backstop=backstop)
    context = context_for(brain, config, shutdown)
    calls = Calls(Dispatcher(context))
    server = build(calls, Pin(config.mcp_session, config.mcp_session_key), __version__)
    stop = Stop()
    saver = AutoSaver(context, config.autosave_writes, config.autosave_seconds)
    # The file was moved, replaced or deleted: every write would be refused, so stop
    # and exit non-zero (close_engine raises) for the host to start a new server.
    context.on_lost(lambda: stop("database file lost"))
    try:
        async with anyio.create_task_group() as tg:
            if threading.current_thread() is threading.main_thread():
                tg.start_soon(watch_signals, stop)
            tg.start_soon(saver.run)
            context.compactions.attach(tg)
            context.on_write(context.embeddings.request)
            if brain.may_switch_embedder:
                tg.start_soon(context.embeddings.run)
            tg.start_soon(background_start, calls.answered, context, tg)
            await serve(
                server,
                source,
                sink,
                stop=stop,
                shutdown=shutdown,
                max_line=config.max_line_bytes,
            )
            brain.stop_compactions()
            context.embeddings.stop()
            tg.cancel_scope.cancel()
    finally:
        await close_engine(context)
    return 0
