"""``brain mcp`` as a host runs it: a subprocess spoken to by the MCP SDK's own stdio client.

Each test starts ``brain mcp --db PATH`` with ``mcp.Client`` (the SDK negotiates
the protocol era itself; one test pins the 2025 ``initialize`` handshake that
today's hosts use) and checks what a host's model would get: the tools with
their schemas, annotations and output schemas (the client validates every
structured result against its tool's output schema), the resources and the
prompts, and tool errors carrying brain's stable codes.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent, TextResourceContents

from tests.e2e.conftest import BRAIN, DEADLINE

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.asynccontextmanager
async def brain_mcp(db: Path, *args: str, mode: str = "auto") -> AsyncIterator[Client]:
    """A connected client of ``brain mcp --db DB [args]`` (the process ends with the block)."""
    server = StdioServerParameters(
        command=str(BRAIN), args=["mcp", "--db", str(db), *args], env=dict(os.environ)
    )
    # A bound on the whole session (each read has its own): a hang fails the test
    # before pytest's own timeout would, and a loaded machine still has room.
    with anyio.fail_after(3 * DEADLINE):
        async with Client(server, mode=mode, read_timeout_seconds=DEADLINE) as client:
            yield client


async def call(client: Client, name: str, arguments: dict[str, Any], **kw: Any) -> Any:
    """A tool's structured result; fails the test on a tool error."""
    result = await client.call_tool(name, arguments, **kw)
    assert not result.is_error, _text(result)
    # The text content is the same JSON, for hosts that read only content.
    assert orjson.loads(_text(result)) == result.structured_content
    return result.structured_content


def _text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def read(client: Client, uri: str) -> Any:
    result = await client.read_resource(uri)
    (contents,) = result.contents
    assert isinstance(contents, TextResourceContents)
    assert contents.mime_type == "application/json"
    return orjson.loads(contents.text)


async def embedded(client: Client) -> None:
    """Wait for the background embedder to catch up (semantic search answers from it)."""
    while (await read(client, "brain://info"))["embeddings"]["pending"]:
        await anyio.sleep(0.05)


def _long(text: str, i: int) -> str:
    """Text long enough that a few messages make a leaf summary's worth."""
    return f"{text} " + " ".join(f"note{i}_{j}" for j in range(300))


CONVERSATION = [
    {"id": "u1", "role": "user", "content": "Where does the deploy key live?"},
    {"id": "a1", "role": "assistant", "content": "The deploy key lives in vault/ci."},
    {"id": "u2", "role": "user", "content": _long("And the staging database password?", 2)},
    {"id": "a2", "role": "assistant", "content": _long("It is rotated weekly by a bot.", 3)},
    {"id": "u3", "role": "user", "content": _long("Now the release notes.", 4)},
    {"id": "a3", "role": "assistant", "content": _long("They go out on Friday.", 5)},
    {"id": "u4", "role": "user", "content": "Thanks."},
    {"id": "a4", "role": "assistant", "content": "You are welcome."},
]


async def test_the_server_lists_its_tools_with_schemas_annotations_and_output_schemas(
    db_path: Path,
) -> None:
    async with brain_mcp(db_path) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert sorted(tools) == sorted(
        f"memory_{m}"
        for m in (
            "grep",
            "describe",
            "expand",
            "expand_query",
            "query",
            "teach",
            "correction",
            "learn",
            "trace",
            "ingest",
            "suppress",
            "unsuppress",
            "sync",
            "compact",
            "entities",
            "entity",
            "recent",
        )
    )
    for tool in tools.values():
        assert tool.description
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None
        assert tool.output_schema["type"] == "object"
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is not None
        assert tool.annotations.destructive_hint is not None
        assert tool.annotations.idempotent_hint is not None
    grep = tools["memory_grep"]
    assert grep.annotations is not None
    assert grep.annotations.read_only_hint is True
    assert grep.input_schema["required"] == ["query"]
    # Unpinned: a session may be named, and reads default to every session.
    assert "session" in grep.input_schema["properties"]
    assert tools["memory_ingest"].input_schema["required"] == ["session"]
    suppress = tools["memory_suppress"].annotations
    assert suppress is not None
    assert suppress.destructive_hint is True
    # Maintenance, grants and the lifecycle stay off the model's surface.
    for hidden in ("maintain", "grant", "revoke", "shutdown", "reload", "save", "bootstrap"):
        assert f"memory_{hidden}" not in tools


