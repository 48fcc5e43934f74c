"""The ``brain`` parser built for one subcommand parses, helps and errs as the full one."""

from __future__ import annotations

import argparse

import pytest

from daemon.cli import COMMANDS, _parser


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[command]
            return found
    raise AssertionError("no subcommands")


def test_the_commands_list_names_every_subcommand_in_order() -> None:
    full = _parser()
    subcommands = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    assert tuple(subcommands.choices) == COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_a_parser_built_for_one_command_gives_that_commands_help_unchanged(command: str) -> None:
    alone = _subparser(_parser(command), command)
    assert alone.format_help() == _subparser(_parser(), command).format_help()


def test_a_parser_built_for_one_command_parses_its_command_line_as_the_full_one() -> None:
    argv = ["call", "ingest", "--db", "x.db", "--log-level", "debug"]
    alone, _ = _parser("call").parse_known_args(argv)
    full, _ = _parser().parse_known_args(argv)
    assert vars(alone) == vars(full)
