"""Method params: frozen dataclasses parsed once at the edge.

Each params type has ``from_obj(params) -> instance`` that validates
everything and raises ``InvalidParams`` naming the offending field, so a
handler never sees bad input. ``FIELDS`` lists the members each type takes:
an unknown one is refused first, so a typo is named as itself. ``METHODS``
(defined in ``protocol.spec``, re-exported here) lists every method with its
params type and a one-line description; the daemon must implement exactly
these, and the README's protocol reference is checked against this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final, Self

from protocol.errors import InvalidParams
from protocol.fields import Fields

# The method table lives in protocol.spec (light: the daemon's dispatcher imports
# it alone); re-exported here, where it has always been (``as``: re-exported).
from protocol.spec import GRANTABLE as GRANTABLE  # noqa: PLC0414
from protocol.spec import METHODS as METHODS  # noqa: PLC0414
from protocol.spec import MethodSpec as MethodSpec  # noqa: PLC0414
from protocol.spec import NoParams as NoParams  # noqa: PLC0414
from protocol.spec import Params as Params  # noqa: PLC0414

ROLES: Final = ("user", "assistant", "system", "tool")
MAX_BATCH: Final = 10_000
MAX_ID_LEN: Final = 512
MAX_BLOCKS: Final = 10_000
MAX_DEPTH: Final = 64


MESSAGE_EXTRAS: Final = (
    # OpenAI Chat Completions (request params and response messages)
    "refusal",
    "annotations",
    "audio",
    "function_call",
    # reasoning text some OpenAI-compatible servers add (DeepSeek, vLLM, OpenRouter)
    "reasoning_content",
    "reasoning",
    # Responses-API message items and Anthropic response messages
    "type",
    "status",
    "model",
    "stop_reason",
    "stop_sequence",
    "usage",
    "container",
)
"""Message-level fields the OpenAI and Anthropic SDKs put on messages besides the
pinned ones: accepted, kept as sent and given back by ``get`` and ``describe``."""

NO_CONTENT_NEEDS: Final = ("tool_calls", "function_call", "refusal", "audio")
"""An assistant message may omit content (or send null) when one of these is given."""


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation message (DESIGN §4), content as a string or a list of blocks.

    Besides the pinned fields, OpenAI's message-level ``tool_calls`` (assistant)
    and ``tool_call_id`` (tool) are accepted, and the SDK fields named in
    ``MESSAGE_EXTRAS`` are kept as sent in ``extra``. An assistant message with
    one of ``NO_CONTENT_NEEDS`` may have ``content`` null (``content_absent``
    records that the member was missing rather than null). Other members are
    rejected, but null-valued ones are ignored (SDKs emit ``"refusal": null``).
    """

    role: str
    content: str | list[dict[str, Any]] | None
    id: str | None = None
    name: str | None = None
    created_at: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    extra: dict[str, Any] | None = None
    content_absent: bool = False

    @classmethod
    def from_obj(cls, obj: Any, where: str) -> Self:
        """Validate one message object found at ``where``."""
        f = Fields(obj, where)
        role = f.required_str("role")
        if role not in ROLES:
            raise InvalidParams(f"{f.path('role')}: must be one of {', '.join(ROLES)}")
        content_absent = "content" not in f.obj
        content = f.raw("content")
        if isinstance(content, list):
            if len(content) > MAX_BLOCKS:
                raise InvalidParams(f"{f.path('content')}: at most {MAX_BLOCKS} blocks")
            for i, block in enumerate(content):
                _check_block(block, f"{f.path('content')}[{i}]")
        elif content is not None and not isinstance(content, str):
            raise InvalidParams(f"{f.path('content')}: must be a string or an array of blocks")
        tool_calls = f.optional_list("tool_calls", max_items=MAX_BLOCKS)
        for i, call in enumerate(tool_calls or ()):
            if not isinstance(call, dict):
                raise InvalidParams(f"{f.path('tool_calls')}[{i}]: must be an object")
            _check_depth(call, f"{f.path('tool_calls')}[{i}]")
        extra: dict[str, Any] = {}
        for key in MESSAGE_EXTRAS:
            value = f.raw(key)
            if value is not None:  # a null member says nothing: not kept (as before)
                _check_depth(value, f.path(key))
                extra[key] = value
        if content is None and not (
            role == "assistant" and (tool_calls or any(k in extra for k in NO_CONTENT_NEEDS))
        ):
            raise InvalidParams(
                f"{f.path('content')}: required (only an assistant message with "
                f"{', '.join(NO_CONTENT_NEEDS)} may omit it)"
            )
        message = cls(
            role=role,
            content=content,
            id=f.optional_str("id", max_len=MAX_ID_LEN),
            name=f.optional_str("name"),
            created_at=f.optional_str("created_at", max_len=64),
            tool_calls=tool_calls,
            tool_call_id=f.optional_str("tool_call_id", max_len=MAX_ID_LEN),
            extra=extra or None,
            content_absent=content_absent,
        )
        f.done(ignore_null=True)
        return message


