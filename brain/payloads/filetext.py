"""Payload file text: what ``files_fts`` indexes, and reading payloads in bounded pieces.

Large payloads live on disk (``brain.payloads.files``), and the message keeps only a stub,
so their words are searchable only through ``files_fts`` (schema v8): a
contentless FTS5 index, so the database holds the terms and not a second copy
of the text. ``files_index`` gives each payload the integer rowid FTS5 needs and
records its state: ``text`` (indexed), ``skipped`` (an image, binary or base64
data: nothing to search by word) or ``pending`` (stored before v8, not read yet).

Ingest indexes a payload in the transaction that commits its row. Payloads from
before v8 are queued by the migration (SQL cannot read the files) and indexed by
``index_pending`` when the store opens, a few files per transaction so the write
lock is never held long. Only the first ``INDEX_BYTES`` of a payload are indexed:
a word past that point is found by a regex grep, which reads whole files.

Tested through ``grep --scope files``, the one reader of this text:
``tests/brain/recall/search/test_files.py`` (indexing, upgrade backfill, chunked reads).
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

from brain.errors import NotFound, StorageError
from brain.payloads.files import open_payload

if TYPE_CHECKING:
    from brain.store.connection import Store

INDEX_BYTES: Final = 4 * 1024 * 1024
"""Index at most this many bytes of a payload (a 64 MiB log would cost seconds of ingest)."""
CHUNK_BYTES: Final = 1024 * 1024
_BATCH_BYTES: Final = 16 * 1024 * 1024
_BATCH_FILES: Final = 64
_SKIPPED_KINDS: Final = frozenset({"image"})
_BASE64_SAMPLE: Final = 4096


# Compiled on first use: the store imports this module, and opening a database
# indexes nothing.
@functools.cache
def _base64() -> re.Pattern[bytes]:
    return re.compile(rb"(?:data:[\w/+.-]+;base64,)?[A-Za-z0-9+/=]+")


@functools.cache
def _json_escape() -> re.Pattern[str]:
    # JSON escapes glue words together for the tokenizer ("a\nb" would index "nb").
    return re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def indexable_text(data: bytes, encoding: str, part_kind: str) -> str | None:
    """The text ``files_fts`` holds for a payload, or None when it has no words to index.

    Images, binary data and base64 blobs (a document or audio block's data) are
    skipped. At most ``INDEX_BYTES`` are read; bytes that are not UTF-8 become
    U+FFFD. A JSON payload is indexed as its JSON text with escapes undone.
    """
    from brain.payloads.explore import (
        is_binary,  # explore compiles many patterns: loaded when needed
    )

    if part_kind in _SKIPPED_KINDS or is_binary(data) or _looks_base64(data):
        return None
    text = data[:INDEX_BYTES].decode("utf-8", errors="replace")
    if encoding == "json":
        text = _json_escape().sub(_unescape, text)
    return text


def index_file(store: Store, file_id: str, data: bytes, encoding: str, part_kind: str) -> None:
    """Add a payload to ``files_index`` and its text to ``files_fts``.

    Runs in the caller's transaction: ingest's, so the row and its index commit together.
    """
    text = indexable_text(data, encoding, part_kind)
    row = store.one(
        "INSERT INTO files_index (file_id, state) VALUES (?, ?) "
        "ON CONFLICT (file_id) DO UPDATE SET state = excluded.state RETURNING id",
        (file_id, "skipped" if text is None else "text"),
    )
    assert row is not None
    if text is not None:
        store.execute("INSERT INTO files_fts (rowid, text) VALUES (?, ?)", (row[0], text))


def index_pending(store: Store) -> int:
    """Index payloads queued by the v8 migration; return how many were read.

    Files are read outside the transaction and each batch re-checks its rows
    under the write lock, so two processes opening the database at once index
    each file once. A missing file is marked skipped: there is nothing to search.
    """
    done = 0
    while True:
        queued = list(
            store.execute(
                "SELECT q.file_id, f.encoding, f.part_kind FROM files_index q "
                "JOIN large_files f ON f.file_id = q.file_id "
                "WHERE q.state = 'pending' ORDER BY q.id LIMIT ?",
                (_BATCH_FILES,),
            )
        )
        if not queued:
            return done
        batch: list[tuple[str, bytes, str, str]] = []
        size = 0
        for file_id, encoding, part_kind in queued:
            data = b""
            with contextlib.suppress(NotFound, StorageError):
                data = _head(store.files_dir, str(file_id))
            batch.append((str(file_id), data, str(encoding), str(part_kind)))
            size += len(data)
            if size >= _BATCH_BYTES:
                break
        with store.transaction():
            for file_id, data, encoding, part_kind in batch:
                state = store.scalar("SELECT state FROM files_index WHERE file_id = ?", (file_id,))
                if state == "pending":
                    index_file(store, file_id, data, encoding, part_kind if data else "image")
        done += len(batch)


def read_head(files_dir: Path, file_id: str, limit: int = INDEX_BYTES) -> str:
    """The first ``limit`` bytes of a payload, decoded (U+FFFD for bad bytes)."""
    return _head(files_dir, file_id, limit).decode("utf-8", errors="replace")


def text_chunks(files_dir: Path, file_id: str, chunk_bytes: int = CHUNK_BYTES) -> Iterator[str]:
    """A payload's text in pieces of about ``chunk_bytes``, cut after a newline when there is one.

    Memory stays flat however large the file; a match that spans two pieces
    (only possible for a pattern crossing a line, or on a line longer than a
    piece) is not seen whole.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    carry = ""
    # The same guard as every payload read: a symlink or FIFO is never opened.
    handle = os.fdopen(open_payload(files_dir, file_id), "rb")
    with handle:
        while True:
            raw = handle.read(chunk_bytes)
            text = carry + decoder.decode(raw, final=not raw)
            if not raw:
                if text:
                    yield text
                return
            cut = text.rfind("\n") + 1
            if cut == 0 or len(text) - cut > chunk_bytes:
                cut = len(text)
            carry = text[cut:]
            if cut:
                yield text[:cut]


def _head(files_dir: Path, file_id: str, limit: int = INDEX_BYTES) -> bytes:
    try:
        with os.fdopen(open_payload(files_dir, file_id), "rb") as handle:
            return handle.read(limit)
    except OSError as exc:
        raise StorageError(f"cannot read payload file {file_id}: {exc}") from exc


def _looks_base64(data: bytes) -> bool:
    """Only base64 characters (or a data: URL) in the first 4 KiB, no space or newline.

    Such a run is one huge token to the tokenizer, never a word anyone searches for.
    """
    sample = data[:_BASE64_SAMPLE]
    return len(sample) >= 64 and _base64().fullmatch(sample) is not None


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code is None:
        return " "  # \n, \t, \", \\ ...: a separator is all the tokenizer needs
    char = chr(int(code, 16))
    return " " if 0xD800 <= ord(char) <= 0xDFFF else char
