"""Params of the grant methods: ``grant`` and ``revoke``.

Tested where the daemon refuses their bad params (tests/daemon/test_grants.py)
and, for ``FIELDS``, by tests/protocol/test_methods.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final, Self

from protocol.errors import InvalidParams
from protocol.fields import Fields
from protocol.methods.checks import strings
from protocol.spec import GRANTABLE

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
        sessions = tuple(strings(raw_sessions or [], f.path("sessions")))
        session_key = f.optional_str("session_key")
        if not sessions and session_key is None:
            raise InvalidParams("params.sessions: give sessions, session_key or both")
        raw_methods = f.optional_list("methods", max_items=len(GRANTABLE))
        if not raw_methods:
            raise InvalidParams("params.methods: required, a non-empty array")
        methods = tuple(strings(raw_methods, f.path("methods")))
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