async def test_the_server_lists_its_resources_templates_and_prompts(db_path: Path) -> None:
    async with brain_mcp(db_path) as client:
        resources = [str(r.uri) for r in (await client.list_resources()).resources]
        listed = await client.list_resource_templates()
        templates = [t.uri_template for t in listed.resource_templates]
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert resources == ["brain://info"]
    assert templates == [
        "brain://summary/{id}",
        "brain://message/{id}",
        "brain://file/{id}{?first,last}",
        "brain://session/{session}/context{?budget}",
    ]
    assert sorted(prompts) == ["escalate", "recall"]
    assert {a.name for a in prompts["recall"].arguments or ()} == {"session", "budget"}


async def test_an_ingested_conversation_is_found_again_by_grep_in_every_mode(
    db_path: Path,
) -> None:
    async with brain_mcp(db_path) as client:
        stored = await call(client, "memory_ingest", {"session": "s1", "messages": CONVERSATION})
        assert stored["ingested"] == len(CONVERSATION)
        assert stored["ids"] == [m["id"] for m in CONVERSATION]
        one = {"role": "user", "content": "one more: the canary runs at noon"}
        single = await call(client, "memory_ingest", {"session": "s1", "message": one})
        assert single["ingested"] == 1
        again = await call(client, "memory_ingest", {"session": "s1", "messages": CONVERSATION})
        assert again["duplicates"] == len(CONVERSATION)
        await embedded(client)
        for mode, query in (
            ("full_text", "deploy key"),
            ("regex", r"vault/\w+"),
            ("semantic", "where is the deploy key kept"),
            ("hybrid", "deploy key"),
        ):
            found = await call(client, "memory_grep", {"query": query, "mode": mode})
            assert "a1" in [h["id"] for h in found["hits"]], (mode, found)
        scoped = await call(client, "memory_grep", {"query": "deploy", "session": "s1"})
        assert scoped["hits"]
        # Another session (one that exists: a name that does not is NotFound) sees none of it.
        note = {"role": "user", "content": "hello"}
        await call(client, "memory_ingest", {"session": "other", "message": note})
        elsewhere = await call(client, "memory_grep", {"query": "deploy", "session": "other"})
        assert elsewhere["hits"] == []


async def test_named_things_are_found_and_their_mentions_listed_read_only(
    db_path: Path,
) -> None:
    async with brain_mcp(db_path) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ("memory_entities", "memory_entity"):
            hints = tools[name].annotations
            assert hints is not None
            assert hints.read_only_hint is True
        said = [
            {"id": "n1", "role": "user", "content": "Deploys go through /srv/ci/deploy.sh"},
            {"id": "n2", "role": "assistant", "content": "Priya owns /srv/ci/deploy.sh now."},
        ]
        await call(client, "memory_ingest", {"session": "s1", "messages": said})
        found = await call(client, "memory_entities", {"name": "pri"})
        assert [(e["name"], e["kind"]) for e in found["entities"]] == [("Priya", "name")]
        path = "/srv/ci/deploy.sh"
        mentions = await call(client, "memory_entity", {"name": path, "session": "s1"})
        assert [m["id"] for m in mentions["mentions"]] == ["n1", "n2"]


