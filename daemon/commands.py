"""What each ``brain`` subcommand does once its command line is parsed (``daemon.cli``).

``serve`` runs the daemon, ``mcp`` the MCP server (``daemon.mcp``), ``call`` one
request through the daemon's dispatcher, ``sync``, ``maintain``, ``bootstrap`` and
``doctor`` open the database in this process, and ``tools`` prints the tool
definitions. Each takes the loaded configuration and the parsed arguments and
returns the exit status. Tested through the ``brain`` command:
tests/e2e/test_cli.py, test_doctor_cli.py, test_sync_daemon.py and the other
end-to-end files run it as a subprocess.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any, Final, TextIO, TypeVar

import orjson

from daemon.config import DaemonConfig
from daemon.logs import log

if TYPE_CHECKING:
    from brain import Brain

T = TypeVar("T")

CALL_EMBED_MAX: Final = 10_000
"""Queued rows a ``brain call`` semantic or hybrid grep embeds for its own answer, at most
(about 0.4 s with the static embedder); the rest stay queued and show as ``pending``."""

MCP_REQUIREMENT: Final = "mcp>=2.3,<3"
"""The ``mcp`` extra's requirement (pyproject.toml; tests/test_packaging.py keeps them equal)."""

MCP_MISSING: Final = (
    "brain mcp needs the MCP SDK (brain's mcp extra), which this Python does not have. "
    "Install it beside brain: {python} -m pip install '" + MCP_REQUIREMENT + "'; "
    "or install brain with the extra: pip install '.[mcp]' in a clone of brain, "
    "or pip install 'dist/brain_memory-VERSION-py3-none-any.whl[mcp]' from a built wheel."
)
"""What ``brain mcp`` says without the SDK: commands that work from a clone or a wheel (no
``brain-memory`` is published on PyPI, and a stranger could publish that name)."""


def serve(config: DaemonConfig, args: argparse.Namespace) -> int:
    """Run the daemon on stdin/stdout until shutdown, end of input or a signal."""
    import anyio

    from brain import BrainError
    from daemon.notify import Notifier
    from daemon.runner import run
    from daemon.stdio import StdinSource, StdoutSink, claim_stdout
    from daemon.stopping import GRACE_S, exit_now_if_stuck
    from daemon.switching import shorten_switch_interval

    shorten_switch_interval()  # cheap requests must not wait 5 ms for a busy worker
    notifier = Notifier.from_environ()  # read and unset $NOTIFY_SOCKET before anything forks
    sink = StdoutSink(claim_stdout())
    code = 1
    try:
        code = anyio.run(partial(run, backstop=True), config, StdinSource(0), sink, notifier)
    except BrainError as exc:  # cannot open the database, etc.: the message says it all
        log.error("daemon failed", error=str(exc))
    except Exception:  # anything else is a bug: keep its traceback
        log.exception("daemon failed")
    finally:
        # Bounded: a client that stopped reading must not hold the exit.
        sink.close(GRACE_S)
    # Worker threads abandoned at shutdown (stuck on a lock, a provider) would
    # keep the interpreter alive; everything committed is committed by now.
    exit_now_if_stuck(code)
    return code


