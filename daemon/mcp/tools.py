"""The MCP tools: ``memory_<method>``, each one method of the daemon.

The recall and graph tools a host hands its model (``protocol.tools.TOOLS``:
grep, describe, expand, expand_query, query, teach, learn) keep their
descriptions and input schemas; this module adds the ones an MCP host's model
also gets (entities, entity, correction, trace, ingest, suppress, unsuppress, sync,
compact),
each tool's structured output schema, and its MCP annotations. Maintenance,
grants, save, reload and shutdown stay off the model's surface.

Scope is the server's (``Pin``): a server pinned to a session (``brain mcp
--mcp-session S``) reads and writes only that conversation, and its schemas
leave ``session`` out, as ``protocol.tools`` does for a host; whatever scope a
model sends is replaced. Unpinned, the session-scoped tools take an optional
``session`` (reads default to every session, or to the pinned session key's
sessions for ``memory_grep``, ``memory_entities``, ``memory_entity`` and
``memory_recent``) and the
writing ones require it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from protocol.methods import ENTITY_KINDS, MAX_BATCH, METHODS, ROLES
from protocol.tools import PREFIX, TOOLS

Reach = Literal["session", "write", "chat", "none"]
"""How the pin applies: ``session`` reads one session (or all); ``write`` needs a
session; ``chat`` files graph traces under the pinned session; ``none``."""

_SCOPE_KEYS: Final = ("session", "all", "session_key", "chat_id")
_KEYED: Final = ("grep", "entities", "entity", "recent")
"""Reads that an unpinned session defaults to the pinned session key's sessions for."""
"""Scope params a model never sets itself: the pin (or the schema's ``session``) does."""


@dataclass(frozen=True, slots=True)
class Pin:
    """What a server is pinned to: a session, a session key, both or neither."""

    session: str | None = None
    session_key: str | None = None


@dataclass(frozen=True, slots=True)
class Hints:
    """The MCP tool annotations (what a host may show or ask before a call)."""

    read_only: bool
    destructive: bool
    idempotent: bool


@dataclass(frozen=True, slots=True)
class McpTool:
    """One tool: the method it calls, what the model reads, what it returns."""

    method: str
    title: str
    description: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...]
    reach: Reach
    hints: Hints
    output: dict[str, Any]
    long: bool = False
    """Reports progress (MCP progress notifications) while it runs."""

    @property
    def name(self) -> str:
        """The tool's name (``memory_grep``)."""
        return PREFIX + self.method

    def input_schema(self, pin: Pin) -> dict[str, Any]:
        """The JSON schema of the arguments on a server pinned by ``pin``."""
        properties = dict(self.properties)
        required = list(self.required)
        if pin.session is None and self.reach == "session":
            span = (
                f"the sessions filed under {pin.session_key!r}"
                if self.method in _KEYED and pin.session_key is not None
                else "every session"
            )
            properties["session"] = _str(f"The session (conversation) to look in; default: {span}.")
        elif pin.session is None and self.reach == "write":
            properties["session"] = _str("The session (conversation) this is about.")
            required.insert(0, "session")
        return {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }

    def params(self, arguments: dict[str, Any], pin: Pin) -> dict[str, Any]:
        """The method's params for a model's ``arguments``, scoped by ``pin``.

        Scope members the schema does not offer are dropped and the pin's put in
        their place; anything else is left for the dispatcher to check (an
        unknown argument is -32602 naming it).
        """
        offered = self.input_schema(pin)["properties"]
        params = {k: v for k, v in arguments.items() if k not in _SCOPE_KEYS or k in offered}
        if self.reach in ("session", "write") and pin.session is not None:
            params["session"] = pin.session
        if self.reach == "session" and "session" not in params:
            if self.method in _KEYED and pin.session_key is not None:
                params["session_key"] = pin.session_key
            else:
                params["all"] = True
        if self.method == "ingest" and pin.session_key is not None:
            params["session_key"] = pin.session_key
        if self.reach == "chat" and pin.session is not None:
            params["chat_id"] = pin.session
        if (
            self.method == "expand_query"
            and not params.get("summary_ids")
            and not params.get("query")
            and isinstance(params.get("prompt"), str)
        ):
            params["query"] = params["prompt"][:4_096]  # as protocol.tools.request does
        return params


