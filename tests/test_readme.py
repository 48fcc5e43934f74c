"""The README's reference tables are kept in step with the code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import orjson

from daemon.config import OPTIONS, DaemonConfig
from protocol.errors import ERROR_CODES
from protocol.methods import METHODS
from protocol.tools import TOOLS

BRAIN = Path(sys.executable).parent / "brain"

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


def _blocks(section: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section, re.DOTALL)


def test_the_host_guides_per_turn_loop_runs_as_written_and_runs_again(tmp_path: Path) -> None:
    """Run twice, unchanged: a reader who runs it a second time must not meet a Conflict
    (fixed message ids in a database the first run left behind)."""
    (code,) = _blocks(_section("### The per-turn loop"), "python")
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            timeout=60,
            check=False,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode().strip() == "It lives in vault/ci."


def test_the_shell_example_shows_the_daemons_answers_in_the_order_it_gives_them(
    tmp_path: Path,
) -> None:
    (block,) = _blocks(_section("### From a shell"), "sh")
    lines = block.splitlines()
    piped = next(i for i, line in enumerate(lines) if line.startswith("printf "))
    shown = [line.removeprefix("# ") for line in lines[piped + 1 :] if line.startswith("# ")]
    command = lines[piped].replace("| brain ", f"| {BRAIN} ")
    for i in range(3):  # the order is the daemon's rule, not a race it usually wins
        database = str(tmp_path / f"x{i}.db")
        done = subprocess.run(
            ["bash", "-c", command.replace("/tmp/x.db", database)],
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
        answers = done.stdout.decode().splitlines()
        assert len(answers) == len(shown)
        for answer, example in zip(answers, shown, strict=True):
            pattern = ".*".join(re.escape(part) for part in example.split("..."))
            assert re.fullmatch(pattern, answer), (answer, example)


def test_the_setup_section_says_what_the_test_command_fetches_and_how_to_skip_it() -> None:
    section = _section("## Set up")
    assert "needing only Python" not in section
    for needed in ("PyPI", "npm", "GB of disk", "minutes"):
        assert needed in section, needed
    script = (Path(__file__).resolve().parent.parent / "scripts" / "test").read_text()
    skips = set(re.findall(r"BRAIN_SKIP_\w+", section))
    assert skips == set(re.findall(r"BRAIN_SKIP_\w+", script))


def test_the_install_commands_name_this_version_s_wheel_and_the_real_extras() -> None:
    import tomllib

    from brain import __version__

    section = _section("### Installing")
    (block,) = _blocks(section, "sh")
    wheels = re.findall(r"brain_memory-([^-]+)-py3-none-any\.whl", block)
    assert wheels
    assert set(wheels) == {__version__}
    pyproject = tomllib.loads(
        (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    )
    extras = set(pyproject["project"]["optional-dependencies"]) - {"dev"}
    assert set(re.findall(r"`(\w+)` \(", section.split("Extras:")[1])) == extras


def test_the_host_guides_tool_commands_print_the_tool_definitions() -> None:
    section = _section("### Tool definitions")
    (block,) = _blocks(section, "sh")
    commands = [line.split("#")[0].split() for line in block.splitlines() if line.strip()]
    assert [c[-1] for c in commands] == ["openai", "anthropic"]
    for argv in commands:
        done = subprocess.run([str(BRAIN), *argv[1:]], capture_output=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr.decode()
        assert len(orjson.loads(done.stdout)) == len(TOOLS)
    named = section[section.index("```\n\n") :].split("each calling")[0]
    assert re.findall(r"`(memory_\w+)`", named) == [t.name for t in TOOLS]


def test_the_mcp_tools_table_lists_exactly_the_servers_tools() -> None:
    from daemon.mcp.tools import MCP_TOOLS

    section = _section("## Using brain from an MCP host")
    table = section[section.index("**Tools**") : section.index("**Resources**")]
    rows = [line for line in table.splitlines() if line.startswith("| `memory_")]
    listed = [name for row in rows for name in re.findall(r"`(memory_\w+)`", row.split(" | ")[0])]
    assert sorted(listed) == sorted(t.name for t in MCP_TOOLS)


def test_the_host_guides_local_server_commands_take_their_options(tmp_path: Path) -> None:
    """Each ``brain serve`` example starts (creating its database) and exits cleanly on
    end of input: the flags exist and the settings are accepted (no server is called)."""
    block = _blocks(_section("### Summaries and embeddings from a local model server"), "sh")
    commands = [line for b in block for line in b.splitlines() if line.startswith("brain ")]
    assert len(commands) == 3
    for i, line in enumerate(commands):
        argv = line.replace("/tmp/host.db", str(tmp_path / f"s{i}.db")).split()
        done = subprocess.run(
            [str(BRAIN), *argv[1:]], input=b"", capture_output=True, timeout=60, check=False
        )
        assert done.returncode == 0, (line, done.stderr.decode())


def test_the_mcp_host_snippets_start_a_server_a_host_can_search(tmp_path: Path) -> None:
    """The ``mcpServers`` entry (Claude Desktop, Claude Code) and OpenClaw's ``mcp.servers``
    entry, run as written (the database moved under tmp), serve the SDK's stdio client:
    it lists the tools, stores a message and finds it again."""
    section = _section("## Using brain from an MCP host")
    desktop, openclaw = (orjson.loads(block) for block in _blocks(section, "json"))
    entries = [desktop["mcpServers"]["brain"], openclaw["mcp"]["servers"]["brain"]]
    for i, entry in enumerate(entries):
        assert entry["command"] == "brain"
        args = [
            a.replace("/home/me/.local/share/brain/brain.db", str(tmp_path / f"{i}.db"))
            for a in entry["args"]
        ]
        env = {**os.environ, **entry.get("env", {})}
        names, hits = anyio.run(_search_over_mcp, args, env)
        assert "memory_grep" in names
        assert hits == ["readme-1"]


async def _search_over_mcp(args: list[str], env: dict[str, str]) -> tuple[list[str], list[str]]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(command=str(BRAIN), args=args, env=env)
    with anyio.fail_after(60):
        async with Client(server) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            note = {"id": "readme-1", "role": "user", "content": "The key is in vault/ci."}
            # A pinned server drops the session named here and uses its own.
            stored = await client.call_tool("memory_ingest", {"session": "s", "message": note})
            assert not stored.is_error, stored.content
            found = await client.call_tool("memory_grep", {"query": "vault"})
            assert found.structured_content is not None
            return names, [h["id"] for h in found.structured_content["hits"]]
