"""The ``brain`` command: ``brain serve`` (the daemon), ``brain call`` (one request),
``brain sync`` (index a workspace's markdown into the graph), ``brain doctor``
(check and repair a database) and ``brain tools`` (model-facing tool definitions;
no database).

``python -m daemon [options]`` is ``brain serve [options]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final, TextIO, TypeVar

import orjson

from daemon.config import OPTIONS, SCOPES, DaemonConfig, load_config
from daemon.logs import configure_logging, log

if TYPE_CHECKING:
    from brain import Brain

T = TypeVar("T")

CALL_EMBED_MAX: Final = 10_000
"""Queued rows a ``brain call`` semantic or hybrid grep embeds for its own answer, at most
(about 0.4 s with the static embedder); the rest stay queued and show as ``pending``."""


COMMANDS: Final = ("serve", "call", "sync", "maintain", "bootstrap", "doctor", "tools")
"""The subcommands, in the order ``brain --help`` lists them."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``brain`` console script."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = _parser(words[0] if words and words[0] in COMMANDS else None)
    # parse_known_args: argparse cannot take the optional PARAMS positional of
    # `brain call` after flags (`brain call ingest --db X '{...}'`) on its own.
    args, extra = parser.parse_known_args(argv)
    if extra and args.command == "call" and args.params is None and len(extra) == 1:
        args.params = extra[0]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "tools":  # needs no database, configuration or logging
        return _tools(args)
    # A command takes only its scopes' options as flags; the rest come from the
    # file or the environment.
    flags = {o.key: getattr(args, o.key, None) for o in OPTIONS}
    try:
        config = load_config(flags, config_file=args.config)
    except (ValueError, OSError) as exc:
        parser.error(str(exc))
    configure_logging(config.log_level, config.log_format)
    command: Any = args.func
    return int(command(config, args))


def _serve(config: DaemonConfig, args: argparse.Namespace) -> int:
    import anyio

    from brain import BrainError
    from daemon.notify import Notifier
    from daemon.runner import run
    from daemon.stdio import StdinSource, StdoutSink, claim_stdout
    from daemon.stopping import GRACE_S, exit_now_if_stuck

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


def _call(config: DaemonConfig, args: argparse.Namespace) -> int:
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
        sys.stdout.buffer.write(orjson.dumps({"error": response["error"]}) + b"\n")
        return 1
    sys.stdout.buffer.write(orjson.dumps(response["result"], option=orjson.OPT_INDENT_2) + b"\n")
    return 0


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


def _maintain(config: DaemonConfig, args: argparse.Namespace) -> int:
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
        lambda brain: brain.maintain(tasks, dry_run=args.dry_run, options=options),
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


def _doctor(config: DaemonConfig, args: argparse.Namespace) -> int:
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


def _sync(config: DaemonConfig, args: argparse.Namespace) -> int:
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


def _bootstrap(config: DaemonConfig, args: argparse.Namespace) -> int:
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


def _tools(args: argparse.Namespace) -> int:
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


class _Version(argparse.Action):
    """``--version``: prints ``brain <version>`` and exits; imports the version only then."""

    def __init__(self, option_strings: Sequence[str], dest: str, **_ignored: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any, **__: Any) -> None:
        from brain import __version__

        print(f"brain {__version__}")
        parser.exit()


_SCOPE_TITLES: Final = {
    "common": "database and logging",
    "store": "storage",
    "engine": "engine and providers",
    "serve": "serving",
}


