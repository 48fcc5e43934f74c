"""Model-facing tool definitions for brain's recall and learning methods.

A host agent gives these to its model so the model can search and drill into
its own memory: ``grep``, ``describe``, ``expand``, ``expand_query``, ``recent``,
``query``, ``teach`` and ``learn``, named ``memory_<method>``. The schemas are built from
one table (``TOOLS``) whose properties must be fields of the method's params
(``protocol.methods.METHODS``), so the two stay in step; the descriptions are
written for a model, not for the host's developer.

Scope is the host's, never the model's: the schemas omit ``session`` (and
``all``, ``session_key``), and ``request`` adds the session the host is serving
to the session-scoped tools. A model cannot widen its reads to other sessions.

``brain tools --format openai|anthropic`` prints ``definitions(format)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from protocol.errors import InvalidParams
from protocol.methods import GREP_MODES, GREP_SCOPES, METHODS, PERIODS, TEACH_KINDS

PREFIX: Final = "memory_"
"""Tool names are the method names with this prefix (``memory_grep``)."""

TOOL_FORMATS: Final = ("openai", "anthropic")

_IDS: Final = (
    "Ids: summaries start with sum_, large tool outputs or attachments kept in files "
    "with file_, anything else is a message id (as shown in search hits and citations)."
)


@dataclass(frozen=True, slots=True)
class Tool:
    """One model-facing tool: the method it calls and its JSON schema.

    ``properties`` are JSON-schema properties, each a field of the method's
    params; ``session_scoped`` tools get the host's ``session`` added by
    ``request``.
    """

    method: str
    description: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...]
    session_scoped: bool = True

    @property
    def name(self) -> str:
        """The tool's name as the model sees it."""
        return PREFIX + self.method

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments."""
        return {
            "type": "object",
            "properties": self.properties,
            "required": list(self.required),
            "additionalProperties": False,
        }


def _str(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _int(description: str, minimum: int, maximum: int) -> dict[str, Any]:
    return {"type": "integer", "description": description, "minimum": minimum, "maximum": maximum}


def _ids(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


TOOLS: Final[tuple[Tool, ...]] = (
    Tool(
        "grep",
        "Search this conversation's full history, including what was folded into "
        "summaries or left out of your context. Use it first when you need a detail "
        "you do not see (a name, a number, a file path, an earlier decision). Returns "
        "hits with an id, a snippet, who said it and when; pass an id to memory_describe "
        "for the whole item, or hits' summary ids to memory_expand_query for an answer. " + _IDS,
        {
            "query": _str(
                "What to look for: words (full_text), a regular expression (regex) "
                "or a description of the meaning (semantic, hybrid)."
            ),
            "mode": {
                "type": "string",
                "enum": list(GREP_MODES),
                "description": "full_text (default): words, ranked; regex: exact patterns, "
                "newest first; semantic: by meaning; hybrid: words and meaning together.",
            },
            "scope": {
                "type": "string",
                "enum": list(GREP_SCOPES),
                "description": "messages, summaries, both (default), or files: the text "
                "inside large tool outputs and attachments kept out of the context.",
            },
            "since": _str("Only items written at or after this ISO-8601 time."),
            "before": _str("Only items written before this ISO-8601 time."),
            "limit": _int("At most this many hits (default 20).", 1, 1_000),
            "rank": {
                "type": "boolean",
                "description": "full_text and hybrid: order by the learned ranking "
                "(default true); false keeps the plain keyword/fused order.",
            },
        },
        ("query",),
    ),
    Tool(
        "describe",
        "Show one item of memory in full by its id: a message as it was sent, a "
        "summary (its text, time span and the ids it was made from), or a file_ "
        "(a large tool output or attachment; ask for a line range with lines). Use it "
        "on ids from your context (<summary id=...>, [Tool Output: ID ...] stubs), "
        "from memory_grep hits or from citations. " + _IDS,
        {
            "id": _str("The id to show (sum_..., file_... or a message id)."),
            "lines": {
                "type": "array",
                "items": {"type": "integer", "minimum": 1},
                "minItems": 2,
                "maxItems": 2,
                "description": "For a file_ id: [first, last] line numbers (1-based) to read.",
            },
            "max_tokens": _int("Cap on what comes back (default 4000).", 1, 1_000_000),
        },
        ("id",),
    ),
    Tool(
        "expand",
        "Walk a summary (sum_ id) down to what it was made from: its child summaries, "
        "then the original messages, level by level, under a token cap (a rol_ rollup: "
        "to its summaries). Use it when a "
        "summary in your context is too coarse and you want the actual exchange; "
        "prefer memory_expand_query when you have a specific question.",
        {
            "id": _str("The summary id (sum_... or rol_...) to expand."),
            "max_tokens": _int("Cap on what comes back (default 4000).", 1, 1_000_000),
        },
        ("id",),
    ),
    Tool(
        "expand_query",
        "Answer a question from the original messages behind summaries or search "
        "hits, with citations like [msg_12]. The usual escalation is memory_grep to "
        "find where something was discussed, memory_describe to read one item, and "
        "this tool when the answer is spread over many messages or hidden under "
        "summaries. Give summary_ids (from your context or grep hits), a query "
        "(words whose hits are read too), or both; with neither, the prompt is used "
        "as the query.",
        {
            "prompt": _str("The question to answer."),
            "summary_ids": _ids("Summary ids (sum_...) whose sources to read."),
            "query": _str("Words to search for; their hits are read as well."),
            "max_tokens": _int("Cap on the answer (default 2000).", 1, 1_000_000),
        },
        ("prompt",),
    ),
    Tool(
        "recent",
        "Review what happened in a stretch of time without a search query: day and week "
        "rollups (rol_ ids: the facts, decisions, questions and names of that day or week) "
        "and the summaries of the conversation in time order. Use it for 'what did we do "
        "yesterday / last week?' or to catch up after a break. Pass a rol_ or sum_ id to "
        "memory_expand for what it was made from.",
        {
            "period": {
                "type": "string",
                "enum": list(PERIODS),
                "description": "day: the last 24 hours; week (default): the last 7 days "
                "(before `before`, default now).",
            },
            "since": _str("Instead of period: from this ISO-8601 time."),
            "before": _str("Up to this ISO-8601 time (default now)."),
            "max_tokens": _int("Cap on what comes back (default 8000).", 1, 1_000_000),
        },
        (),
    ),
    Tool(
        "query",
        "Recall from long-term knowledge: what you were taught, corrected on and "
        "given as directives, plus the workspace's notes (AGENTS.md, memory/*.md) and "
        "summaries of past conversations. Use it when the user asks how things are "
        "done here or refers to something you should already know. Returns a context "
        "block and a trace_id; after using it, report how it went with memory_learn.",
        {
            "query": _str("What you need to know, in plain words."),
            "top_k": _int("Starting points of the search (default 8).", 1, 256),
            "max_chars": _int("Cap on the context block (default 6000).", 1, 1_000_000),
        },
        ("query",),
        session_scoped=False,
    ),
    Tool(
        "teach",
        "Remember something for future conversations: a fact or way of working "
        "(teaching), a fix to something you got wrong (correction), or a standing "
        "instruction (directive). Use it when the user tells you to remember "
        "something or corrects you. Write one self-contained statement.",
        {
            "content": _str("The statement to remember, self-contained."),
            "kind": {
                "type": "string",
                "enum": list(TEACH_KINDS),
                "description": "teaching (default), correction or directive.",
            },
        },
        ("content",),
        session_scoped=False,
    ),
    Tool(
        "learn",
        "Say how useful a memory_query result was, so recall improves: outcome 1 "
        "when it helped, 0 when it did not matter, -1 when it misled you. Name the "
        "node ids you actually used in useful.",
        {
            "outcome": {
                "type": "number",
                "minimum": -1,
                "maximum": 1,
                "description": "From -1 (misleading) to 1 (exactly what was needed).",
            },
            "trace_id": _str("The trace_id memory_query returned (default: the latest)."),
            "useful": _ids("Ids of the nodes from the query result you actually used."),
        },
        ("outcome",),
        session_scoped=False,
    ),
)
"""The tools, in the order they are listed."""

BY_NAME: Final[dict[str, Tool]] = {t.name: t for t in TOOLS}


def definitions(fmt: str) -> list[dict[str, Any]]:
    """The tool list in ``fmt``: ``openai`` (Chat Completions ``tools``) or ``anthropic``."""
    if fmt == "openai":
        return [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.schema(),
                },
            }
            for t in TOOLS
        ]
    if fmt == "anthropic":
        return [
            {"name": t.name, "description": t.description, "input_schema": t.schema()}
            for t in TOOLS
        ]
    raise ValueError(f"format must be one of {', '.join(TOOL_FORMATS)}")


def request(name: object, arguments: object, *, session: str) -> tuple[str, dict[str, Any]]:
    """The method and params for a model's call of tool ``name``.

    ``arguments`` is the call's input as the SDK hands it over: an object
    (Anthropic ``tool_use.input``) or the JSON text of one (OpenAI
    ``function.arguments``). Adds ``session`` to the session-scoped tools (over
    anything the model put there: the host decides what it may read). An
    ``expand_query`` with neither ``summary_ids`` nor ``query`` uses its prompt as
    the query.

    Raises ``InvalidParams`` naming the problem for what a model may send wrong: a
    name that is not one of ``TOOLS`` (with the closest one), or arguments that are
    not an object (null, a list, a number, text that is not JSON or not a JSON
    object). Bad fields inside the object are left for the daemon to refuse
    (-32602 naming the field). Either way the host hands the message back to the
    model as the tool's result.
    """
    tool = BY_NAME.get(name) if isinstance(name, str) else None
    if tool is None:
        raise _unknown_tool(name)
    params = dict(_arguments(tool.name, arguments))
    if tool.session_scoped:
        for key in ("session", "all", "session_key"):
            params.pop(key, None)
        params["session"] = session
    if tool.method == "expand_query" and not params.get("summary_ids") and not params.get("query"):
        prompt = params.get("prompt")
        if isinstance(prompt, str):
            params["query"] = prompt[:4_096]
    return tool.method, params


def _unknown_tool(name: object) -> InvalidParams:
    import difflib  # only to name a typo's likely tool

    names = [t.name for t in TOOLS]
    if not isinstance(name, str):
        return InvalidParams(
            f"tool: a tool's name is a string, not {_json_type(name)}; "
            f"the tools are {', '.join(names)}",
            {"tool": None, "tools": names},
        )
    # Compared without the prefix every name shares (with it, memory_search is "close" to
    # memory_teach), so a bare method name or a near spelling of one is suggested.
    methods = [t.method for t in TOOLS]
    word = name.removeprefix(PREFIX)
    close = [PREFIX + m for m in difflib.get_close_matches(word, methods, n=1, cutoff=0.75)]
    hint = f" (did you mean {close[0]}?)" if close else ""
    return InvalidParams(
        f"tool: unknown tool {name!r}{hint}; the tools are {', '.join(names)}",
        {"tool": name, "tools": names},
    )


def _arguments(tool: str, arguments: object) -> dict[str, Any]:
    """The call's arguments as an object: as given, or parsed from JSON text (OpenAI
    sends ``function.arguments`` as a string)."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError as exc:
            raise InvalidParams(
                f"arguments: {tool}'s arguments are not valid JSON ({exc}); "
                "send a JSON object of the tool's parameters"
            ) from None
        if isinstance(parsed, dict):
            return parsed
        arguments = parsed
    if isinstance(arguments, dict):
        return arguments
    raise InvalidParams(
        f"arguments: {tool}'s arguments must be a JSON object of the tool's parameters, "
        f"not {_json_type(arguments)}"
    )


def _json_type(value: object) -> str:
    """How JSON would name ``value``'s type (``null``, ``an array``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__


def _check() -> None:
    # Import-time guard: a tool property that is not a params field would be
    # refused by the daemon the first time a model used it.
    for tool in TOOLS:
        fields = METHODS[tool.method].params.FIELDS
        unknown = [p for p in tool.properties if p not in fields]
        assert not unknown, f"{tool.name}: {unknown} are not params of {tool.method}"
        assert set(tool.required) <= set(tool.properties), tool.name


_check()
