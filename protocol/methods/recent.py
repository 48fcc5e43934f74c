"""Params of ``recent``: the day and week rollups and leaf summaries of a time window.

Tested where the daemon refuses bad params and answers good ones
(tests/e2e/test_recent_daemon.py) and, for ``FIELDS``, by tests/protocol/test_methods.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final, Self

from protocol.errors import InvalidParams
from protocol.fields import Fields
from protocol.methods.context import MAX_BUDGET

PERIODS: Final = ("day", "week")
"""The windows ``period`` names: the last 24 hours or the last 7 days before ``before``."""
MAX_TIME: Final = 64


@dataclass(frozen=True, slots=True)
class RecentParams:
    """``recent``: ``{"session"? | "session_key"? | "all"?, "since"?, "before"?, "period"?,
    "max_tokens"?}``.

    The window ends at ``before`` (default now) and starts at ``since`` or one
    ``period`` (``day`` or ``week``) earlier (with neither: a week; both: refused,
    naming ``since``). ``max_tokens`` (default 8000) caps what comes
    back, rollups first.
    """

    session: str | None = None
    session_key: str | None = None
    all: bool = False
    since: str | None = None
    before: str | None = None
    period: str | None = None
    max_tokens: int = 8_000

    FIELDS: ClassVar[tuple[str, ...]] = (
        "session",
        "session_key",
        "all",
        "since",
        "before",
        "period",
        "max_tokens",
    )
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        session = f.optional_str("session")
        session_key = f.optional_str("session_key")
        everything = f.optional_bool("all", default=False)
        if sum((session is not None, session_key is not None, everything)) != 1:
            raise InvalidParams("params.session: give exactly one of session, session_key, all")
        since = f.optional_str("since", max_len=MAX_TIME)
        before = f.optional_str("before", max_len=MAX_TIME)
        period = f.optional_choice("period", PERIODS)
        max_tokens = f.optional_int("max_tokens", default=8_000, minimum=1, maximum=MAX_BUDGET)
        f.done()
        return cls(session, session_key, everything, since, before, period, max_tokens)
