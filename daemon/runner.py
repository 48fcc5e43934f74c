"""Running the daemon: open the engine, serve, auto-save, handle signals, flush.

``run(config, source, sink)`` is the whole life of a daemon process minus the
stdio plumbing, so tests can drive it over memory streams.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import anyio
import anyio.to_thread

from brain import (
    Brain,
    BrainError,
    ChildStaticEmbedder,
    Embedder,
    HashEmbedder,
    OnnxEmbedder,
    OpenAIEmbedder,
    OpenAIEmbedderConfig,
    default_embedder,
)
from daemon.config import DaemonConfig
from daemon.context import Context
from daemon.logs import log
from daemon.stopping import Shutdown

# What only a serving daemon needs (the server, systemd notification, the
# watchdog probe) is imported by ``run``: ``brain call`` opens the engine here too.
if TYPE_CHECKING:
    import anyio.abc

    from brain import Summarizer
    from daemon.notify import Notifier
    from daemon.server import ByteSource, FrameSink


class AutoSaver:
    """Saves after ``every_writes`` acknowledged writes, and every ``every_seconds`` if dirty."""

    def __init__(self, context: Context, every_writes: int, every_seconds: float) -> None:
        self.context = context
        self.every_writes = every_writes
        self.every_seconds = every_seconds
        self.saved_at = 0
        self.saves = 0
        self._due = anyio.Event()
        context.on_write(self._written)

    def _written(self) -> None:
        if self.context.writes - self.saved_at >= self.every_writes:
            self._due.set()

    async def run(self) -> None:
        """Loop forever (until cancelled), saving when due."""
        while True:
            with anyio.move_on_after(self.every_seconds):
                await self._due.wait()
            self._due = anyio.Event()
            writes = self.context.writes
            if writes == self.saved_at:
                continue
            try:
                result = await self.context.db(self.context.brain.save)
            except BrainError as exc:  # expected (a busy database): no traceback
                log.warning("auto-save failed", error=repr(exc))
                continue
            except Exception:  # a failed auto-save must not end the daemon
                log.exception("auto-save failed")
                continue
            self.saved_at = writes
            self.saves += 1
            log.debug("auto-saved", writes=writes, wal_frames=result.wal_frames)


def make_embedder(config: DaemonConfig, *, serve: bool = False) -> Embedder:
    """The embedder ``config.embedder`` names; raises ``RuntimeError`` if it cannot run here.

    ``serve``: for a serving daemon, whose background worker embeds backlogs of
    thousands of rows: the static embedder then embeds its large batches in a child
    process (``brain.vectors.embed_child``), off the interpreter lock the event loop
    answers ``ping`` and ``info`` with; its vectors and identity are the same.
    """
    if config.embedder == "hash":
        return HashEmbedder()
    if config.embedder == "onnx":
        if not OnnxEmbedder.available():
            raise RuntimeError(OnnxEmbedder.missing())
        return OnnxEmbedder()
    if config.embedder == "openai":
        # DaemonConfig refuses embedder openai without these two.
        assert config.embed_base_url is not None
        assert config.embed_model is not None
        return OpenAIEmbedder(
            OpenAIEmbedderConfig(
                base_url=config.embed_base_url,
                model=config.embed_model,
                api_key=config.embed_api_key,
                dim=config.embed_dim,
                batch_size=config.embed_batch,
                timeout_s=config.embed_timeout_s,
                deadline_s=config.provider_deadline_s,
            )
        )
    if serve:
        return ChildStaticEmbedder()
    return default_embedder()


def open_brain(config: DaemonConfig, *, serve: bool = False) -> Brain:
    """The engine for a config: its embedder, and the LLM summarizer when one is configured.

    Only a serving daemon (``serve``) creates a database that never existed and,
    when its embedder was chosen explicitly, switches the stored vectors to it;
    every other command opens an existing database and refuses another embedder.
    """
    embedder = make_embedder(config, serve=serve)
    summarizer: Summarizer | None = None
    chat = None
    if config.llm_base_url and config.llm_model:
        from brain import ChatClient, LLMConfig, LLMSummarizer

        chat = ChatClient(
            LLMConfig(
                base_url=config.llm_base_url,
                model=config.llm_model,
                api_key=config.llm_api_key,
                timeout_s=config.llm_timeout_s,
                deadline_s=config.provider_deadline_s,
            )
        )
        summarizer = LLMSummarizer(chat, config.llm_model)
    elif serve:
        # The offline summarizer is pure Python: in a thread of the daemon it took the
        # interpreter lock from every reader while a compaction ran (issue 17).
        from brain import ChildSummarizer

        summarizer = ChildSummarizer(config.brain.compaction.offline_summarizer)
    brain = Brain(
        config.db,
        config.brain,
        summarizer=summarizer,
        embedder=embedder,
        create=serve,
        may_switch_embedder=serve and config.embedder_chosen,
    )
    if chat is not None:
        brain.chat = chat
    return brain


def context_for(brain: Brain, config: DaemonConfig, shutdown: Shutdown | None = None) -> Context:
    """The handlers' context for an engine opened from ``config``."""
    return Context(
        brain,
        provider_concurrency=config.provider_concurrency,
        provider_deadline_s=config.provider_deadline_s,
        shutdown=shutdown,
        retention_every_s=config.retention_every_s,
    )