@dataclass(frozen=True, slots=True)
class IngestParams:
    """``ingest``: ``{"session", "messages": [Message]}`` or ``{"session", "message"}``.

    ``session_key`` optionally files the session under a key (a family of
    sessions, e.g. one agent's). ``single`` records which form was used.
    """

    session: str
    messages: tuple[Message, ...]
    session_key: str | None = None
    single: bool = False

    FIELDS: ClassVar[tuple[str, ...]] = ("session", "session_key", "messages", "message")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        session = f.required_str("session")
        session_key = f.optional_str("session_key")
        batch = f.optional_list("messages", max_items=MAX_BATCH)
        one = f.raw("message")
        if (batch is None) == (one is None):
            raise InvalidParams("params.messages: give exactly one of messages or message")
        if batch is not None:
            if not batch:
                raise InvalidParams("params.messages: must not be empty")
            messages = tuple(
                Message.from_obj(m, f"params.messages[{i}]") for i, m in enumerate(batch)
            )
        else:
            messages = (Message.from_obj(one, "params.message"),)
        f.done()
        return cls(session, messages, session_key, single=batch is None)


FORMATS: Final = ("openai", "anthropic")
MAX_BUDGET: Final = 10_000_000


@dataclass(frozen=True, slots=True)
class AssembleParams:
    """``assemble``: ``{"session", "budget", "format"?, "fresh_tail"?, "stubs"?, ...}``.

    ``stub_tokens``: with ``stubs``, tool results beyond the fresh tail larger
    than this are shown as one-line stubs (recoverable with ``describe``).
    ``recall``: off, shadow or on (default: the daemon's ``recall_mode``), a graph
    query on the newest user message, traced (shadow) or also shown (on).
    """

    session: str
    budget: int
    format: str = "openai"
    fresh_tail: int | None = None
    stubs: bool = False
    stub_tokens: int = 1_000
    recall: str | None = None

    FIELDS: ClassVar[tuple[str, ...]] = (
        "session",
        "budget",
        "format",
        "fresh_tail",
        "stubs",
        "stub_tokens",
        "recall",
    )
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        session = f.required_str("session")
        budget = f.optional_int("budget", default=-1, minimum=1, maximum=MAX_BUDGET)
        if budget == -1:
            raise InvalidParams("params.budget: required")
        fmt = f.choice("format", FORMATS, "openai")
        # 0 is "only what must stay": the newest user turn and what follows it.
        tail = f.optional_int("fresh_tail", default=-1, minimum=0, maximum=100_000)
        fresh_tail = None if tail == -1 else tail
        stubs = f.optional_bool("stubs", default=False)
        stub_tokens = f.optional_int("stub_tokens", default=1_000, minimum=1, maximum=MAX_BUDGET)
        recall = f.optional_choice("recall", RECALL_MODES)
        f.done()
        return cls(session, budget, fmt, fresh_tail, stubs, stub_tokens, recall)


@dataclass(frozen=True, slots=True)
class CompactParams:
    """``compact``: ``{"session", "target_tokens"?}`` (a full sweep, or sweeps down to a target)."""

    session: str
    target_tokens: int | None = None

    FIELDS: ClassVar[tuple[str, ...]] = ("session", "target_tokens")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        session = f.required_str("session")
        target = f.optional_int("target_tokens", default=-1, minimum=0, maximum=MAX_BUDGET)
        f.done()
        return cls(session, None if target == -1 else target)


