"""A name that points at nothing is told back, through every way a daemon is reached.

A model (or a host's developer) that mistypes a session must hear so, not get empty
hits that read as "nothing was ever said". The same -32001 NotFound naming the session
comes back over the NDJSON pipe, from ``brain call`` and as an MCP tool error; an id
that names nothing is named as the kind its prefix says (a summary, not a message).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters

from protocol import Client
from protocol.errors import NotFound
from tests.e2e.conftest import BRAIN, DEADLINE

NOTE = {"id": "m1", "role": "user", "content": "Priya says the deploy key lives in vault/ci."}

READS: list[tuple[str, dict[str, Any]]] = [
    ("grep", {"query": "deploy key"}),
    ("grep", {"query": "deploy key", "mode": "regex"}),
    ("grep", {"query": "deploy key", "mode": "semantic"}),
    ("grep", {"query": "deploy key", "scope": "files"}),
    ("expand_query", {"prompt": "where is the deploy key?", "query": "deploy key"}),
    ("recent", {}),
    ("entities", {"name": "vault"}),
    ("entity", {"name": "Priya"}),
    ("describe", {"id": "m1"}),
    ("expand", {"id": "sum_0123456789abcdef"}),
    ("suppress", {"ids": ["m1"]}),
]


@pytest.fixture
def daemon(tmp_path: Path) -> Any:
    with Client.spawn(tmp_path / "n.db", stderr=subprocess.DEVNULL) as client:
        client.call("ingest", {"session": "chat-42", "message": NOTE})
        yield client


@pytest.mark.parametrize(
    ("method", "params"), READS, ids=[f"{m}-{i}" for i, (m, _) in enumerate(READS)]
)
def test_a_read_of_a_session_that_does_not_exist_is_not_found_naming_it(
    daemon: Client, method: str, params: dict[str, Any]
) -> None:
    with pytest.raises(NotFound) as raised:
        daemon.call(method, {**params, "session": "chat-24"})
    assert raised.value.message.startswith("no session 'chat-24'")
    assert raised.value.data == {"session": "chat-24"}
    # The session that exists answers as before (expand: its summary is what is missing).
    if method == "expand":
        with pytest.raises(NotFound, match="no summary"):
            daemon.call(method, {**params, "session": "chat-42"})
    else:
        daemon.call(method, {**params, "session": "chat-42"})


def test_a_session_key_with_no_sessions_filed_under_it_is_searched_and_empty(
    daemon: Client,
) -> None:
    # A key groups sessions still to come (a pinned MCP server's, an agent's): not a typo.
    assert daemon.call("grep", {"query": "deploy key", "session_key": "agent:x"})["hits"] == []


def test_brain_call_of_a_read_in_a_session_that_does_not_exist_prints_not_found(
    tmp_path: Path,
) -> None:
    db = tmp_path / "c.db"
    with Client.spawn(db, stderr=subprocess.DEVNULL) as client:
        client.call("ingest", {"session": "chat-42", "message": NOTE})
    params = orjson.dumps({"query": "deploy key", "session": "chat-24"}).decode()
    done = subprocess.run(
        [str(BRAIN), "call", "grep", params, "--db", str(db)],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 1
    error = orjson.loads(done.stdout)["error"]
    assert error["code"] == NotFound.CODE
    assert error["message"].startswith("no session 'chat-24'")


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("sum_abc", "no summary 'sum_abc' (a summary id is sum_ and 16 hex digits)"),
        ("sum_0123456789abcdef", "no summary 'sum_0123456789abcdef'"),
        ("file_12", "no file 'file_12'"),
        ("m2", "no message 'm2'"),
    ],
)
def test_describe_of_an_id_that_names_nothing_says_which_kind_it_looked_for(
    daemon: Client, target: str, message: str
) -> None:
    with pytest.raises(NotFound) as raised:
        daemon.call("describe", {"id": target, "session": "chat-42"})
    assert raised.value.message.startswith(message)


async def _mcp_errors(db: Path) -> dict[str, dict[str, Any]]:
    """The structured errors of MCP tool calls naming a session that does not exist."""
    server = StdioServerParameters(
        command=str(BRAIN), args=["mcp", "--db", str(db)], env=dict(os.environ)
    )
    calls = {
        "memory_grep": {"query": "deploy key", "session": "chat-24"},
        "memory_expand_query": {"prompt": "where is the deploy key?", "session": "chat-24"},
        "memory_recent": {"session": "chat-24"},
        "memory_entities": {"name": "vault", "session": "chat-24"},
        "memory_describe": {"id": "sum_abc", "session": "chat-42"},
    }
    errors: dict[str, dict[str, Any]] = {}
    with anyio.fail_after(3 * DEADLINE):
        async with McpClient(server, read_timeout_seconds=DEADLINE) as client:
            stored = await client.call_tool(
                "memory_ingest", {"session": "chat-42", "message": NOTE}
            )
            assert not stored.is_error
            for name, arguments in calls.items():
                result = await client.call_tool(name, arguments)
                assert result.is_error, (name, result.structured_content)
                assert result.structured_content is not None
                errors[name] = result.structured_content["error"]
    return errors


def test_mcp_tools_on_a_session_that_does_not_exist_are_tool_errors_naming_it(
    tmp_path: Path,
) -> None:
    errors = anyio.run(_mcp_errors, tmp_path / "m.db")
    for name in ("memory_grep", "memory_expand_query", "memory_recent", "memory_entities"):
        assert errors[name]["code"] == NotFound.CODE, name
        assert errors[name]["message"].startswith("no session 'chat-24'"), name
    assert errors["memory_describe"]["message"].startswith("no summary 'sum_abc'")
