"""Params of the context methods: assemble, compact, describe / expand, suppress.

Tested where the daemon refuses their bad params (tests/e2e/test_errors.py,
tests/daemon/test_fuzz.py, tests/reliability/test_security.py) and, for
``FIELDS``, by tests/protocol/test_methods.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final, Self

from protocol.errors import InvalidParams
from protocol.fields import Fields
from protocol.methods.checks import MAX_ID_LEN
from protocol.methods.graph import RECALL_MODES

FORMATS: Final = ("openai", "anthropic")
MAX_BUDGET: Final = 10_000_000


@dataclass(frozen=True, slots=True)
class AssembleParams:
    """``assemble``: ``{"session", "budget", "format"?, "fresh_tail"?, "stubs"?, ...}``.

    ``stub_tokens``: with ``stubs``, tool results beyond the fresh tail larger
    than this are shown as one-line stubs (recoverable with ``describe``).
    ``recall``: off, shadow or on (default: the daemon's ``recall_mode``), a graph
    query on the newest user message, traced (shadow) or also shown (on).
    ``detail`` (default true): room left once the history is covered goes to
    detail, summaries shown as their sources (false: the context list as it is,
    for a context that changes only when compaction does).
    """

    session: str
    budget: int
    format: str = "openai"
    fresh_tail: int | None = None
    stubs: bool = False
    stub_tokens: int = 1_000
    recall: str | None = None
    detail: bool = True

    FIELDS: ClassVar[tuple[str, ...]] = (
        "session",
        "budget",
        "format",
        "fresh_tail",
        "stubs",
        "stub_tokens",
        "recall",
        "detail",
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
        detail = f.optional_bool("detail", default=True)
        f.done()
        return cls(session, budget, fmt, fresh_tail, stubs, stub_tokens, recall, detail)


@dataclass(frozen=True, slots=True)
class CompactParams:
    """``compact``: ``{"session", "target_tokens"?, "fold_tail"?}`` (a full sweep, or
    sweeps down to a target).

    ``fold_tail`` (with ``target_tokens`` only): when folding everything outside the
    fresh tail does not reach the target, fold into the tail too, oldest first, down
    to the newest user message and what follows it (never split from a tool call's
    result). For a host whose request overflowed the model's window.
    """

    session: str
    target_tokens: int | None = None
    fold_tail: bool = False

    FIELDS: ClassVar[tuple[str, ...]] = ("session", "target_tokens", "fold_tail")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        session = f.required_str("session")
        target = f.optional_int("target_tokens", default=-1, minimum=0, maximum=MAX_BUDGET)
        fold_tail = f.optional_bool("fold_tail", default=False)
        f.done()
        if fold_tail and target == -1:
            # A full sweep has no point to stop at: it would fold the tail away.
            raise InvalidParams("params.fold_tail: needs target_tokens")
        return cls(session, None if target == -1 else target, fold_tail)


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
