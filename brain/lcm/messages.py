"""Stored messages as the read side sees them: rows plus their parts, loaded in bulk.

``StoredMessage`` is what assembly, compaction and describe work from. Loading
is two queries whatever the number of messages (rows, then all their parts),
never one query per message.

Tested through its readers: ``tests/brain/lcm/render/test_render.py`` (turns from stored
messages) and ``tests/brain/test_engine.py`` (exact restore by id).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from brain.errors import NotFound, PayloadMissing
from brain.lcm.content import SPEAKER_ROLES, audio_text, function_call_text, restore
from brain.lcm.ids import generated_row_id, public_message_id
from brain.payloads.files import read_stored_file
from brain.store.connection import Store


@dataclass(frozen=True, slots=True)
class StoredPart:
    """One block of a stored message (``block`` decoded; None for origin 'message').

    ``file_id``/``file_bytes`` name the payload file a large value was moved
    to; the block then holds a marker where the value was.
    """

    kind: str
    origin: str
    tool_call_id: str | None
    tool_name: str | None
    file_id: str | None
    file_bytes: int | None
    block: Any


def speaker(role: str, name: str | None) -> str | None:
    """Who said a message: its ``name`` for user, assistant and system messages.

    A tool message's ``name`` is the tool's (OpenAI), not a speaker's.
    """
    return name if name and role in SPEAKER_ROLES else None


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message row with its parts, in ordinal order."""

    row_id: int
    id: str
    seq: int
    role: str
    name: str | None
    content: str
    content_shape: str
    token_count: int
    created_at: str
    parts: tuple[StoredPart, ...]
    suppressed: bool = False
    refusal: str | None = None
    """The message-level ``refusal`` the message came with (OpenAI), if any."""
    no_content: bool = False
    """The message came with ``content`` null or absent: its flattened text is only
    what its tool calls and refusal say, none of it content to show."""
    sent_role: str | None = None
    """The role the message was sent with when it is stored as another
    (``developer`` stored as ``system``, ``function`` as ``tool``)."""
    audio: str | None = None
    """An OpenAI audio answer's text (``[audio] transcript``), if it came with ``audio``."""
    function_call: str | None = None
    """A legacy OpenAI ``function_call`` as text, if it came with one."""


def with_speaker(text: str, name: str | None) -> str:
    """``Name: text`` when there is a name (formats with no name field say it this way)."""
    return f"{name}: {text}" if name else text


# The ``extra`` members rendering needs, read in SQL rather than decoding the
# whole JSON for each message: it may hold large SDK fields (an audio answer's
# base64 ``data``), of which only the transcript is read.
_COLUMNS: Final = (
    "SELECT m.id, m.client_id, m.seq, m.role, m.name, m.content, m.content_shape, "
    "m.token_count, m.created_at, m.suppressed_at IS NOT NULL, "
    "CASE json_type(m.extra, '$.refusal') WHEN 'text' THEN m.extra ->> '$.refusal' END, "
    "json_extract(m.extra, '$.__brain_content__') IS NOT NULL, "
    "m.extra ->> '$.__brain_role__', "
    "CASE WHEN coalesce(json_type(m.extra, '$.audio'), 'null') <> 'null' "
    "THEN json_object('transcript', json_extract(m.extra, '$.audio.transcript')) END, "
    "CASE WHEN coalesce(json_type(m.extra, '$.function_call'), 'null') <> 'null' "
    "THEN m.extra -> '$.function_call' END "
)
# Ids go in as one JSON array (json_each), so any number of them is one
# statement with one binding and no SQL is ever built from values.
# Built from constants only:
_BY_IDS: Final = _COLUMNS + "FROM messages m WHERE m.id IN (SELECT value FROM json_each(?))"  # noqa: S608
_BY_RANGE: Final = (
    _COLUMNS + "FROM messages m WHERE m.conversation_id = ? "
    "AND m.seq BETWEEN ? AND ? ORDER BY m.seq"
)
_PARTS: Final = (
    "SELECT p.message_id, p.kind, p.origin, p.tool_call_id, p.tool_name, p.file_id, "
    "f.byte_size, p.block FROM message_parts p "
    "LEFT JOIN large_files f ON f.file_id = p.file_id "
    "WHERE p.message_id IN (SELECT value FROM json_each(?)) ORDER BY p.message_id, p.ordinal"
)


def load_messages(store: Store, row_ids: Sequence[int]) -> list[StoredMessage]:
    """The messages with these row ids, in the order given (missing ids are skipped)."""
    rows = {int(r[0]): tuple(r) for r in store.execute(_BY_IDS, (_json_ids(row_ids),))}
    parts = _parts(store, list(rows))
    return [_message(rows[r], parts.get(r, ())) for r in row_ids if r in rows]


def load_range(
    store: Store, conversation_id: int, first_seq: int, last_seq: int
) -> list[StoredMessage]:
    """The messages of a conversation with ``first_seq <= seq <= last_seq``, in order."""
    rows = [tuple(r) for r in store.execute(_BY_RANGE, (conversation_id, first_seq, last_seq))]
    parts = _parts(store, [int(r[0]) for r in rows])
    return [_message(r, parts.get(int(r[0]), ())) for r in rows]