@dataclass(frozen=True, slots=True)
class LookupParams:
    """``describe`` / ``expand``: ``{"id", "session" | "all": true, "max_tokens"?, "lines"?}``.

    Reads are scoped: give the session the id belongs to, or ``all: true``.
    ``lines`` ([first, last], 1-based) applies to payload files in ``describe``.
    """

    id: str
    session: str | None
    max_tokens: int = 4_000
    lines: tuple[int, int] | None = None
    include_suppressed: bool = False

    FIELDS: ClassVar[tuple[str, ...]] = (
        "id",
        "session",
        "all",
        "max_tokens",
        "lines",
        "include_suppressed",
    )
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        target = f.required_str("id", max_len=MAX_ID_LEN)
        session = f.optional_str("session")
        everything = f.optional_bool("all", default=False)
        if session is None and not everything:
            raise InvalidParams("params.session: required unless all is true")
        if session is not None and everything:
            raise InvalidParams("params.all: give either session or all, not both")
        max_tokens = f.optional_int("max_tokens", default=4_000, minimum=1, maximum=MAX_BUDGET)
        raw_lines = f.optional_list("lines", max_items=2)
        lines: tuple[int, int] | None = None
        if raw_lines is not None:
            if (
                len(raw_lines) != 2
                or not all(
                    isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in raw_lines
                )
                or raw_lines[0] > raw_lines[1]
            ):
                raise InvalidParams("params.lines: must be [first, last] with 1 <= first <= last")
            lines = (raw_lines[0], raw_lines[1])
        include_suppressed = f.optional_bool("include_suppressed", default=False)
        f.done()
        return cls(target, session, max_tokens, lines, include_suppressed)


@dataclass(frozen=True, slots=True)
class SuppressParams:
    """``suppress`` / ``unsuppress``: ``{"ids": [message or summary ids], "session" | "all"}``."""

    ids: tuple[str, ...]
    session: str | None

    FIELDS: ClassVar[tuple[str, ...]] = ("ids", "session", "all")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        raw = f.optional_list("ids", max_items=1_000)
        if not raw:
            raise InvalidParams("params.ids: required, a non-empty array of ids")
        for i, value in enumerate(raw):
            if not isinstance(value, str) or not value or len(value) > MAX_ID_LEN:
                raise InvalidParams(f"params.ids[{i}]: must be a message or summary id")
        session = f.optional_str("session")
        everything = f.optional_bool("all", default=False)
        if session is not None and everything:
            raise InvalidParams("params.all: give either session or all, not both")
        if session is None and not everything:
            raise InvalidParams("params.session: required unless all is true")
        f.done()
        return cls(tuple(raw), session)


GREP_MODES: Final = ("regex", "full_text", "semantic", "hybrid")
GREP_FUSIONS: Final = ("rrf", "weighted")
GREP_DEFAULT_FUSION: Final = "weighted"  # LoCoMo dev recall@10: weighted 73.2, rrf 61.2
GREP_SCOPES: Final = ("messages", "summaries", "both", "files")


@dataclass(frozen=True, slots=True)
class GrepParams:
    """``grep``: ``{"query", "mode", "session"? | "session_key"? | "all"?, "limit"?, ...}``.

    ``scope``: messages, summaries, both (default) or files (the text of large
    payload files; file hits' ids work with ``describe``); ``since`` / ``before``:
    ISO-8601 bounds on when the message was written; ``fusion`` (hybrid only):
    ``rrf`` (reciprocal rank) or ``weighted`` (min-max scores). Reads are scoped to one
    session unless ``session_key`` (every session filed under it) or
    ``all: true`` is given.
    """

    query: str
    mode: str
    session: str | None = None
    session_key: str | None = None
    all: bool = False
    scope: str = "both"
    since: str | None = None
    before: str | None = None
    limit: int = 20
    fusion: str = GREP_DEFAULT_FUSION

    FIELDS: ClassVar[tuple[str, ...]] = (
        "query",
        "mode",
        "session",
        "session_key",
        "all",
        "scope",
        "since",
        "before",
        "limit",
        "fusion",
    )
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        query = f.required_str("query", max_len=4_096)
        mode = f.choice("mode", GREP_MODES, "full_text")
        session = f.optional_str("session")
        session_key = f.optional_str("session_key")
        everything = f.optional_bool("all", default=False)
        if sum((session is not None, session_key is not None, everything)) != 1:
            raise InvalidParams("params.session: give exactly one of session, session_key, all")
        scope = f.choice("scope", GREP_SCOPES, "both")
        since = f.optional_str("since", max_len=64)
        before = f.optional_str("before", max_len=64)
        limit = f.optional_int("limit", default=20, minimum=1, maximum=1_000)
        fusion = f.choice("fusion", GREP_FUSIONS, GREP_DEFAULT_FUSION)
        f.done()
        return cls(
            query, mode, session, session_key, everything, scope, since, before, limit, fusion
        )


