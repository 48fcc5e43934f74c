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


def test_the_host_guides_per_turn_loop_runs_against_a_real_daemon(tmp_path: Path) -> None:
    (code,) = _blocks(_section("### The per-turn loop"), "python")
    assert '"/tmp/host.db"' in code
    code = code.replace('"/tmp/host.db"', repr(str(tmp_path / "host.db")))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "It lives in vault/ci."


def test_the_host_guides_tool_commands_print_the_tool_definitions() -> None:
    (block,) = _blocks(_section("### Tool definitions"), "sh")
    commands = [line.split("#")[0].split() for line in block.splitlines() if line.strip()]
    assert [c[-1] for c in commands] == ["openai", "anthropic"]
    for argv in commands:
        done = subprocess.run([str(BRAIN), *argv[1:]], capture_output=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr.decode()
        assert len(orjson.loads(done.stdout)) == 8


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
