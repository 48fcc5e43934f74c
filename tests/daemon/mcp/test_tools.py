"""How a server's pin fills the params of each MCP tool (``daemon.mcp.tools``)."""

from __future__ import annotations

from daemon.mcp.tools import BY_NAME, MCP_TOOLS, Pin
from protocol.methods import METHODS
from protocol.tools import TOOLS

UNPINNED = Pin()
SESSION = Pin(session="s1")
KEY = Pin(session_key="agent")


def test_the_host_tools_keep_protocol_tools_descriptions_and_properties() -> None:
    for host in TOOLS:
        tool = BY_NAME[host.name]
        assert tool.description == host.description
        for name, schema in host.properties.items():
            assert tool.input_schema(SESSION)["properties"][name] == schema


def test_every_tool_calls_a_protocol_method_and_offers_only_its_params() -> None:
    for tool in MCP_TOOLS:
        for pin in (UNPINNED, SESSION, KEY):
            fields = METHODS[tool.method].params.FIELDS
            assert set(tool.input_schema(pin)["properties"]) <= set(fields), tool.name


def test_unpinned_reads_span_every_session_unless_the_model_names_one() -> None:
    grep = BY_NAME["memory_grep"]
    assert grep.params({"query": "x"}, UNPINNED) == {"query": "x", "all": True}
    assert grep.params({"query": "x", "session": "a"}, UNPINNED) == {"query": "x", "session": "a"}
    describe = BY_NAME["memory_describe"]
    assert describe.params({"id": "m1"}, UNPINNED) == {"id": "m1", "all": True}


def test_a_pinned_session_replaces_any_scope_the_model_sends() -> None:
    grep = BY_NAME["memory_grep"]
    sent = {"query": "x", "session": "other", "all": True, "session_key": "k"}
    assert grep.params(sent, SESSION) == {"query": "x", "session": "s1"}
    assert "session" not in grep.input_schema(SESSION)["properties"]
    ingest = BY_NAME["memory_ingest"]
    assert ingest.params({"message": {}, "session": "other"}, SESSION)["session"] == "s1"


def test_the_graph_tools_file_their_traces_under_the_pinned_session() -> None:
    for name in ("memory_query", "memory_teach", "memory_correction", "memory_learn"):
        tool = BY_NAME[name]
        assert tool.params({"chat_id": "other"}, SESSION)["chat_id"] == "s1", name
        assert "chat_id" not in tool.params({"chat_id": "other"}, UNPINNED), name


def test_a_pinned_session_key_scopes_grep_and_files_new_sessions() -> None:
    assert BY_NAME["memory_grep"].params({"query": "x"}, KEY) == {
        "query": "x",
        "session_key": "agent",
    }
    ingest = BY_NAME["memory_ingest"].params({"session": "new", "message": {}}, KEY)
    assert ingest["session_key"] == "agent"
    assert BY_NAME["memory_ingest"].input_schema(KEY)["required"] == ["session"]


def test_expand_query_without_ids_or_query_searches_for_its_prompt() -> None:
    params = BY_NAME["memory_expand_query"].params({"prompt": "where?"}, SESSION)
    assert params == {"prompt": "where?", "session": "s1", "query": "where?"}


def test_unknown_arguments_are_left_for_the_dispatcher_to_refuse() -> None:
    assert BY_NAME["memory_grep"].params({"query": "x", "limt": 3}, SESSION)["limt"] == 3


def test_every_argument_of_every_tool_tells_the_model_what_it_is() -> None:
    # A model reads only the schema: a bare {"type": "integer"} says nothing of what limits.
    undescribed = [
        f"{tool.name}.{name}"
        for tool in MCP_TOOLS
        for pin in (Pin(), Pin(session="s"))
        for name, schema in tool.input_schema(pin)["properties"].items()
        if not schema.get("description")
    ]
    assert undescribed == []