TEACH_KINDS: Final = ("teaching", "correction", "directive")
RECALL_MODES: Final = ("off", "shadow", "on")
AUTHORITIES: Final = ("constitutional", "canonical", "overlay")


@dataclass(frozen=True, slots=True)
class QueryParams:
    """``query``: ``{"query", "chat_id"?, "top_k"?, "max_hops"?, "max_chars"?, ...}``.

    Retrieval from the learned graph. ``chat_id`` files the trace under a chat so
    ``learn``/``correction`` can find it; ``record: false`` answers without storing
    a trace (nothing to learn from then). ``threshold`` (activation a node needs to
    fire, 0..1; the best seed has 1) and ``max_fired`` tune how far it reaches.
    """

    query: str
    chat_id: str | None = None
    top_k: int = 8
    max_hops: int = 3
    max_chars: int = 6_000
    record: bool = True
    threshold: float = 0.2
    max_fired: int = 32

    FIELDS: ClassVar[tuple[str, ...]] = (
        "query",
        "chat_id",
        "top_k",
        "max_hops",
        "max_chars",
        "record",
        "threshold",
        "max_fired",
    )
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        query = f.required_str("query", max_len=16_384)
        chat_id = f.optional_str("chat_id", max_len=MAX_ID_LEN)
        top_k = f.optional_int("top_k", default=8, minimum=1, maximum=256)
        max_hops = f.optional_int("max_hops", default=3, minimum=0, maximum=16)
        max_chars = f.optional_int("max_chars", default=6_000, minimum=1, maximum=1_000_000)
        record = f.optional_bool("record", default=True)
        threshold = f.optional_number("threshold", default=0.2)
        assert threshold is not None
        if not 0.0 < threshold <= 1.0:
            raise InvalidParams("params.threshold: must be in (0, 1]")
        max_fired = f.optional_int("max_fired", default=32, minimum=1, maximum=1_000)
        f.done()
        return cls(query, chat_id, top_k, max_hops, max_chars, record, threshold, max_fired)


@dataclass(frozen=True, slots=True)
class TeachParams:
    """``teach``: ``{"content", "kind"?, "chat_id"?, "authority"?, "links"?, ...}``.

    ``kind``: teaching (default), correction or directive. A correction with
    ``chat_id`` also penalises that chat's latest trace and inhibits what fired.
    ``dedup_key`` makes a second teach of the same key return the first node;
    ``links`` (node ids) are what the new node is about: it points at them.
    """

    content: str
    kind: str = "teaching"
    chat_id: str | None = None
    authority: str = "overlay"
    dedup_key: str | None = None
    metadata: dict[str, Any] | None = None
    links: tuple[str, ...] = ()

    FIELDS: ClassVar[tuple[str, ...]] = (
        "content",
        "kind",
        "chat_id",
        "authority",
        "dedup_key",
        "metadata",
        "links",
    )
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        return cls._parse(Fields(obj, known=cls.FIELDS), None)

    @classmethod
    def _parse(cls, f: Fields, kind: str | None) -> Self:
        content = f.required_str("content", max_len=262_144)
        if not content.strip():
            raise InvalidParams("params.content: must not be blank")
        if kind is None:
            kind = f.choice("kind", TEACH_KINDS, "teaching")
        chat_id = f.optional_str("chat_id", max_len=MAX_ID_LEN)
        authority = f.choice("authority", AUTHORITIES, "overlay")
        dedup_key = f.optional_str("dedup_key", max_len=MAX_ID_LEN)
        metadata = f.raw("metadata")
        if metadata is not None:
            if not isinstance(metadata, dict):
                raise InvalidParams("params.metadata: must be an object")
            _check_depth(metadata, "params.metadata")
        links = tuple(_strings(f.optional_list("links", max_items=1_000) or [], "params.links"))
        f.done()
        return cls(content, kind, chat_id, authority, dedup_key, metadata, links)


