"""The model-facing tool definitions stay in step with the methods' params."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.errors import InvalidParams
from protocol.methods import METHODS
from protocol.tools import BY_NAME, TOOLS, definitions, request

EXPECTED = {"grep", "describe", "expand", "expand_query", "recent", "query", "teach", "learn"}


def _example(schema: dict[str, Any], name: str) -> Any:
    """A valid value for one property schema: its first choice, its minimum, or a word."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema["type"]
    if kind == "integer":
        return schema.get("minimum", 1)
    if kind == "number":
        return 0.5
    if kind == "boolean":
        return True
    if kind == "array":
        return [1, 2] if name == "lines" else ["sum_0123456789abcdef"]
    return "2026-01-01T00:00:00Z" if name in ("since", "before") else "deploy key"


def test_the_tools_cover_exactly_the_recall_and_learning_methods() -> None:
    assert {t.method for t in TOOLS} == EXPECTED
    assert all(t.name == f"memory_{t.method}" for t in TOOLS)


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_every_schema_property_is_a_field_of_its_methods_params(fmt: str) -> None:
    for item in definitions(fmt):
        name = item["function"]["name"] if fmt == "openai" else item["name"]
        schema = item["function"]["parameters"] if fmt == "openai" else item["input_schema"]
        fields = METHODS[BY_NAME[name].method].params.FIELDS
        assert set(schema["properties"]) <= set(fields), name
        assert set(schema["required"]) <= set(schema["properties"]), name
        # Scope is the host's: the model is never offered a wider read.
        assert not {"session", "all", "session_key"} & set(schema["properties"]), name


@pytest.mark.parametrize("full", [False, True], ids=["required_only", "every_property"])
def test_a_call_built_from_each_schema_parses_through_the_real_params_after_the_host_adds_session(
    full: bool,
) -> None:
    for tool in TOOLS:
        schema = tool.schema()
        names = schema["properties"] if full else schema["required"]
        arguments = {n: _example(schema["properties"][n], n) for n in names}
        method, params = request(tool.name, arguments, session="s1")
        assert method == tool.method
        METHODS[method].params.from_obj(params)  # raises InvalidParams if out of step


def test_the_host_session_replaces_any_scope_the_model_puts_in_its_call() -> None:
    _, params = request(
        "memory_grep", {"query": "x", "all": True, "session": "other"}, session="s1"
    )
    assert params == {"query": "x", "session": "s1"}
    _, params = request("memory_query", {"query": "x"}, session="s1")
    assert "session" not in params


def test_an_expand_query_call_with_only_a_prompt_searches_for_the_prompt() -> None:
    _, params = request("memory_expand_query", {"prompt": "where is the key?"}, session="s1")
    assert params["query"] == "where is the key?"


def test_the_formats_are_the_openai_and_anthropic_tool_shapes() -> None:
    openai, anthropic = definitions("openai"), definitions("anthropic")
    assert all(set(t) == {"type", "function"} and t["type"] == "function" for t in openai)
    assert all(set(t["function"]) == {"name", "description", "parameters"} for t in openai)
    assert all(set(t) == {"name", "description", "input_schema"} for t in anthropic)
    with pytest.raises(ValueError, match="format"):
        definitions("gemini")


def test_openai_arguments_given_as_json_text_are_parsed_into_the_params() -> None:
    method, params = request("memory_grep", '{"query": "deploy key", "limit": 3}', session="s1")
    assert (method, params) == ("grep", {"query": "deploy key", "limit": 3, "session": "s1"})


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("memory_grepp", "tool: unknown tool 'memory_grepp' (did you mean memory_grep?)"),
        ("grep", "tool: unknown tool 'grep' (did you mean memory_grep?)"),
        ("memory_search", "tool: unknown tool 'memory_search'; the tools are"),
        ("memory_ingest", "tool: unknown tool 'memory_ingest'; the tools are"),
        (None, "tool: a tool's name is a string, not null"),
    ],
)
def test_an_unknown_tool_name_is_invalid_params_naming_it_and_the_tools(
    name: object, message: str
) -> None:
    with pytest.raises(InvalidParams) as raised:
        request(name, {"query": "x"}, session="s1")
    assert raised.value.message.startswith(message)
    assert "memory_recent" in raised.value.message
    assert raised.value.data is not None
    assert raised.value.data["tools"] == [t.name for t in TOOLS]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (None, "must be a JSON object of the tool's parameters, not null"),
        ([{"query": "x"}], "must be a JSON object of the tool's parameters, not an array"),
        ('["x"]', "must be a JSON object of the tool's parameters, not an array"),
        ('"deploy key"', "must be a JSON object of the tool's parameters, not a string"),
        ("null", "must be a JSON object of the tool's parameters, not null"),
        (7, "must be a JSON object of the tool's parameters, not a number"),
        ("deploy key", "are not valid JSON"),
        ('{"query": "x"', "are not valid JSON"),
        ("", "are not valid JSON"),
    ],
)
def test_arguments_that_are_not_an_object_are_invalid_params_naming_the_problem(
    arguments: object, problem: str
) -> None:
    """What models really send: OpenAI's arguments are JSON text, and not always an
    object; a host hands the message back to the model as the tool's result."""
    with pytest.raises(InvalidParams) as raised:
        request("memory_grep", arguments, session="s1")
    assert raised.value.message.startswith(f"arguments: memory_grep's arguments {problem}")
    assert raised.value.to_obj()["code"] == -32602