async def test_a_compacted_summary_is_described_expanded_and_answered_from(
    db_path: Path,
) -> None:
    async with brain_mcp(db_path, "--fresh-tail-count", "2") as client:
        await call(client, "memory_ingest", {"session": "s1", "messages": CONVERSATION})
        compacted = await call(client, "memory_compact", {"session": "s1"})
        assert compacted["summaries"], compacted
        summary = compacted["summaries"][0]
        described = await call(client, "memory_describe", {"id": summary})
        assert described["kind"] == "summary"
        expanded = await call(client, "memory_expand", {"id": summary})
        assert "u1" in [item.get("id") for item in expanded["items"]]
        answer = await call(
            client,
            "memory_expand_query",
            {"prompt": "Where does the deploy key live?", "summary_ids": [summary]},
        )
        assert "vault/ci" in answer["answer"]
        assert answer["citations"]
        message = await call(client, "memory_describe", {"id": "a1"})
        assert message["kind"] == "message"


async def test_recent_reviews_a_week_of_rollups_and_summaries_read_only(
    db_path: Path,
) -> None:
    async with brain_mcp(db_path, "--fresh-tail-count", "2") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        hints = tools["memory_recent"].annotations
        assert hints is not None
        assert hints.read_only_hint is True
        await call(client, "memory_ingest", {"session": "s1", "messages": CONVERSATION})
        await call(client, "memory_compact", {"session": "s1"})
        found = await call(client, "memory_recent", {"since": "2000-01-01T00:00:00Z"})
        kinds = [(i["kind"], i.get("period")) for i in found["items"]]
        assert kinds[:2] == [("rollup", "week"), ("rollup", "day")]
        assert ("summary", None) in kinds
        rollup = found["items"][0]["id"]
        expanded = await call(client, "memory_expand", {"id": rollup})
        assert {i["kind"] for i in expanded["items"]} == {"summary"}
        bad = await client.call_tool("memory_recent", {"period": "month"})
        assert bad.is_error
        assert bad.structured_content is not None
        assert bad.structured_content["error"]["code"] == -32602


async def test_taught_knowledge_is_recalled_by_query_and_learned_from(db_path: Path) -> None:
    async with brain_mcp(db_path) as client:
        taught = await call(
            client, "memory_teach", {"content": "Releases are cut from the main branch."}
        )
        assert taught["created"] is True
        question = {"query": "which branch are releases cut from"}
        recalled = await call(client, "memory_query", question)
        assert taught["node_id"] in recalled["fired_nodes"]
        assert "main branch" in recalled["context"]
        trace = await call(client, "memory_trace", {"trace_id": recalled["trace_id"]})
        assert trace["trace_id"] == recalled["trace_id"]
        learned = await call(
            client,
            "memory_learn",
            {"outcome": 1, "trace_id": recalled["trace_id"], "useful": [taught["node_id"]]},
        )
        assert learned["trace_id"] == recalled["trace_id"]
        corrected = await call(
            client, "memory_correction", {"content": "Releases are cut from release branches."}
        )
        assert corrected["created"] is True


async def test_suppressed_messages_leave_search_until_unsuppressed(db_path: Path) -> None:
    async with brain_mcp(db_path) as client:
        await call(client, "memory_ingest", {"session": "s1", "messages": CONVERSATION})
        hidden = await call(client, "memory_suppress", {"ids": ["a1"]})
        assert hidden["suppressed"] == ["a1"]
        found = await call(client, "memory_grep", {"query": "vault"})
        assert found["hits"] == []
        shown = await call(client, "memory_unsuppress", {"ids": ["a1"]})
        assert shown["unsuppressed"] == ["a1"]
        found = await call(client, "memory_grep", {"query": "vault"})
        assert [h["id"] for h in found["hits"]] == ["a1"]