@dataclass(frozen=True, slots=True)
class CorrectionParams(TeachParams):
    """``correction``: ``teach`` with kind correction: ``{"content", "chat_id"?, ...}``."""

    FIELDS: ClassVar[tuple[str, ...]] = tuple(f for f in TeachParams.FIELDS if f != "kind")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        return cls._parse(Fields(obj, known=cls.FIELDS), "correction")


@dataclass(frozen=True, slots=True)
class LearnParams:
    """``learn``: ``{"outcome", "trace_id"? | "chat_id"?}``; outcome in [-1, 1].

    Without either id the latest trace of all is credited.
    """

    outcome: float
    trace_id: str | None = None
    chat_id: str | None = None
    useful: tuple[str, ...] = ()

    FIELDS: ClassVar[tuple[str, ...]] = ("outcome", "trace_id", "chat_id", "useful")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        outcome = f.optional_number("outcome")
        if outcome is None:
            raise InvalidParams("params.outcome: required")
        if not -1.0 <= outcome <= 1.0:
            raise InvalidParams("params.outcome: must be between -1 and 1")
        trace_id = f.optional_str("trace_id", max_len=MAX_ID_LEN)
        chat_id = f.optional_str("chat_id", max_len=MAX_ID_LEN)
        useful = tuple(_strings(f.optional_list("useful", max_items=1_000) or [], "params.useful"))
        f.done()
        return cls(outcome, trace_id, chat_id, useful)


@dataclass(frozen=True, slots=True)
class TraceParams:
    """``trace``: ``{"trace_id"? | "chat_id"?}``; neither: the latest trace of all."""

    trace_id: str | None = None
    chat_id: str | None = None

    FIELDS: ClassVar[tuple[str, ...]] = ("trace_id", "chat_id")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        trace_id = f.optional_str("trace_id", max_len=MAX_ID_LEN)
        chat_id = f.optional_str("chat_id", max_len=MAX_ID_LEN)
        f.done()
        return cls(trace_id, chat_id)


MAX_PATH_LEN: Final = 4_096


@dataclass(frozen=True, slots=True)
class SyncParams:
    """``sync``: ``{"workspace", "paths"?, "authority"?}``.

    ``workspace`` is a directory (relative paths are the daemon's working
    directory's: prefer absolute ones); ``paths`` are extra files or directories
    (relative to the workspace: an absolute one, or one resolving outside it, is
    refused in the result, never read); ``authority`` maps file names (or paths
    relative to the workspace) to a level, over the defaults.
    """

    workspace: str
    paths: tuple[str, ...] = ()
    authority: tuple[tuple[str, str], ...] = ()

    FIELDS: ClassVar[tuple[str, ...]] = ("workspace", "paths", "authority")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        workspace = f.required_str("workspace", max_len=MAX_PATH_LEN)
        raw_paths = f.optional_list("paths", max_items=1_000) or []
        for i, path in enumerate(raw_paths):
            if not isinstance(path, str) or not path or len(path) > MAX_PATH_LEN:
                raise InvalidParams(
                    f"{f.path('paths')}[{i}]: must be a string of 1..{MAX_PATH_LEN} characters"
                )
        raw_authority = f.raw("authority")
        if raw_authority is None:
            raw_authority = {}
        if not isinstance(raw_authority, dict) or len(raw_authority) > 1_000:
            raise InvalidParams(f"{f.path('authority')}: must be an object of at most 1000 names")
        for name, level in raw_authority.items():
            if not name or len(name) > MAX_PATH_LEN:
                raise InvalidParams(f"{f.path('authority')}: names must be 1..{MAX_PATH_LEN} long")
            if level not in AUTHORITIES:
                raise InvalidParams(
                    f"{f.path('authority')}.{name}: must be one of {', '.join(AUTHORITIES)}"
                )
        f.done()
        return cls(workspace, tuple(raw_paths), tuple(raw_authority.items()))


ON_FORK: Final = ("refuse", "append")


