"""Grants: scoped, budgeted, expiring access for delegated sub-agents.

A grant names the sessions it reaches (a list of session ids and/or every
session filed under one ``session_key``), the methods it allows, a token cap
and an expiry. ``check`` decides whether a request may run; ``charge`` adds
what the answer cost once it has run. A request that pushes usage past the cap
still completes (it was allowed when it started); the next one is refused.

Several processes may serve one database (one daemon per connection), so the
cap is held in the database, not in a process: ``admit`` checks the grant and,
in the same ``BEGIN IMMEDIATE`` transaction, reserves one token and takes the
grant's *hold* (a lease with an owner and an end). While one call holds a
grant, calls under it in other processes wait (``admit`` answers None), so
across every process at most one call runs per grant and only that call can
cross the cap. ``settle`` replaces the reservation by what the answer cost and
releases the hold; ``renew`` extends the lease while a long call runs. A
process that dies mid-call leaves its reserved token charged and its hold to
lapse after ``HOLD_S``; it sent no answer (``settle`` runs before the answer
is written).

All grant SQL lives here. Times are stored as UTC ISO-8601 text with
milliseconds, like every other timestamp in the database.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from brain.clock import iso
from brain.errors import GrantDenied, GrantExhausted, InvalidInput, NotFound
from brain.lcm.context import find_session
from brain.store.connection import Store

GRANT_ID: Final = re.compile(r"grt_[0-9a-f]{16}")
"""The shape of every grant id; anything else is refused as unknown without a lookup."""
HOLD_S: Final = 30.0
"""How long a hold lasts unless renewed: how soon a dead process's hold lapses."""
RESERVED: Final = 1
"""Tokens reserved when a call is admitted (kept if the call never settles)."""


@dataclass(frozen=True, slots=True)
class Grant:
    """One stored grant."""

    grant_id: str
    sessions: tuple[str, ...]
    session_key: str | None
    methods: tuple[str, ...]
    token_cap: int
    tokens_used: int
    created_at: str
    expires_at: str
    revoked_at: str | None


@dataclass(frozen=True, slots=True)
class Reach:
    """What a request touches: a session, a session key, or everything.

    ``everything`` is a request over all conversations (``all: true``, or a
    lookup without a session); a request with none of the three (``ping``)
    touches no session. ``suppressed``: the request asks to see suppressed
    items (``describe`` with ``include_suppressed``), which no grant allows.
    """

    session: str | None = None
    session_key: str | None = None
    everything: bool = False
    suppressed: bool = False


def create(
    store: Store,
    *,
    sessions: Sequence[str],
    session_key: str | None,
    methods: Sequence[str],
    token_cap: int,
    ttl_s: float,
    now: datetime | None = None,
) -> Grant:
    """Store a new grant and return it."""
    if not sessions and session_key is None:
        raise InvalidInput("sessions", "give sessions, session_key or both")
    if not methods:
        raise InvalidInput("methods", "must not be empty")
    if token_cap < 1:
        raise InvalidInput("token_cap", "must be >= 1")
    if not ttl_s > 0:
        raise InvalidInput("ttl_s", "must be > 0")
    moment = now or datetime.now(UTC)
    grant = Grant(
        grant_id=f"grt_{secrets.token_hex(8)}",
        sessions=tuple(dict.fromkeys(sessions)),
        session_key=session_key,
        methods=tuple(dict.fromkeys(methods)),
        token_cap=token_cap,
        tokens_used=0,
        created_at=iso(moment),
        expires_at=iso(moment + timedelta(seconds=ttl_s)),
        revoked_at=None,
    )
    with store.transaction():
        store.execute(
            "INSERT INTO grants (grant_id, sessions, session_key, methods, token_cap, "
            "tokens_used, created_at, expires_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?)",
            (
                grant.grant_id,
                json.dumps(list(grant.sessions)),
                grant.session_key,
                json.dumps(list(grant.methods)),
                grant.token_cap,
                grant.created_at,
                grant.expires_at,
            ),
        )
    return grant


def get(store: Store, grant_id: str) -> Grant:
    """The stored grant; ``NotFound`` if there is none with this id."""
    row = (
        store.one(
            "SELECT grant_id, sessions, session_key, methods, token_cap, tokens_used, "
            "created_at, expires_at, revoked_at FROM grants WHERE grant_id = ?",
            (grant_id,),
        )
        if GRANT_ID.fullmatch(grant_id)
        else None
    )
    if row is None:
        raise NotFound("no such grant")
    return Grant(
        grant_id=str(row[0]),
        sessions=tuple(json.loads(row[1])),
        session_key=row[2],
        methods=tuple(json.loads(row[3])),
        token_cap=int(row[4]),
        tokens_used=int(row[5]),
        created_at=str(row[6]),
        expires_at=str(row[7]),
        revoked_at=row[8],
    )


def revoke(store: Store, grant_id: str, now: datetime | None = None) -> Grant:
    """Revoke a grant (idempotent: the first revocation time is kept)."""
    get(store, grant_id)
    with store.transaction():
        store.execute(
            "UPDATE grants SET revoked_at = coalesce(revoked_at, ?) WHERE grant_id = ?",
            (iso(now or datetime.now(UTC)), grant_id),
        )
    return get(store, grant_id)