async def run(
    config: DaemonConfig,
    source: ByteSource,
    sink: FrameSink,
    notifier: Notifier | None = None,
    *,
    backstop: bool = False,
) -> int:
    """Serve one database until EOF, ``shutdown`` or SIGTERM/SIGINT; return the exit code.

    ``notifier`` tells systemd when the daemon is ready, alive and stopping
    (``brain serve`` passes one built from its environment; none: silent).
    ``backstop``: end the process if stopping overruns its bound (``brain
    serve`` only; never in a test's interpreter).
    """
    from daemon.notify import Notifier

    notifier = notifier or Notifier(None)
    failure: Exception | None = None
    try:
        async with anyio.create_task_group() as watchdog:
            # From start to the last flush: systemd's watchdog keeps running while
            # the service stops, so a slow open or a slow close must still ping.
            watchdog.start_soon(notifier.watchdog)
            try:
                await _run(config, source, sink, notifier, backstop)
            except Exception as exc:
                # Raised below, outside the group, so callers see the error itself
                # ("cannot open database") rather than an ExceptionGroup around it.
                failure = exc
            finally:
                notifier.stopping()
                watchdog.cancel_scope.cancel()
    finally:
        notifier.close()
    if failure is not None:
        raise failure
    return 0


async def _run(
    config: DaemonConfig, source: ByteSource, sink: FrameSink, notifier: Notifier, backstop: bool
) -> None:
    from daemon.dispatch import Dispatcher
    from daemon.health import EngineProbe
    from daemon.server import Server

    brain = await anyio.to_thread.run_sync(functools.partial(open_brain, config, serve=True))
    log.info("serving", db=str(brain.path), pid=os.getpid())
    shutdown = Shutdown(config.shutdown_timeout_s, backstop=backstop)
    context = context_for(brain, config, shutdown)
    server = Server(
        Dispatcher(context),
        sink,
        max_line=config.max_line_bytes,
        max_inflight=config.max_inflight,
        max_queued_request_bytes=config.max_queued_request_bytes,
        max_unread_output_bytes=config.max_unread_output_bytes,
        on_stop=lambda reason: notifier.stopping(f"stopping: {reason}"),
    )
    saver = AutoSaver(context, config.autosave_writes, config.autosave_seconds)
    # The file was moved, replaced or deleted: every write would now be refused, so
    # stop and exit non-zero for the supervisor to restart on the file at the path.
    context.on_lost(lambda: server.stop("database file lost"))
    try:
        async with anyio.create_task_group() as tg:
            if threading.current_thread() is threading.main_thread():
                tg.start_soon(watch_signals, server.stop)
            tg.start_soon(saver.run)
            context.compactions.attach(tg)
            context.on_write(context.embeddings.request)
            if brain.may_switch_embedder:
                # Told which embedder to use: the embedder takes the stored vectors over
                # at once (the first answers already show the switch), as it always did.
                tg.start_soon(context.embeddings.run)
            tg.start_soon(background_start, server.answered, context, tg)
            if notifier.watchdog_s is not None:
                probe = EngineProbe(context, config.watchdog_stall_s)
                tg.start_soon(probe.run)
                notifier.healthy = probe.healthy
            # The engine is open and nothing stands between the source and the
            # dispatcher any more: the next line read gets an answer.
            notifier.ready(f"serving {brain.path}")
            await server.serve(source)
            # Stopping: the bounded close follows, and systemd's watchdog keeps
            # running meanwhile; a probe stuck behind abandoned work must not end it.
            notifier.healthy = None
            brain.stop_compactions()
            context.embeddings.stop()
            tg.cancel_scope.cancel()
    finally:
        await close_engine(context)