@dataclass(frozen=True, slots=True)
class BootstrapParams:
    """``bootstrap``: ``{"session", "path", "session_key"?, "on_fork"?}``.

    ``path`` is a JSONL transcript the daemon can read (relative paths are the
    daemon's working directory's: prefer absolute ones): a regular file, never
    under ``/proc``, ``/sys`` or ``/dev``. ``on_fork``: ``refuse``
    (the default: a Conflict when stored messages of the session follow the
    newest transcript message stored) or ``append`` (add the transcript's
    branch after them).
    """

    session: str
    path: str
    session_key: str | None = None
    on_fork: str = "refuse"

    FIELDS: ClassVar[tuple[str, ...]] = ("session", "path", "session_key", "on_fork")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        session = f.required_str("session")
        path = f.required_str("path", max_len=MAX_PATH_LEN)
        session_key = f.optional_str("session_key")
        on_fork = f.choice("on_fork", ON_FORK, "refuse")
        f.done()
        return cls(session, path, session_key, on_fork)


@dataclass(frozen=True, slots=True)
class ExpandQueryParams:
    """``expand_query``: ``{"prompt", "session" | "all": true, "summary_ids"?, "query"?, ...}``.

    Optional ``max_tokens`` caps the answer (default 2000). At least one of
    ``summary_ids`` (``sum_`` ids to walk) and ``query`` (free text whose
    full-text hits are walked too).
    """

    prompt: str
    session: str | None
    summary_ids: tuple[str, ...] = ()
    query: str | None = None
    max_tokens: int = 2_000

    FIELDS: ClassVar[tuple[str, ...]] = (
        "prompt",
        "session",
        "all",
        "summary_ids",
        "query",
        "max_tokens",
    )
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        prompt = f.required_str("prompt", max_len=16_384)
        session = f.optional_str("session")
        everything = f.optional_bool("all", default=False)
        if session is None and not everything:
            raise InvalidParams("params.session: required unless all is true")
        if session is not None and everything:
            raise InvalidParams("params.all: give either session or all, not both")
        raw_ids = f.optional_list("summary_ids", max_items=1_000)
        summary_ids = tuple(_strings(raw_ids or [], f.path("summary_ids")))
        query = f.optional_str("query", max_len=4_096)
        if not summary_ids and query is None:
            raise InvalidParams("params.summary_ids: give summary_ids, query or both")
        max_tokens = f.optional_int("max_tokens", default=2_000, minimum=1, maximum=MAX_BUDGET)
        f.done()
        return cls(prompt, session, summary_ids, query, max_tokens)


MAX_GRANT_TTL_S: Final = 30 * 24 * 3600.0
GRANT_ID_LEN: Final = 20


@dataclass(frozen=True, slots=True)
class GrantParams:
    """``grant``: ``{"sessions"? | "session_key"?, "methods", "token_cap", "ttl_s"}``.

    At least one of ``sessions`` (session ids) and ``session_key`` (every
    session filed under it); ``methods`` from ``GRANTABLE``.
    """

    sessions: tuple[str, ...]
    session_key: str | None
    methods: tuple[str, ...]
    token_cap: int
    ttl_s: float

    FIELDS: ClassVar[tuple[str, ...]] = ("sessions", "session_key", "methods", "token_cap", "ttl_s")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        raw_sessions = f.optional_list("sessions", max_items=1_000)
        sessions = tuple(_strings(raw_sessions or [], f.path("sessions")))
        session_key = f.optional_str("session_key")
        if not sessions and session_key is None:
            raise InvalidParams("params.sessions: give sessions, session_key or both")
        raw_methods = f.optional_list("methods", max_items=len(GRANTABLE))
        if not raw_methods:
            raise InvalidParams("params.methods: required, a non-empty array")
        methods = tuple(_strings(raw_methods, f.path("methods")))
        for i, name in enumerate(methods):
            if name not in GRANTABLE:
                raise InvalidParams(
                    f"params.methods[{i}]: {name!r} is not grantable; use {', '.join(GRANTABLE)}"
                )
        token_cap = f.optional_int("token_cap", default=0, minimum=1, maximum=1 << 53)
        if token_cap == 0:
            raise InvalidParams("params.token_cap: required")
        ttl_s = f.optional_number("ttl_s")
        if ttl_s is None:
            raise InvalidParams("params.ttl_s: required")
        if not 0 < ttl_s <= MAX_GRANT_TTL_S:
            raise InvalidParams(f"params.ttl_s: must be > 0 and <= {MAX_GRANT_TTL_S:g}")
        f.done()
        return cls(sessions, session_key, methods, token_cap, ttl_s)