def _options(command: str) -> list[_Parser]:
    """Parent parsers holding the configuration flags ``command`` takes, by scope."""
    parent = _Parser(add_help=False)
    for scope in SCOPES[command]:
        group = parent.add_argument_group(f"{_SCOPE_TITLES[scope]} options")
        if scope == "common":
            group.add_argument("--config", help="TOML config file (default $BRAIN_CONFIG)")
        for option in OPTIONS:
            if option.scope != scope:
                continue
            choices = option.choices
            group.add_argument(
                f"--{option.key.replace('_', '-')}",
                dest=option.key,
                # Shown, not enforced here: the option's own parser takes any case
                # and names the option in its error.
                metavar="{" + ",".join(choices) + "}" if choices else option.key.upper(),
                help=f"{option.help} (${option.env})",
            )
    return [parent]


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose epilog can be built only when help is shown.

    ``brain call``'s epilog lists every method (``protocol.methods``), which a
    call that is not asking for help has no reason to import.
    """

    def __init__(self, *args: Any, epilog_from: Callable[[], str] | None = None, **kwargs: Any):
        self._epilog_from = epilog_from
        super().__init__(*args, **kwargs)

    @property
    def epilog(self) -> str | None:
        """The epilog text, built now when it is built on demand."""
        return self._epilog_from() if self._epilog_from is not None else self._epilog

    @epilog.setter
    def epilog(self, value: str | None) -> None:
        self._epilog = value


def _methods_epilog() -> str:
    from protocol.methods import METHODS

    width = max(len(name) for name in METHODS)
    lines = [f"  {name:<{width}}  {spec.summary}" for name, spec in METHODS.items()]
    return "methods (params and results: README, Protocol reference):\n" + "\n".join(lines)


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``brain`` parser; ``only``: with that subcommand alone (~5 ms less to build).

    ``main`` asks for one when the command line starts with a known command: its
    parsing, help and errors are the same as the full parser's.
    """
    parser = argparse.ArgumentParser(
        prog="brain", description="Memory daemon for AI agents (NDJSON over stdio)."
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    if only in (None, "serve"):
        serve = sub.add_parser(
            "serve", help="run the daemon on stdin/stdout", parents=_options("serve")
        )
        serve.set_defaults(func=_serve)
    if only in (None, "call"):
        call = sub.add_parser(
            "call",
            help="run one request and print its result",
            parents=_options("call"),
            epilog_from=_methods_epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        call.add_argument("method", help="method name, e.g. info (listed below)")
        call.add_argument("params", nargs="?", help="params as JSON ('-' reads stdin)")
        call.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="show a progress bar on stderr (default: when stderr is a terminal)",
        )
        call.set_defaults(func=_call)
    if only in (None, "sync"):
        sync = sub.add_parser(
            "sync",
            help="index a workspace's markdown files into the graph",
            parents=_options("sync"),
        )
        sync.add_argument("--workspace", required=True, help="the workspace directory")
        sync.add_argument(
            "--path",
            action="append",
            default=[],
            help="an extra file or directory to index (repeatable; relative, inside the workspace)",
        )
        sync.add_argument("--json", action="store_true", help="print the report as JSON")
        sync.set_defaults(func=_sync)
    if only in (None, "maintain"):
        maintain = sub.add_parser(
            "maintain",
            help="decay, merge, prune, connect and scale the retrieval graph",
            parents=_options("maintain"),
        )
        maintain.add_argument(
            "--tasks", help="comma-separated: health,decay,merge,prune,connect,scale (default all)"
        )
        maintain.add_argument("--dry-run", action="store_true", help="report, write nothing")
        maintain.add_argument(
            "--half-life-days", type=float, default=14.0, help="edge decay half-life (default 14)"
        )
        maintain.add_argument(
            "--prune-below", type=float, default=0.05, help="prune edges weaker (default 0.05)"
        )
        maintain.add_argument("--json", action="store_true", help="print the report as JSON")
        maintain.set_defaults(func=_maintain)
    if only in (None, "bootstrap"):
        boot = sub.add_parser(
            "bootstrap",
            help="import a session's JSONL transcript (resumable)",
            parents=_options("bootstrap"),
        )
        boot.add_argument(
            "file", help="the transcript: an OpenClaw session or {role, content} lines"
        )
        boot.add_argument("--session", required=True, help="the session to import into")
        boot.add_argument("--session-key", help="file the session under this key")
        boot.add_argument(
            "--on-fork",
            choices=("refuse", "append"),
            default="refuse",
            help="when stored messages follow the newest transcript message stored "
            "(default refuse)",
        )
        boot.add_argument("--json", action="store_true", help="print the report as JSON")
        boot.set_defaults(func=_bootstrap)
    if only in (None, "doctor"):
        doc = sub.add_parser(
            "doctor",
            help="check the database's invariants; --repair fixes",
            parents=_options("doctor"),
        )
        doc.add_argument("--repair", action="store_true", help="repair what loses no data")
        doc.add_argument(
            "--deep", action="store_true", help="full integrity_check and sha256 of every payload"
        )
        doc.add_argument("--json", action="store_true", help="print the report as JSON")
        doc.set_defaults(func=_doctor)
    if only in (None, "tools"):
        tools = sub.add_parser(
            "tools",
            help="print model-facing tool definitions (JSON schemas) for a host agent",
            description="Print the memory_* tool definitions a host gives its model: grep, "
            "describe, expand, expand_query, query, teach, learn. They omit session: the host "
            "adds it (protocol.tools.request). Needs no database.",
        )
        tools.add_argument(
            "--format",
            choices=("openai", "anthropic"),
            default="openai",
            help="OpenAI Chat Completions tools or Anthropic Messages tools (default openai)",
        )
        tools.set_defaults(func=_tools)
    return parser


if __name__ == "__main__":
    sys.exit(main())