async def test_each_resource_reads_as_json(db_path: Path) -> None:
    big = "\n".join(f"line {i}: build output" for i in range(1, 1000))
    tool_turn = [
        {
            "id": "call",
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "build", "arguments": "{}"}}
            ],
        },
        {"id": "result", "role": "tool", "tool_call_id": "t1", "content": big},
    ]
    async with brain_mcp(
        db_path, "--fresh-tail-count", "2", "--large-payload-tokens", "3000"
    ) as client:
        await call(client, "memory_ingest", {"session": "s1", "messages": CONVERSATION})
        await call(client, "memory_ingest", {"session": "s1", "messages": tool_turn})
        summary = (await call(client, "memory_compact", {"session": "s1"}))["summaries"][0]
        info = await read(client, "brain://info")
        assert info["messages"] == len(CONVERSATION) + 2
        assert info["large_files"] == 1
        assert (await read(client, f"brain://summary/{summary}"))["kind"] == "summary"
        message = await read(client, "brain://message/a1")
        assert message["kind"] == "message"
        file_id = (await call(client, "memory_grep", {"query": "build output", "scope": "files"}))[
            "hits"
        ][0]["id"]
        whole = await read(client, f"brain://file/{file_id}")
        assert whole["kind"] == "file"
        ranged = await read(client, f"brain://file/{file_id}?first=10&last=12")
        assert "line 10: build output" in orjson.dumps(ranged).decode()
        assert "line 200: build output" not in orjson.dumps(ranged).decode()
        context = await read(client, "brain://session/s1/context?budget=4000")
        assert context["messages"]
        assert context["budget"] == 4000
        with pytest.raises(MCPError, match="not a summary id") as wrong:
            await client.read_resource("brain://summary/a1")
        assert wrong.value.code == -32602
        with pytest.raises(MCPError, match="no message 'nope'") as missing:
            await client.read_resource("brain://message/nope")
        assert missing.value.code == -32001


async def test_each_prompt_renders(db_path: Path) -> None:
    async with brain_mcp(db_path) as client:
        await call(client, "memory_ingest", {"session": "s1", "messages": CONVERSATION})
        recall = await client.get_prompt("recall", {"session": "s1", "budget": "4000"})
        texts = [m.content.text for m in recall.messages if isinstance(m.content, TextContent)]
        assert "The deploy key lives in vault/ci." in texts
        assert [m.role for m in recall.messages][:2] == ["user", "assistant"]
        escalate = await client.get_prompt("escalate", {"question": "Where is the key?"})
        (message,) = escalate.messages
        assert isinstance(message.content, TextContent)
        text = message.content.text
        assert text.index("memory_grep") < text.index("memory_describe")
        assert text.index("memory_describe") < text.index("memory_expand_query")
        assert "Where is the key?" in text


async def test_memory_ingest_takes_current_sdk_dumps_and_recall_says_what_they_are(
    db_path: Path,
) -> None:
    custom = {"id": "c1", "type": "custom", "custom": {"name": "apply_patch", "input": "*** End"}}
    messages = [
        {"id": "d1", "role": "developer", "content": "Answer in French."},
        {"id": "u1", "role": "user", "content": "patch it"},
        {"id": "a1", "role": "assistant", "content": None, "tool_calls": [custom]},
        {"id": "t1", "role": "tool", "tool_call_id": "c1", "content": "patched"},
        {"id": "a2", "role": "assistant", "content": "Fait.", "stop_details": {"type": "x"}},
    ]
    async with brain_mcp(db_path) as client:
        done = await call(client, "memory_ingest", {"session": "s1", "messages": messages})
        assert done["ingested"] == len(messages)
        recall = await client.get_prompt("recall", {"session": "s1", "budget": "4000"})
    texts = [m.content.text for m in recall.messages if isinstance(m.content, TextContent)]
    assert "[developer] Answer in French." in texts
    assert "[called apply_patch(*** End)]" in texts