@dataclass(frozen=True, slots=True)
class RevokeParams:
    """``revoke``: ``{"grant_id"}``."""

    grant_id: str

    FIELDS: ClassVar[tuple[str, ...]] = ("grant_id",)
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        grant_id = f.required_str("grant_id", max_len=GRANT_ID_LEN)
        f.done()
        return cls(grant_id)


MAINTAIN_TASKS: Final = ("health", "decay", "merge", "prune", "connect", "scale")
"""The slow loop's tasks in the order they run (``brain.graph.maintain.TASKS``)."""
_MAINTAIN_RATIOS: Final = ("merge_similarity", "prune_below", "connect_similarity")
_MAINTAIN_POSITIVE: Final = ("half_life_days", "orphan_days", "scale_budget")
_MAINTAIN_COUNTS: Final = ("cofire_traces", "connect_k")


@dataclass(frozen=True, slots=True)
class MaintainParams:
    """``maintain``: ``{"tasks"?, "dry_run"?, knobs...}``; absent knobs keep their defaults.

    ``tasks`` names some of ``MAINTAIN_TASKS`` (default: all; they always run in
    that order). Knobs: ``half_life_days``, ``orphan_days``, ``scale_budget``
    (positive), ``merge_similarity``, ``prune_below``, ``connect_similarity``
    (0..1), ``cofire_traces`` (>= 1) and ``connect_k`` (>= 0).
    """

    tasks: tuple[str, ...] = MAINTAIN_TASKS
    dry_run: bool = False
    knobs: tuple[tuple[str, float | int], ...] = ()

    FIELDS: ClassVar[tuple[str, ...]] = (
        "tasks",
        "dry_run",
        *_MAINTAIN_RATIOS,
        *_MAINTAIN_POSITIVE,
        *_MAINTAIN_COUNTS,
    )
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        raw = f.optional_list("tasks", max_items=len(MAINTAIN_TASKS))
        tasks: tuple[str, ...] = MAINTAIN_TASKS
        if raw is not None:
            for i, name in enumerate(raw):
                if name not in MAINTAIN_TASKS:
                    raise InvalidParams(
                        f"{f.path('tasks')}[{i}]: must be one of {', '.join(MAINTAIN_TASKS)}"
                    )
            tasks = tuple(t for t in MAINTAIN_TASKS if t in raw)
        dry_run = f.optional_bool("dry_run", default=False)
        knobs: list[tuple[str, float | int]] = []
        for name in _MAINTAIN_RATIOS + _MAINTAIN_POSITIVE:
            value = f.optional_number(name)
            if value is None:
                continue
            if name in _MAINTAIN_RATIOS and not 0.0 <= value <= 1.0:
                raise InvalidParams(f"{f.path(name)}: must be between 0 and 1")
            if name in _MAINTAIN_POSITIVE and value <= 0:
                raise InvalidParams(f"{f.path(name)}: must be positive")
            knobs.append((name, value))
        for name in _MAINTAIN_COUNTS:
            if f.raw(name) is not None:
                minimum = 1 if name == "cofire_traces" else 0
                knobs.append(
                    (name, f.optional_int(name, default=0, minimum=minimum, maximum=1_000))
                )
        f.done()
        return cls(tasks, dry_run, tuple(knobs))


def _strings(values: list[Any], where: str) -> list[str]:
    for i, value in enumerate(values):
        if not isinstance(value, str) or not value or len(value) > MAX_ID_LEN:
            raise InvalidParams(f"{where}[{i}]: must be a string of 1..{MAX_ID_LEN} characters")
    return values


def _check_block(block: Any, where: str) -> None:
    if not isinstance(block, dict):
        raise InvalidParams(f"{where}: must be an object")
    kind = block.get("type")
    if not isinstance(kind, str) or not kind:
        raise InvalidParams(f"{where}.type: must be a non-empty string")
    _check_depth(block, where)


def _check_depth(value: Any, where: str) -> None:
    """Refuse structures nested deeper than ``MAX_DEPTH``.

    Blocks are stored as JSON again, and orjson refuses to encode more than
    254 levels: without this bound such a block would be a crash, not an
    answer naming the field.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidParams(f"{where}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, dict | list))