def check(
    store: Store, grant_id: str, method: str, reach: Reach, now: datetime | None = None
) -> Grant:
    """Return the grant if it allows ``method`` over ``reach`` now, else raise.

    ``GrantDenied`` for an unknown, expired or revoked grant, a method not
    granted, a reach outside the grant, or a request for suppressed items;
    ``GrantExhausted`` when its cap is used up. The messages never echo the
    grant id a caller sent.
    """
    try:
        grant = get(store, grant_id)
    except NotFound:
        raise GrantDenied("grant is unknown", "unknown") from None
    if grant.revoked_at is not None:
        raise GrantDenied("grant was revoked", "revoked")
    if iso(now or datetime.now(UTC)) >= grant.expires_at:
        raise GrantDenied("grant has expired", "expired")
    if method not in grant.methods:
        raise GrantDenied(f"grant does not allow {method!r}", "method")
    if not _within(store, grant, reach):
        raise GrantDenied("request reaches outside the grant's sessions", "scope")
    if reach.suppressed:
        raise GrantDenied("suppressed items cannot be read under a grant", "suppressed")
    if grant.tokens_used >= grant.token_cap:
        raise GrantExhausted(
            "grant token cap is used up", token_cap=grant.token_cap, tokens_used=grant.tokens_used
        )
    return grant


def charge(store: Store, grant_id: str, tokens: int) -> int:
    """Add ``tokens`` to the grant's usage atomically; return the new total."""
    with store.transaction():
        row = store.one(
            "UPDATE grants SET tokens_used = tokens_used + ? WHERE grant_id = ? "
            "RETURNING tokens_used",
            (max(0, tokens), grant_id),
        )
    if row is None:
        raise NotFound("no such grant")
    return int(row[0])


def admit(
    store: Store,
    grant_id: str,
    method: str,
    reach: Reach,
    holder: str,
    now: datetime | None = None,
) -> Grant | None:
    """Check the grant and take its hold for ``holder``, reserving ``RESERVED`` tokens.

    Raises as ``check`` does; returns None, changing nothing, while another
    holder's hold lasts (the caller waits and asks again). Check and
    reservation are one transaction, so two processes cannot both see the
    cap unused and both start.
    """
    moment = now or datetime.now(UTC)
    with store.transaction():
        grant = check(store, grant_id, method, reach, moment)
        row = store.one(
            "SELECT held_by, held_until FROM grants WHERE grant_id = ?", (grant.grant_id,)
        )
        assert row is not None  # ``check`` just read it under the same write lock
        if row[0] is not None and row[0] != holder and str(row[1]) > iso(moment):
            return None
        store.execute(
            "UPDATE grants SET tokens_used = tokens_used + ?, held_by = ?, held_until = ? "
            "WHERE grant_id = ?",
            (RESERVED, holder, iso(moment + timedelta(seconds=HOLD_S)), grant.grant_id),
        )
    return grant


def renew(store: Store, grant_id: str, holder: str, now: datetime | None = None) -> bool:
    """Extend ``holder``'s hold by ``HOLD_S``; False if it no longer holds the grant."""
    until = iso((now or datetime.now(UTC)) + timedelta(seconds=HOLD_S))
    with store.transaction():
        row = store.one(
            "UPDATE grants SET held_until = ? WHERE grant_id = ? AND held_by = ? "
            "RETURNING grant_id",
            (until, grant_id, holder),
        )
    return row is not None


def settle(store: Store, grant_id: str, holder: str, tokens: int) -> int:
    """Charge what an admitted call cost instead of its reservation; release the hold.

    ``tokens`` 0 refunds the reservation (a call that failed costs nothing).
    The hold is released only if ``holder`` still has it. Returns the new usage.
    """
    with store.transaction():
        row = store.one(
            "UPDATE grants SET tokens_used = max(0, tokens_used + ?), "
            "held_until = CASE WHEN held_by = ? THEN NULL ELSE held_until END, "
            "held_by = CASE WHEN held_by = ? THEN NULL ELSE held_by END "
            "WHERE grant_id = ? RETURNING tokens_used",
            (max(0, tokens) - RESERVED, holder, holder, grant_id),
        )
    if row is None:
        raise NotFound("no such grant")
    return int(row[0])


def _within(store: Store, grant: Grant, reach: Reach) -> bool:
    """Whether ``reach`` stays inside the grant's sessions.

    A session is inside when the grant lists it, or when it exists and is
    filed under the grant's key: a session that does not exist yet belongs to
    no key, and a request under a grant never creates one or files one under
    a key (its ``session_key``, if any, must be the one the session has).
    """
    if reach.everything:
        return False
    if reach.session is None:
        return reach.session_key is None or reach.session_key == grant.session_key
    filed = find_session(store, reach.session)
    filed_under = None if filed is None else filed.session_key
    if reach.session_key is not None and reach.session_key != filed_under:
        return False
    if reach.session in grant.sessions:
        return True
    return filed is not None and grant.session_key is not None and filed_under == grant.session_key
