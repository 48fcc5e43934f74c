"""The README's reference tables are kept in step with the code."""

from __future__ import annotations

import re
from pathlib import Path

from daemon.config import OPTIONS, DaemonConfig
from protocol.errors import ERROR_CODES
from protocol.methods import METHODS

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(title)
    following = re.search(r"^#{2,3} ", README[start + len(title) :], re.MULTILINE)
    return README[start : start + len(title) + (following.start() if following else len(README))]


def test_the_methods_table_lists_exactly_the_protocol_methods() -> None:
    rows = re.findall(r"^\| `(\w+)` \|", _section("### Methods"), re.MULTILINE)
    assert sorted(rows) == sorted(METHODS)


def test_the_error_table_lists_exactly_the_codes_with_their_names() -> None:
    rows = re.findall(r"^\| (-\d+) \| (\w+) \|", _section("### Error codes"), re.MULTILINE)
    assert {int(code): name for code, name in rows} == {
        code: cls.__name__ for code, cls in ERROR_CODES.items()
    }


def test_the_configuration_table_lists_every_option_with_its_environment_variable() -> None:
    rows = re.findall(
        r"^\| `(\w+)` \| `(BRAIN_\w+)` \|", _section("## Configuration"), re.MULTILINE
    )
    assert sorted(rows) == sorted((o.key, o.env) for o in OPTIONS)


def test_the_readme_keeps_exactly_two_setup_commands() -> None:
    block = re.search(r"## Set up.*?```sh\n(.*?)```", README, re.DOTALL)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["./scripts/demo", "./scripts/test"]
    assert (
        (Path(__file__).resolve().parent.parent / ".ci" / "run")
        .read_text()
        .strip()
        .endswith("./scripts/test")
    )


def test_documented_defaults_match_the_code() -> None:
    config = DaemonConfig(db=Path("x"))
    section = _section("## Configuration")
    for key in ("max_line_bytes", "max_inflight", "autosave_writes"):
        assert re.search(
            rf"^\| `{key}` \| `\w+` \| {getattr(config, key)} \|", section, re.MULTILINE
        )
    assert re.search(
        rf"^\| `large_payload_tokens` \| `\w+` \| {config.brain.large_payload_tokens} \|",
        section,
        re.MULTILINE,
    )
