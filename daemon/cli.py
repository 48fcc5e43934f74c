"""The ``brain`` command: ``brain serve`` (the daemon), ``brain mcp`` (the same engine as an
MCP server: ``daemon.mcp``), ``brain call`` (one request),
``brain sync`` (index a workspace's markdown into the graph), ``brain doctor``
(check and repair a database) and ``brain tools`` (model-facing tool definitions;
no database).

``python -m daemon [options]`` is ``brain serve [options]``. This module parses the
command line (each subcommand takes only its scopes' configuration flags) and
loads the configuration; ``daemon.commands`` holds what each subcommand does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

from daemon import commands
from daemon.blas import limit_blas_threads
from daemon.config import OPTIONS, SCOPES, load_config
from daemon.logs import configure_logging

COMMANDS: Final = ("serve", "mcp", "call", "sync", "maintain", "bootstrap", "doctor", "tools")
"""The subcommands, in the order ``brain --help`` lists them."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``brain`` console script."""
    limit_blas_threads()  # before anything imports numpy (daemon.blas)
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
        return commands.tools(args)
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
    "mcp": "MCP",
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
        serve.set_defaults(func=commands.serve)
    if only in (None, "mcp"):
        mcp = sub.add_parser(
            "mcp",
            help="serve the memory as an MCP server on stdin/stdout",
            description="An MCP (Model Context Protocol) server over stdio for agent hosts: "
            "memory_* tools, brain:// resources and prompts over the same engine as brain "
            "serve. Needs brain's mcp extra (the MCP SDK): pip install '.[mcp]' in a clone of "
            "brain, or the wheel with [mcp].",
            parents=_options("mcp"),
        )
        mcp.set_defaults(func=commands.mcp)
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
        call.set_defaults(func=commands.call)
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
        sync.set_defaults(func=commands.sync)
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
        maintain.set_defaults(func=commands.maintain)
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
        boot.set_defaults(func=commands.bootstrap)
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
        doc.set_defaults(func=commands.doctor)
    if only in (None, "tools"):
        from protocol.tools import TOOLS  # the list itself, so the help never leaves one out

        tools = sub.add_parser(
            "tools",
            help="print model-facing tool definitions (JSON schemas) for a host agent",
            description="Print the memory_* tool definitions a host gives its model: "
            f"{', '.join(t.method for t in TOOLS)}. They omit session: the host "
            "adds it (protocol.tools.request). Needs no database.",
        )
        tools.add_argument(
            "--format",
            choices=("openai", "anthropic"),
            default="openai",
            help="OpenAI Chat Completions tools or Anthropic Messages tools (default openai)",
        )
        tools.set_defaults(func=commands.tools)
    return parser


if __name__ == "__main__":
    sys.exit(main())