@dataclass(frozen=True, slots=True)
class MessageRef:
    """Where a public message id points: row, conversation, seq, session, suppression."""

    row_id: int
    conversation_id: int
    seq: int
    session: str
    suppressed: bool


def find_messages(store: Store, public_id: str, field: str = "id") -> list[MessageRef]:
    """Every message a public id can name: a client id (one per session that used it)
    and, for ``msg_<n>``, the generated id of row n (``field`` names the id in errors)."""
    row_id = generated_row_id(public_id, field)
    refs = [
        MessageRef(int(r[0]), int(r[1]), int(r[2]), str(r[3]), bool(r[4]))
        for r in store.execute(_REF_BY_CLIENT_ID, (public_id,))
    ]
    if row_id is not None:
        refs += [
            MessageRef(int(r[0]), int(r[1]), int(r[2]), str(r[3]), bool(r[4]))
            for r in store.execute(_REF_BY_ROW_ID, (row_id,))
        ]
    return refs


_REF_BY_CLIENT_ID: Final = (
    "SELECT m.id, m.conversation_id, m.seq, c.session_id, m.suppressed_at IS NOT NULL "
    "FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE m.client_id = ?"
)
_REF_BY_ROW_ID: Final = (
    "SELECT m.id, m.conversation_id, m.seq, c.session_id, m.suppressed_at IS NOT NULL "
    "FROM messages m JOIN conversations c ON c.id = m.conversation_id "
    "WHERE m.id = ? AND m.client_id IS NULL"
)


def find_in_session(store: Store, session: str, message_id: str) -> int:
    """The row id of the message ``message_id`` names in ``session`` (``NotFound`` if none).

    A client id is looked up first; ``msg_<n>`` then names row n if it has no client id.
    """
    for ref in find_messages(store, message_id):
        if ref.session == session:
            return ref.row_id
    raise NotFound(f"no message {message_id!r} in session {session!r}")


def restore_message(store: Store, row_id: int, *, keep_missing: bool = False) -> dict[str, Any]:
    """The message with this row id exactly as the client sent it (payload files read back).

    A payload file that is gone raises ``PayloadMissing``; with ``keep_missing`` its
    stored marker stays in its place instead.
    """
    row = store.one(
        "SELECT role, name, content, content_shape, extra FROM messages WHERE id = ?",
        (row_id,),
    )
    if row is None:
        raise NotFound(f"no message row {row_id}")
    parts = [
        (str(p[0]), str(p[1]), p[2], p[3], p[4])
        for p in store.execute(
            "SELECT kind, origin, tool_call_id, block, file_id FROM message_parts "
            "WHERE message_id = ? ORDER BY ordinal",
            (row_id,),
        )
    ]
    files_dir = store.files_dir

    def read(file_id: str) -> bytes | None:
        try:
            return read_stored_file(files_dir, file_id)
        except PayloadMissing:
            if keep_missing:
                return None
            raise

    return restore(str(row[0]), row[1], str(row[2]), str(row[3]), parts, read, row[4])


def newest_user_text(store: Store, session: str) -> str:
    """The content of the session's newest visible user message ("" if none)."""
    row = store.one(
        "SELECT m.content FROM messages m JOIN conversations c "
        "ON c.id = m.conversation_id WHERE c.session_id = ? AND m.role = 'user' "
        "AND m.suppressed_at IS NULL ORDER BY m.seq DESC LIMIT 1",
        (session,),
    )
    return "" if row is None else str(row[0])


def _parts(store: Store, row_ids: list[int]) -> dict[int, tuple[StoredPart, ...]]:
    found: dict[int, list[StoredPart]] = {}
    if not row_ids:
        return {}
    for row in store.execute(_PARTS, (_json_ids(row_ids),)):
        block = None if row[7] is None else orjson.loads(row[7])
        found.setdefault(int(row[0]), []).append(
            StoredPart(row[1], row[2], row[3], row[4], row[5], row[6], block)
        )
    return {k: tuple(v) for k, v in found.items()}


def _message(row: tuple[Any, ...], parts: tuple[StoredPart, ...]) -> StoredMessage:
    return StoredMessage(
        row_id=int(row[0]),
        id=public_message_id(int(row[0]), row[1]),
        seq=int(row[2]),
        role=str(row[3]),
        name=row[4],
        content=str(row[5]),
        content_shape=str(row[6]),
        token_count=int(row[7]),
        created_at=str(row[8]),
        parts=parts,
        suppressed=bool(row[9]),
        refusal=row[10] if isinstance(row[10], str) and row[10] else None,
        no_content=bool(row[11]),
        sent_role=row[12] if isinstance(row[12], str) else None,
        audio=None if row[13] is None else audio_text(orjson.loads(row[13])),
        function_call=None if row[14] is None else function_call_text(orjson.loads(row[14])),
    )


def _json_ids(ids: Sequence[int]) -> str:
    return orjson.dumps(list(ids)).decode()