def mcp(config: DaemonConfig, args: argparse.Namespace) -> int:
    """Serve the memory as an MCP server on stdin/stdout (``daemon.mcp``)."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        print(MCP_MISSING.format(python=sys.executable), file=sys.stderr)
        return 2
    import anyio

    from brain import BrainError
    from daemon.mcp.runner import run
    from daemon.stdio import StdinSource, StdoutSink, claim_stdout
    from daemon.stopping import GRACE_S, exit_now_if_stuck
    from daemon.switching import shorten_switch_interval

    shorten_switch_interval()  # as serve: requests must not wait 5 ms for a busy worker
    sink = StdoutSink(claim_stdout())
    code = 1
    try:
        code = anyio.run(partial(run, backstop=True), config, StdinSource(0), sink)
    except BrainError as exc:  # cannot open the database, etc.: the message says it all
        log.error("mcp server failed", error=str(exc))
    except Exception:  # anything else is a bug: keep its traceback
        log.exception("mcp server failed")
    finally:
        sink.close(GRACE_S)  # bounded: a host that stopped reading must not hold the exit
    exit_now_if_stuck(code)
    return code


def call(config: DaemonConfig, args: argparse.Namespace) -> int:
    """Run one request in-process through the same dispatcher the daemon uses.

    The database must exist (a missing one is a -32008 error and nothing is
    created), and the stored vectors' embedder is never switched. With no
    background embedder in this process, a semantic or hybrid grep embeds the
    queued rows of its scope (up to ``CALL_EMBED_MAX``) before it searches.
    A loop-free method without a grant (``info``, ``ingest``, ...) runs with no
    event loop, its engine work in this thread: anyio's asyncio backend and
    asyncio (~40 ms) are loaded only by the methods that wait on something.
    """
    from brain import BrainError
    from daemon.dispatch import Answer, Dispatcher, to_wire
    from daemon.runner import context_for, open_brain
    from protocol.framing import encode_frame
    from protocol.wire import error_frame

    raw = sys.stdin.buffer.read() if args.params == "-" else (args.params or "{}").encode()
    try:
        params = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        print(f"brain call: PARAMS is not JSON: {exc}", file=sys.stderr)
        return 2
    show = sys.stderr.isatty() if args.progress is None else bool(args.progress)
    line = encode_frame({"id": 1, "method": args.method, "params": params, "progress": show})
    bar = ProgressBar(sys.stderr)

    def once() -> bytes | None:
        try:
            brain = open_brain(config)
        except BrainError as exc:  # no database there, etc.
            return error_frame(1, to_wire(exc, args.method))
        brain.embed_before_search = CALL_EMBED_MAX
        try:
            context = context_for(brain, config)
            dispatcher = Dispatcher(context)
            item = dispatcher.prepare(line)
            if isinstance(item, Answer):
                return item.frame
            if item.handler.loop_free and item.request.grant is None:
                context.inline = True
                return _run_loop_free(dispatcher.execute(item, bar.send))
            import anyio

            return anyio.run(dispatcher.execute, item, bar.send)
        finally:
            brain.close()

    try:
        frame = once()
    finally:
        bar.finish()
    assert frame is not None
    response = orjson.loads(frame)
    if "error" in response:
        code = 1
        sys.stdout.buffer.write(orjson.dumps({"error": response["error"]}) + b"\n")
    else:
        code = 0
        sys.stdout.buffer.write(
            orjson.dumps(response["result"], option=orjson.OPT_INDENT_2) + b"\n"
        )
    sys.stdout.flush()
    # The answer is decided at ``provider_deadline_s``, but a provider thread may
    # still be reading a trickling body (each read within its timeout, the whole
    # never done): the interpreter would join it at exit for minutes. The engine
    # is closed and the answer written, so such a thread holds nothing to save.
    from daemon.stopping import exit_now_if_stuck

    exit_now_if_stuck(code)
    return code


def _run_loop_free(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (a loop-free handler's, ``Context.inline``).

    Its awaits all complete at once, so one ``send`` runs it to the end; a
    coroutine that suspends would need an event loop, which a handler marked
    loop-free must never need.
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coroutine.close()
    raise RuntimeError("a loop-free handler suspended; it needs an event loop")


def _offline(config: DaemonConfig, name: str, work: Callable[[Brain], T]) -> T | None:
    """Open the database in this process, run ``work`` on it, close it.

    For the commands that run beside a serving daemon (their writes are short
    transactions). A failure to open or an engine error is printed as
    ``brain NAME: ...`` on stderr and gives None.
    """
    from brain import BrainError
    from daemon.runner import open_brain

    try:
        brain = open_brain(config)
    except Exception as exc:  # cannot open the database, etc.
        print(f"brain {name}: {exc}", file=sys.stderr)
        return None
    try:
        return work(brain)
    except BrainError as exc:
        print(f"brain {name}: {exc}", file=sys.stderr)
        return None
    finally:
        brain.close()


def maintain(config: DaemonConfig, args: argparse.Namespace) -> int:
    """Run the graph's slow loop in this process; safe while a daemon serves the database.

    Writes go in chunks of short transactions (WAL and the busy timeout let the
    daemon's requests in between), each bumping the graph epoch, so the daemon's
    mirror and vector index reload before they answer again.
    """
    from brain import MAINTAIN_TASKS, InvalidInput, MaintainOptions

    tasks = (
        [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else MAINTAIN_TASKS
    )
    try:
        options = MaintainOptions(half_life_days=args.half_life_days, prune_below=args.prune_below)
    except InvalidInput as exc:
        # Refused before the database is opened: nothing is read or written.
        print(f"brain maintain: {exc}", file=sys.stderr)
        return 2
    report = _offline(
        config,
        "maintain",
        lambda brain: brain.maintain(tasks, dry_run=args.dry_run, options=options, in_child=False),
    )
    if report is None:
        return 1
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(report.to_dict()) + b"\n")
        return 0
    before, after = report.health_before, report.health_after
    print(
        f"{'dry run: ' if report.dry_run else ''}nodes {before.nodes} -> {after.nodes}, "
        f"edges {before.edges} -> {after.edges}, orphans {before.orphans} -> {after.orphans}, "
        f"dormant {before.dormant_share:.1%} -> {after.dormant_share:.1%} "
        f"({report.took_ms:.0f} ms)"
    )
    for name, task in report.tasks.items():
        counts = ", ".join(f"{k} {v}" for k, v in task.items() if k not in ("ids", "took_ms"))
        print(f"  {name}: {counts}")
    return 0


def doctor(config: DaemonConfig, args: argparse.Namespace) -> int:
    """Check the database (and repair what is safe); exit 0 only when every check is ok.

    Safe while a daemon serves the database: checks are reads, and every repair
    is its own short transaction.
    """
    from brain import BrainError, doctor, doctor_report_json, format_doctor_report

    try:
        report = doctor(config.db, config.brain, repair=args.repair, deep=args.deep)
    except BrainError as exc:
        print(f"brain doctor: {exc}", file=sys.stderr)
        return 2
    if args.json:
        sys.stdout.buffer.write(doctor_report_json(report) + b"\n")
    else:
        print(format_doctor_report(report))
    return 0 if report.ok else 1


def sync(config: DaemonConfig, args: argparse.Namespace) -> int:
    """Sync a workspace in this process; safe while a daemon serves the same database.

    Each file is its own short transaction (WAL and the busy timeout let the
    daemon's requests in between), and the daemon's mirror and vector index
    notice the new epochs and reload before they answer again.
    """
    import dataclasses

    report = _offline(config, "sync", lambda brain: brain.sync(args.workspace, args.path))
    if report is None:
        return 1
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(dataclasses.asdict(report)) + b"\n")
    else:
        print(
            f"{report.workspace}: {report.files} files; chunks {report.added} added, "
            f"{report.kept} kept, {report.moved} moved, {report.removed} removed; "
            f"{report.nodes} nodes; {report.embedded} embedded, {report.pending} pending; "
            f"{len(report.refused)} refused ({report.took_ms:.0f} ms)"
        )
        for refused in report.refused:  # never read: a link out, a FIFO, a vanished file
            print(f"  refused {refused.path}: {refused.reason}")
    return 0


def bootstrap(config: DaemonConfig, args: argparse.Namespace) -> int:
    """Import a JSONL transcript in this process; safe while a daemon serves the database.

    Each batch of messages is its own short transaction, so a serving daemon's
    requests go on in between.
    """
    import dataclasses

    report = _offline(
        config,
        "bootstrap",
        lambda brain: brain.bootstrap(
            args.session, args.file, session_key=args.session_key, on_fork=args.on_fork
        ),
    )
    if report is None:
        return 1
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(dataclasses.asdict(report)) + b"\n")
    else:
        fork = f"; forked after {report.fork_point!r}" if report.forked else ""
        print(
            f"{report.session}: {report.format} transcript, {report.path_length} messages on "
            f"the path; {report.imported} imported, {report.already_present} already present, "
            f"{report.skipped} skipped{fork} ({report.took_ms:.0f} ms)"
        )
    return 0


def tools(args: argparse.Namespace) -> int:
    """Print the model-facing tool definitions (``protocol.tools``) as JSON."""
    from protocol.tools import definitions

    text = orjson.dumps(definitions(args.format), option=orjson.OPT_INDENT_2)
    sys.stdout.buffer.write(text + b"\n")
    return 0


class ProgressBar:
    """Renders ``progress`` notifications as one self-rewriting line on a stream."""

    WIDTH = 30

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.drawn = False

    async def send(self, frame: bytes) -> None:
        """Take a frame the dispatcher would send the client; draw progress ones."""
        message = orjson.loads(frame)
        if message.get("method") == "progress":
            self.draw(message["params"])

    def draw(self, params: dict[str, Any]) -> None:
        """One line: phase, a bar when the total is known, and the counts."""
        done, total, phase = params.get("done", 0), params.get("total"), params.get("phase", "")
        if total:
            filled = min(self.WIDTH, self.WIDTH * done // total)
            bar = "#" * filled + "-" * (self.WIDTH - filled)
            text = f"{phase:>10} [{bar}] {done}/{total}"
        else:
            text = f"{phase:>10} {done}"
        self.stream.write("\r" + text.ljust(self.WIDTH + 30))
        self.stream.flush()
        self.drawn = True

    def finish(self) -> None:
        """End the progress line, if one was drawn."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
