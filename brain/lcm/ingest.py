"""Ingest: append messages to a conversation, idempotently, in one transaction.

A message is a duplicate, reported and not stored again, when
  * its client id is already stored for the session with the same content
    (the same id with different content is a ``Conflict``: nothing is stored), or
  * it has no client id and is an exact replay of the session's previous
    message (same role, name, content, tool fields and given timestamp).
The second rule catches a host that re-sends its last turn after a crash
without ids; a genuinely repeated "ok" with a different timestamp or id is kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from brain.errors import Conflict, InvalidInput, NotFound
from brain.lcm.content import MessageIn, Normalized, message_part_block, normalize, normalize_time
from brain.lcm.context import find_session
from brain.lcm.hosts import HostTurn, record_host_turn
from brain.lcm.ids import GENERATED_ID, public_message_id
from brain.payloads.files import remove_file, write_file
from brain.payloads.filetext import index_file
from brain.store.connection import Store, Transaction
from brain.tokens import has_cjk, message_cost
from brain.vectors.writes import enqueue

MAX_SESSION_LEN: Final = 512


@dataclass(frozen=True, slots=True)
class IngestedMessage:
    """Outcome for one input message, in input order."""

    id: str
    seq: int
    duplicate: bool


@dataclass(frozen=True, slots=True)
class IngestResult:
    """Outcome of one ingest call."""

    session: str
    ingested: int
    duplicates: int
    messages: tuple[IngestedMessage, ...]
    context_tokens: int = 0
    raw_tokens: int = 0
    budget: int | None = None
    """The budget the session follows (``brain.lcm.budgets``; None: never assembled)."""


def ingest(
    store: Store,
    session: str,
    messages: Sequence[MessageIn],
    *,
    session_key: str | None = None,
    field: str = "messages",
    batch: bool = True,
    create: bool = True,
    now: datetime | None = None,
    turn: HostTurn | None = None,
) -> IngestResult:
    """Store ``messages`` for ``session`` in one transaction and report what happened.

    ``turn``: the batch is one turn a host committed through brain; recorded as
    that host's last turn (``brain.lcm.hosts``) in the same transaction, when the
    batch stored anything (a retried turn, all duplicates, was recorded the first time).

    Every message is validated before the transaction starts, so a bad
    message rejects the whole call and stores nothing. ``field`` and ``batch``
    only shape error messages (``messages[3].role`` or ``message.role``).
    Without ``create`` (a call under a grant) the session must exist (else
    ``NotFound``) and keep its session key (another one is ``Conflict``).
    """
    _check_session(session, session_key)
    moment = now or datetime.now(UTC)
    threshold = store.config.large_payload_tokens
    normalized = []
    for i, m in enumerate(messages):
        where = f"{field}[{i}]" if batch else field
        if m.client_id is not None and GENERATED_ID.fullmatch(m.client_id):
            # msg_<n> names the n-th stored message; a client id of that form
            # could make two messages answer to one id.
            raise InvalidInput(f"{where}.id", "ids of the form msg_<digits> are reserved")
        normalized.append(normalize(m, where=where, large_tokens=threshold, now=moment))
    stamp = normalize_time(None, "now", moment)
    outcomes: list[IngestedMessage] = []
    with store.transaction() as txn:
        conversation_id = _conversation(store, session, session_key, stamp, create)
        last = store.one(
            "SELECT id, seq, client_id, replay_hash FROM messages "
            "WHERE conversation_id = ? ORDER BY seq DESC LIMIT 1",
            (conversation_id,),
        )
        last_seq = 0 if last is None else int(last[1])
        added = 0  # context tokens the new messages bring
        queued: list[int] = []  # message ids for the background embedder
        for msg in normalized:
            dup = _duplicate_of(store, conversation_id, msg, last)
            if dup is not None:
                outcomes.append(IngestedMessage(dup[0], dup[1], duplicate=True))
                continue
            last_seq += 1
            row_id = _insert(store, txn, conversation_id, last_seq, msg, stamp)
            added += message_cost(msg.token_count)
            queued.append(row_id)
            last = (row_id, last_seq, msg.client_id, msg.replay_hash)
            outcomes.append(
                IngestedMessage(public_message_id(row_id, msg.client_id), last_seq, False)
            )
        enqueue(store, "message", queued)  # one statement for the batch
        if turn is not None and queued:
            record_host_turn(store, turn, session, stamp)
        if added:
            totals = store.one(
                "UPDATE conversations SET updated_at = ?, context_tokens = context_tokens + ?, "
                "raw_tokens = raw_tokens + ?, context_version = context_version + 1 WHERE id = ? "
                "RETURNING context_tokens, raw_tokens, assemble_budget",
                (stamp, added, added, conversation_id),
            )
        else:
            totals = store.one(
                "SELECT context_tokens, raw_tokens, assemble_budget FROM conversations "
                "WHERE id = ?",
                (conversation_id,),
            )
    assert totals is not None
    new = sum(1 for o in outcomes if not o.duplicate)
    return IngestResult(
        session,
        new,
        len(outcomes) - new,
        tuple(outcomes),
        int(totals[0]),
        int(totals[1]),
        None if totals[2] is None else int(totals[2]),
    )


def _check_session(session: str, session_key: str | None) -> None:
    if not session or len(session) > MAX_SESSION_LEN:
        raise InvalidInput("session", f"must be 1..{MAX_SESSION_LEN} characters")
    if session_key is not None and (not session_key or len(session_key) > MAX_SESSION_LEN):
        raise InvalidInput("session_key", f"must be 1..{MAX_SESSION_LEN} characters")


def _conversation(
    store: Store, session: str, session_key: str | None, stamp: str, create: bool
) -> int:
    filed = find_session(store, session)
    if filed is None:
        if not create:
            raise NotFound(f"no session {session!r}", session=session)
        store.execute(
            "INSERT INTO conversations (session_id, session_key, created_at, updated_at) "
            "VALUES (?, ?, ?, ?)",
            (session, session_key, stamp, stamp),
        )
        return int(store.last_rowid())
    conversation_id, stored_key = filed
    if session_key is not None and stored_key != session_key:
        if stored_key is not None:
            raise Conflict(
                f"session {session!r} already belongs to session key {stored_key!r}",
                session=session,
                session_key=stored_key,
            )
        if not create:
            raise Conflict(f"session {session!r} is not filed under a session key", session=session)
        store.execute(
            "UPDATE conversations SET session_key = ? WHERE id = ?", (session_key, conversation_id)
        )
    return conversation_id


def _duplicate_of(
    store: Store,
    conversation_id: int,
    msg: Normalized,
    last: tuple[object, ...] | None,
) -> tuple[str, int] | None:
    """(public id, seq) of the stored message this one duplicates, if any."""
    if msg.client_id is not None:
        row = store.one(
            "SELECT id, seq, replay_hash FROM messages WHERE conversation_id = ? AND client_id = ?",
            (conversation_id, msg.client_id),
        )
        if row is None:
            return None
        if row[2] != msg.replay_hash:
            # A reused id with other content: reporting a duplicate would lose
            # this message without the host knowing.
            raise Conflict(
                f"message {msg.client_id!r} is already stored with different content",
                id=msg.client_id,
                seq=int(row[1]),
            )
        return msg.client_id, int(row[1])
    if last is not None and last[3] == msg.replay_hash:
        row_id, seq, client_id = int(str(last[0])), int(str(last[1])), last[2]
        return public_message_id(row_id, client_id if isinstance(client_id, str) else None), seq
    return None


def _insert(
    store: Store, txn: Transaction, conversation_id: int, seq: int, msg: Normalized, stamp: str
) -> int:
    store.execute(
        "INSERT INTO messages (conversation_id, seq, role, name, content, content_shape, "
        "token_count, created_at, client_id, replay_hash, extra) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            conversation_id,
            seq,
            msg.role,
            msg.name,
            msg.content,
            msg.content_shape,
            msg.token_count,
            msg.created_at,
            msg.client_id,
            msg.replay_hash,
            msg.extra,
        ),
    )
    message_id = int(store.last_rowid())
    store.execute(
        "INSERT INTO messages_fts (rowid, content, name, conv) VALUES (?, ?, ?, ?)",
        (message_id, msg.content, msg.name, f"c{conversation_id}"),
    )
    if has_cjk(msg.content):
        store.execute(
            "INSERT INTO messages_cjk (rowid, content) VALUES (?, ?)", (message_id, msg.content)
        )
    store.execute(
        "INSERT INTO context_items (conversation_id, pos, message_id, token_count) "
        "VALUES (?, ?, ?, ?)",
        (conversation_id, seq, message_id, message_cost(msg.token_count)),
    )
    for payload in msg.payloads:
        write_file(store.files_dir, payload.file_id, payload.data)
        txn.on_rollback(_remover(store, payload.file_id))
        store.execute(
            "INSERT INTO large_files (file_id, conversation_id, message_id, part_kind, encoding, "
            "byte_size, token_count, sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                payload.file_id,
                conversation_id,
                message_id,
                payload.part_kind,
                payload.encoding,
                len(payload.data),
                payload.token_count,
                _sha256(payload.data),
                stamp,
            ),
        )
        index_file(store, payload.file_id, payload.data, payload.encoding, payload.part_kind)
    for ordinal, part in enumerate(msg.parts):
        store.execute(
            "INSERT INTO message_parts (message_id, ordinal, kind, origin, tool_call_id, "
            "tool_name, file_id, block) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                message_id,
                ordinal,
                part.kind,
                part.origin,
                part.tool_call_id,
                part.tool_name,
                None if part.payload is None else part.payload.file_id,
                message_part_block(part),
            ),
        )
    return message_id


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _remover(store: Store, file_id: str) -> Callable[[], None]:
    return lambda: remove_file(store.files_dir, file_id)