def _str(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _ids(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


def _out(fields: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """An output schema: an object with these fields (more may come: results grow)."""
    return {"type": "object", "properties": fields, "required": list(required)}


# Nullable as anyOf branches of one type each: hosts that map schemas onto a
# single-type dialect (Gemini's function declarations) reject a list of types.
_ANY_ID: Final = {"anyOf": [{"type": "string"}, {"type": "null"}]}
_SCORE: Final = {"anyOf": [{"type": "number"}, {"type": "null"}]}
_INT: Final = {"type": "integer"}
_NUM: Final = {"type": "number"}
_BOOL: Final = {"type": "boolean"}
_TEXT: Final = {"type": "string"}
_LIST: Final = {"type": "array"}
_OBJ: Final = {"type": "object"}

_HIT: Final = _out(
    {
        "kind": _TEXT,
        "id": _TEXT,
        "session": _ANY_ID,
        "score": _SCORE,
        "snippet": _TEXT,
        "created_at": _ANY_ID,
        "role": _ANY_ID,
        "name": _ANY_ID,
    },
    ("kind", "id"),
)

OUTPUTS: Final[dict[str, dict[str, Any]]] = {
    "grep": _out(
        {
            "mode": _TEXT,
            "hits": {"type": "array", "items": _HIT},
            "took_ms": _NUM,
            "fusion": _TEXT,
            "rank": _BOOL,
            "pending": _INT,
        },
        ("mode", "hits"),
    ),
    "describe": _out({"kind": _TEXT, "id": _TEXT}, ("kind",)),
    "expand": _out(
        {"items": _LIST, "reached": _LIST, "tokens": _INT, "truncated": _BOOL},
        ("items", "tokens", "truncated"),
    ),
    "recent": _out(
        {
            "since": _TEXT,
            "before": _TEXT,
            "period": _ANY_ID,
            "items": _LIST,
            "tokens": _INT,
            "truncated": _BOOL,
            "omitted": _INT,
        },
        ("items", "tokens", "truncated"),
    ),
    "expand_query": _out(
        {
            "answer": _TEXT,
            "citations": _LIST,
            "summaries": _LIST,
            "mode": _TEXT,
            "tokens": _INT,
            "truncated": _BOOL,
            "fallback": _BOOL,
        },
        ("answer", "citations"),
    ),
    "query": _out(
        {
            "trace_id": _ANY_ID,
            "fired_nodes": _LIST,
            "nodes": _LIST,
            "context": _TEXT,
            "seeds": _LIST,
            "inhibited": _LIST,
        },
        ("fired_nodes", "nodes", "context"),
    ),
    "teach": _out(
        {
            "node_id": _TEXT,
            "created": _BOOL,
            "connected": _LIST,
            "inhibited": _LIST,
            "penalised_trace": _ANY_ID,
            "edges_updated": _INT,
        },
        ("node_id", "created"),
    ),
    "learn": _out(
        {"trace_id": _TEXT, "edges_updated": _INT, "advantage": _NUM, "baseline": _NUM},
        ("trace_id", "edges_updated"),
    ),
    "trace": _out(
        {
            "trace_id": _TEXT,
            "query": _TEXT,
            "seeds": _LIST,
            "steps": _LIST,
            "fired_nodes": _LIST,
        },
        ("trace_id",),
    ),
    "ingest": _out(
        {
            "session": _TEXT,
            "ingested": _INT,
            "duplicates": _INT,
            "context_tokens": _INT,
            "ids": {"type": "array", "items": _TEXT},
            "messages": _LIST,
        },
        ("session", "ingested", "duplicates", "ids"),
    ),
    "suppress": _out(
        {"suppressed": _LIST, "already": _LIST, "not_found": _LIST},
        ("suppressed", "already", "not_found"),
    ),
    "unsuppress": _out(
        {"unsuppressed": _LIST, "already": _LIST, "not_found": _LIST},
        ("unsuppressed", "already", "not_found"),
    ),
    "sync": _out(
        {
            "workspace": _TEXT,
            "files": _INT,
            "added": _INT,
            "kept": _INT,
            "moved": _INT,
            "removed": _INT,
            "nodes": _INT,
            "embedded": _INT,
            "pending": _INT,
            "refused": _LIST,
        },
        ("workspace", "files", "added", "removed"),
    ),
    "compact": _out(
        {
            "leaf_passes": _INT,
            "condensed_passes": _INT,
            "rebuilt": _INT,
            "summaries": _LIST,
            "tokens_before": _INT,
            "tokens_after": _INT,
        },
        ("leaf_passes", "condensed_passes", "summaries", "tokens_before", "tokens_after"),
    ),
}
OUTPUTS["correction"] = OUTPUTS["teach"]
OUTPUTS["entities"] = _out({"entities": _LIST}, ("entities",))
OUTPUTS["entity"] = _out(
    {"name": _TEXT, "kind": _TEXT, "key": _TEXT, "total": _INT, "mentions": _LIST},
    ("name", "total", "mentions"),
)

_READ: Final = Hints(read_only=True, destructive=False, idempotent=True)
_ADD: Final = Hints(read_only=False, destructive=False, idempotent=False)

_REACH: Final[dict[str, Reach]] = {
    "grep": "session",
    "describe": "session",
    "expand": "session",
    "expand_query": "session",
    "recent": "session",
    "query": "chat",
    "teach": "chat",
    "learn": "chat",
}
_TITLES: Final = {
    "grep": "Search memory",
    "describe": "Read a memory item",
    "expand": "Expand a summary",
    "expand_query": "Answer from memory",
    "recent": "Review a stretch of time",
    "query": "Recall knowledge",
    "teach": "Teach",
    "learn": "Rate a recall",
}
_HINTS: Final = {
    "grep": _READ,
    "describe": _READ,
    "expand": _READ,
    "expand_query": _READ,
    "recent": _READ,
    # query stores a trace (for learn); teach adds a node (a dedup_key makes it idempotent).
    "query": _ADD,
    "teach": _ADD,
    # learn moves learned edge weights; nothing is removed.
    "learn": _ADD,
}

_MESSAGE: Final = {
    "type": "object",
    "description": "A conversation message in OpenAI or Anthropic shape.",
    "properties": {
        "role": {"type": "string", "enum": list(ROLES)},
        "content": {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"type": "object"}},
                {"type": "null"},
            ],
            "description": "Text, or a list of content blocks (text, tool_use, tool_result, ...).",
        },
        "id": _str("Your id for the message: sending it again is then a no-op."),
        "name": _str("Who spoke, when it matters."),
        "created_at": _str("When it was said (ISO-8601); default now."),
        "tool_calls": {"type": "array", "items": {"type": "object"}},
        "tool_call_id": _str("For a tool result: the call it answers."),
    },
    "required": ["role"],
}

