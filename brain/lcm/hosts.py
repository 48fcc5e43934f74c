"""Host turns: which host integrations commit turns through brain, and when they last did.

A host's integration (the OpenClaw plugin, say) marks each turn it commits with
``ingest``'s ``turn`` (``{"host", "key"?}``). The mark is recorded in the same
transaction as the turn's messages, in ``meta`` under ``host_turn:<host>``, and
``info`` reports it as ``hosts``: when a host silently stops going through brain
(an upgrade that drops the plugin and falls back to the host's own engine), the
last turn's time stops moving while the host goes on working.

Tested through the daemon: tests/e2e/test_host_turns.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import orjson

from brain.store.connection import Store

__all__ = ["HostTurn", "HostTurns", "read_host_turns", "record_host_turn"]

_PREFIX: Final = "host_turn:"
# Every meta key of the prefix, found by a range on the primary key (';' follows ':').
_RANGE: Final = ("host_turn:", "host_turn;")


@dataclass(frozen=True, slots=True)
class HostTurn:
    """The mark a host puts on a batch: it is one turn committed through brain.

    ``host`` names the integration (``openclaw``); ``key`` is the host's own id for
    the turn (OpenClaw's advancement key), kept so a turn can be found in the
    host's logs.
    """

    host: str
    key: str | None = None


@dataclass(frozen=True, slots=True)
class HostTurns:
    """What ``info`` says of one host: its last turn committed through brain, and how many."""

    last_turn_at: str
    session: str
    key: str | None
    turns: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "last_turn_at": self.last_turn_at,
            "session": self.session,
            "key": self.key,
            "turns": self.turns,
        }


def record_host_turn(store: Store, turn: HostTurn, session: str, stamp: str) -> None:
    """Record ``turn`` (of ``session``, at ``stamp``) as its host's last one; inside the
    caller's transaction, so it lands with the turn's messages or not at all."""
    store.execute(
        "INSERT INTO meta (key, value) VALUES (?, json_object('last_turn_at', ?, "
        "'session', ?, 'key', ?, 'turns', 1)) ON CONFLICT (key) DO UPDATE SET "
        "value = json_set(excluded.value, '$.turns', "
        "coalesce(json_extract(meta.value, '$.turns'), 0) + 1)",
        (_PREFIX + turn.host, stamp, session, turn.key),
    )


def read_host_turns(store: Store) -> dict[str, HostTurns]:
    """Every host that ever marked a turn, by name (inside the caller's read)."""
    out: dict[str, HostTurns] = {}
    for key, value in store.execute(
        "SELECT key, value FROM meta WHERE key >= ? AND key < ? ORDER BY key", _RANGE
    ):
        record = orjson.loads(value)
        out[str(key)[len(_PREFIX) :]] = HostTurns(
            last_turn_at=str(record["last_turn_at"]),
            session=str(record["session"]),
            key=None if record.get("key") is None else str(record["key"]),
            turns=int(record.get("turns", 0)),
        )
    return out
