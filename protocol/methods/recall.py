"""Params of the recall methods: ``grep`` and ``expand_query``.

Tested where the daemon refuses their bad params (tests/e2e/test_errors.py,
tests/daemon/test_expand_query.py, tests/reliability/test_fuzz.py) and, for
``FIELDS``, by tests/protocol/test_methods.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final, Self

from protocol.errors import InvalidParams
from protocol.fields import Fields
from protocol.methods.checks import strings
from protocol.methods.context import MAX_BUDGET

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
    ``rrf`` (reciprocal rank) or ``weighted`` (min-max scores); ``rank`` (full_text and
    hybrid, default true): reorder by the learned ranking stage. Reads are scoped to one
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
    rank: bool = True

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
        "rank",
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
        rank = f.optional_bool("rank", default=True)
        f.done()
        return cls(
            query,
            mode,
            session,
            session_key,
            everything,
            scope,
            since,
            before,
            limit,
            fusion,
            rank,
        )


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
        summary_ids = tuple(strings(raw_ids or [], f.path("summary_ids")))
        query = f.optional_str("query", max_len=4_096)
        if not summary_ids and query is None:
            raise InvalidParams("params.summary_ids: give summary_ids, query or both")
        max_tokens = f.optional_int("max_tokens", default=2_000, minimum=1, maximum=MAX_BUDGET)
        f.done()
        return cls(prompt, session, summary_ids, query, max_tokens)