_KIND: Final = {"type": "string", "enum": list(ENTITY_KINDS), "description": "Only this kind."}

_EXTRA: Final[tuple[McpTool, ...]] = (
    McpTool(
        "entities",
        "Find named things",
        "Find people, places, projects, files, URLs, commands, error codes, versions, dates "
        "and amounts mentioned in memory by (part of) their name, with how often and when "
        "they were mentioned. Then memory_entity lists one's mentions.",
        {
            "name": _str("The name or its beginning (any case; a misspelling is tolerated)."),
            "kind": _KIND,
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 200,
                "description": "At most this many entities (default 20).",
            },
        },
        ("name",),
        "session",
        _READ,
        OUTPUTS["entities"],
    ),
    McpTool(
        "entity",
        "Mentions of a named thing",
        "List the messages that mention one named thing (as memory_entities names it), "
        "oldest first, each with its id (for memory_describe) and the text around it.",
        {
            "name": _str("The entity's name (any case)."),
            "kind": _KIND,
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 1_000,
                "description": "At most this many mentions, oldest first (default 50).",
            },
        },
        ("name",),
        "session",
        _READ,
        OUTPUTS["entity"],
    ),
    McpTool(
        "correction",
        "Correct a recall",
        "Record a correction: something recalled (memory_query) or believed was wrong. "
        "Write the right statement, self-contained. The latest recall of this conversation "
        "is penalised and what it wrongly brought up is inhibited from now on.",
        {"content": _str("The correct statement, self-contained.")},
        ("content",),
        "chat",
        # It weakens what the corrected recall used: updates, but nothing is removed.
        Hints(read_only=False, destructive=False, idempotent=False),
        OUTPUTS["correction"],
    ),
    McpTool(
        "trace",
        "Show a recall's trace",
        "Show how a memory_query recall went: its seeds, the steps activation took, the "
        "nodes that fired and any outcome learned. Default: this conversation's latest.",
        {"trace_id": _str("The trace_id memory_query returned (default: the latest).")},
        (),
        "chat",
        _READ,
        OUTPUTS["trace"],
    ),
    McpTool(
        "ingest",
        "Remember messages",
        "Store conversation messages in memory, so they can be searched (memory_grep) and "
        "folded into summaries later. Give one message or a batch of messages; a message "
        "sent again with the same id is not stored twice.",
        {
            "message": _MESSAGE,
            "messages": {
                "type": "array",
                "items": _MESSAGE,
                "minItems": 1,
                "maxItems": MAX_BATCH,
                "description": "Several messages, oldest first (instead of message).",
            },
        },
        (),
        "write",
        Hints(read_only=False, destructive=False, idempotent=True),
        OUTPUTS["ingest"],
    ),
    McpTool(
        "suppress",
        "Hide from memory",
        "Hide messages or summaries (by id) from every search, context and answer, e.g. "
        "something wrong or sensitive. Nothing is deleted: memory_unsuppress shows them again.",
        {"ids": _ids("Message or summary (sum_...) ids to hide.") | {"minItems": 1}},
        ("ids",),
        "session",
        Hints(read_only=False, destructive=True, idempotent=True),
        OUTPUTS["suppress"],
    ),
    McpTool(
        "unsuppress",
        "Show again",
        "Show again messages or summaries hidden with memory_suppress.",
        {"ids": _ids("Message or summary (sum_...) ids to show again.") | {"minItems": 1}},
        ("ids",),
        "session",
        Hints(read_only=False, destructive=False, idempotent=True),
        OUTPUTS["unsuppress"],
    ),
    McpTool(
        "sync",
        "Index workspace notes",
        "Index a workspace's markdown notes (AGENTS.md, SOUL.md, USER.md, MEMORY.md, "
        "TOOLS.md, memory/*.md) so memory_query recalls them. Incremental: unchanged "
        "parts are kept, and chunks of deleted files are removed.",
        {
            "workspace": _str("The workspace directory (an absolute path)."),
            "paths": _ids("Extra files or directories to index, relative to the workspace."),
        },
        ("workspace",),
        "none",
        # It mirrors the files: chunks of a file that is gone are removed.
        Hints(read_only=False, destructive=True, idempotent=True),
        OUTPUTS["sync"],
        long=True,
    ),
    McpTool(
        "compact",
        "Fold history into summaries",
        "Fold this conversation's older messages into summaries now (nothing is lost: "
        "memory_expand walks a summary back to its messages). Optionally stop once the "
        "context is down to target_tokens.",
        {
            "target_tokens": {
                "type": "integer",
                "minimum": 0,
                "description": "Stop once the context is at or under this many tokens.",
            }
        },
        (),
        "write",
        Hints(read_only=False, destructive=False, idempotent=False),
        OUTPUTS["compact"],
        long=True,
    ),
)

MCP_TOOLS: Final[tuple[McpTool, ...]] = (
    *(
        McpTool(
            t.method,
            _TITLES[t.method],
            t.description,
            t.properties,
            t.required,
            _REACH[t.method],
            _HINTS[t.method],
            OUTPUTS[t.method],
        )
        for t in TOOLS
    ),
    *_EXTRA,
)
"""Every tool, in the order listed: the host tools of ``protocol.tools``, then the rest."""

BY_NAME: Final[dict[str, McpTool]] = {t.name: t for t in MCP_TOOLS}


def _check() -> None:
    # Import-time guard, as in protocol.tools: a property that is not a params
    # field would be refused the first time a model used it.
    assert {t.method for t in MCP_TOOLS} == set(OUTPUTS)
    for tool in MCP_TOOLS:
        fields = METHODS[tool.method].params.FIELDS
        unknown = [p for p in tool.properties if p not in fields]
        assert not unknown, f"{tool.name}: {unknown} are not params of {tool.method}"


_check()