async def close_engine(context: Context) -> None:
    """Close the engine within the stop's bound; raise if the database file was lost.

    Called once serving ended, by an error too: the close is bounded all the same.
    """
    brain, shutdown = context.brain, context.shutdown
    shutdown.begin()
    closed = False
    with anyio.CancelScope(shield=True), anyio.move_on_after(shutdown.bound()):
        # Abandoned on timeout: a worker thread stuck inside the engine holds
        # its lock, and the close would wait for it forever.
        await anyio.to_thread.run_sync(brain.close, abandon_on_cancel=True)
        closed = True
    if not closed:
        log.warning("engine close timed out; committed work is in the WAL", db=str(brain.path))
    embedder = brain.embedder
    if isinstance(embedder, ChildStaticEmbedder):  # its child ends with the engine
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(embedder.close, abandon_on_cancel=True)
    log.info("closed", db=str(brain.path), writes=context.writes, abandoned=shutdown.abandoned)
    if context.lost is not None:
        raise context.lost


WARM_UP_WAIT_S: Final = 0.5
"""Background work starts after the first answer, or this long after start without one."""


async def background_start(
    answered: anyio.Event, context: Context, tg: anyio.abc.TaskGroup
) -> None:
    """Start the background work once the first request is ``answered`` (or after a wait).

    Its first steps import what a request may never need (the summarizer for a
    rebuild; numpy, the vector index and the embedding model for the queue) and
    would compete for the interpreter lock with the first request's answer.
    (A daemon told which embedder to use started its embedder already.)
    """
    with anyio.move_on_after(WARM_UP_WAIT_S):
        await answered.wait()
    if not context.brain.may_switch_embedder:
        tg.start_soon(context.embeddings.run)
    try:
        # Withheld summaries whose rebuild did not land before the last stop.
        for session in await context.db(context.brain.withheld_sessions):
            context.compactions.request(session, rebuild_only=True)
    except Exception as exc:  # background work must never end the daemon
        log.warning("looking for withheld summaries failed", error=repr(exc))
    if not context.inline:
        try:
            # The graph's mirror and vectors, so a later first query does not load them.
            await context.db(context.brain.warm_graph)
        except Exception as exc:  # background work must never end the daemon
            log.warning("loading the graph failed", error=repr(exc))


async def watch_signals(stop: Callable[[str], None]) -> None:
    """Call ``stop`` with the signal's name on each SIGTERM, SIGINT or SIGHUP (until cancelled)."""
    # SIGHUP (a closed terminal, a dropped ssh session) killed the daemon without a
    # clean close; it stops like SIGTERM. There is no reload: settings are fixed at start.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            log.info("signal", signal=signal.Signals(signum).name)
            stop(signal.Signals(signum).name)