async def test_a_bad_argument_is_a_tool_error_with_the_stable_code_and_the_server_goes_on(
    db_path: Path,
) -> None:
    async with brain_mcp(db_path) as client:
        bad = await client.call_tool("memory_grep", {"query": "x", "limit": 0})
        assert bad.is_error
        assert bad.structured_content == {
            "error": {
                "code": -32602,
                "name": "InvalidParams",
                "message": "params.limit: must be >= 1",
            }
        }
        assert _text(bad) == "InvalidParams (-32602): params.limit: must be >= 1"
        typo = await client.call_tool("memory_grep", {"query": "x", "limt": 3})
        assert typo.is_error
        assert "limt" in _text(typo)
        missing = await client.call_tool("memory_describe", {"id": "sum_0000000000000000"})
        assert missing.is_error
        assert missing.structured_content is not None
        assert missing.structured_content["error"]["code"] == -32001
        unpinned = await client.call_tool("memory_ingest", {"message": CONVERSATION[0]})
        assert unpinned.is_error
        assert "params.session" in _text(unpinned)
        assert (await call(client, "memory_grep", {"query": "x"}))["hits"] == []


async def test_a_server_pinned_to_a_session_reads_and_writes_only_that_session(
    db_path: Path,
) -> None:
    async with brain_mcp(db_path) as client:
        await call(client, "memory_ingest", {"session": "other", "messages": CONVERSATION})
    async with brain_mcp(db_path, "--mcp-session", "mine") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ("memory_grep", "memory_ingest", "memory_describe", "memory_compact"):
            assert "session" not in tools[name].input_schema["properties"], name
        one = {"role": "user", "content": "the deploy key moved to vault/prod"}
        stored = await call(client, "memory_ingest", {"message": one})
        assert stored["session"] == "mine"
        # The model cannot widen the scope: a session it names is replaced by the pin.
        found = await call(client, "memory_grep", {"query": "deploy key", "session": "other"})
        assert [h["session"] for h in found["hits"]] == ["mine"]
        outside = await client.call_tool("memory_describe", {"id": "a1"})
        assert outside.is_error
        with pytest.raises(MCPError, match="pinned") as denied:
            await client.read_resource("brain://session/other/context")
        assert denied.value.code == -32003
        recall = await client.get_prompt("recall", {})
        assert any(
            isinstance(m.content, TextContent) and "vault/prod" in m.content.text
            for m in recall.messages
        )


async def test_long_tools_send_progress_notifications(db_path: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "AGENTS.md").write_text("# Agents\n\nAlways run the tests.\n")
    for i in range(30):
        (workspace / "memory" / f"note{i}.md").write_text(f"# Note {i}\n\nfact number {i}\n")
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async with brain_mcp(db_path) as client:
        synced = await call(
            client, "memory_sync", {"workspace": str(workspace)}, progress_callback=progress
        )
    assert synced["files"] == 31
    assert seen, "no progress notification arrived"
    assert all(message for _, _, message in seen)


async def test_the_2025_initialize_handshake_hosts_use_works_too(db_path: Path) -> None:
    async with brain_mcp(db_path, mode="legacy") as client:
        assert client.protocol_version is not None
        assert not client.protocol_version.startswith("2026")
        names = [t.name for t in (await client.list_tools()).tools]
        assert "memory_grep" in names
        await call(client, "memory_ingest", {"session": "s1", "messages": CONVERSATION})
        found = await call(client, "memory_grep", {"query": "deploy key"})
        assert found["hits"]
        assert (await read(client, "brain://info"))["messages"] == len(CONVERSATION)


def test_brain_mcp_without_the_sdk_says_how_to_install_it(db_path: Path) -> None:
    import subprocess

    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "from daemon.cli import main\n"
        f"sys.exit(main(['mcp', '--db', {str(db_path)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=DEADLINE, check=False
    )
    assert done.returncode == 2
    said = done.stderr.decode()
    # Commands that work here: no brain-memory is published (a stranger could take the name).
    assert f"{sys.executable} -m pip install 'mcp>=2.3,<3'" in said
    assert "pip install '.[mcp]' in a clone" in said
    assert "brain-memory" not in said
    assert not db_path.exists()
