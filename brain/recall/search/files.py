"""Scope ``files``: the text of large payload files, as visible as their messages.

Tests: tests/brain/recall/search/test_files.py.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Final

import orjson
import regex

from brain.errors import InvalidInput, NotFound, StorageError
from brain.payloads.filetext import INDEX_BYTES, read_head, text_chunks
from brain.recall.search.model import (
    PAGE,
    SNIPPET_CHARS,
    WORD,
    GrepOptions,
    Hit,
)
from brain.recall.search.snippets import make_snippet, snippet_lead
from brain.recall.search.terms import STOP_WORDS
from brain.store.connection import Store

# Each query joins a file to its message and conversation: a file is as visible as
# its message (scope, since/before by the message's created_at, suppression).
_RANKED_FILES: Final = (
    "SELECT f.file_id, c.session_id, m.created_at, bm25(files_fts) "
    "FROM files_fts CROSS JOIN files_index q ON q.id = files_fts.rowid "
    "CROSS JOIN large_files f ON f.file_id = q.file_id "
    "CROSS JOIN messages m ON m.id = f.message_id "
    "CROSS JOIN conversations c ON c.id = f.conversation_id "
    "WHERE files_fts MATCH ? "
    "AND (? IS NULL OR f.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL "
    "ORDER BY bm25(files_fts) LIMIT ?"
)
_FILE_PAGE: Final = (
    "SELECT q.id, f.file_id, c.session_id, m.created_at FROM files_index q "
    "CROSS JOIN large_files f ON f.file_id = q.file_id "
    "CROSS JOIN messages m ON m.id = f.message_id "
    "CROSS JOIN conversations c ON c.id = f.conversation_id "
    "WHERE q.id < ? AND q.state = 'text' "
    "AND (? IS NULL OR f.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL "
    "ORDER BY q.id DESC LIMIT ?"
)
_FILES_OF_MESSAGES: Final = (
    "SELECT f.file_id, c.session_id, m.created_at, m.id "
    "FROM json_each(?) j CROSS JOIN large_files f ON f.message_id = j.value "
    "CROSS JOIN files_index q ON q.file_id = f.file_id AND q.state = 'text' "
    "CROSS JOIN messages m ON m.id = f.message_id "
    "CROSS JOIN conversations c ON c.id = f.conversation_id "
    "WHERE (? IS NULL OR f.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL"
)
_SNIPPET_READ: Final = 256 * 1024
_LEAD_READ: Final = 4 * SNIPPET_CHARS


def ranked_files(
    store: Store, options: GrepOptions, words: str, bounds: tuple[Any, ...]
) -> list[Hit]:
    """Payload files by bm25 of their indexed text; the snippet is read from the file."""
    rows = list(store.execute(_RANKED_FILES, (words, *bounds, options.limit)))
    needles = _needles(options.query)
    return [
        Hit("file", r[0], r[1], -float(r[3]), _file_snippet(store, r[0], needles), r[2])
        for r in rows
    ]


def _needles(query: str) -> Any:
    """A pattern finding the query's words in a file's text (case-insensitive, longest first).

    The index stems words (porter), so a file can match a query word it does not
    contain as typed; a word's stem-like prefix is tried after the words themselves.
    """
    words = list(dict.fromkeys(w.lower() for w in WORD.findall(query)))
    words = [w for w in words if w not in STOP_WORDS] or words
    words.sort(key=len, reverse=True)
    prefixes = [w[: max(3, len(w) - 3)] for w in words]
    return (
        regex.compile("|".join(regex.escape(w) for w in words), regex.IGNORECASE),
        regex.compile("|".join(regex.escape(w) for w in prefixes), regex.IGNORECASE),
    )


def _file_snippet(store: Store, file_id: str, needles: Any) -> str:
    """``…before [word] after…`` around the first query word in the indexed part of a file.

    Reads in pieces and stops at the first match, so a hit near the top of a large
    file costs one piece; at most ``INDEX_BYTES`` are read (what the index saw).
    """
    try:
        for pattern in needles:
            read = 0
            for chunk in text_chunks(store.files_dir, file_id, _SNIPPET_READ):
                found = pattern.search(chunk)
                if found is not None:
                    return make_snippet(chunk, found.start(), found.end())
                read += len(chunk)
                if read >= INDEX_BYTES:
                    break
        return snippet_lead(read_head(store.files_dir, file_id, _LEAD_READ))
    except (NotFound, StorageError):
        return ""  # the row outlived its file (removed by hand): still a hit, by the index


def scan_files(store: Store, options: GrepOptions, pattern: Any, deadline: float) -> list[Hit]:
    """Payload files whose text matches, newest first, each read in bounded pieces."""
    convs = None if options.conversations is None else orjson.dumps(list(options.conversations))
    bounds = (convs, convs, options.since or "", options.before or "\uffff")
    hits: list[Hit] = []
    cursor_id = 1 << 62
    while len(hits) < options.limit:
        rows: Sequence[Any] = list(store.execute(_FILE_PAGE, (cursor_id, *bounds, PAGE)))
        if not rows:
            break
        for _, file_id, session, created_at in rows:
            snippet = _search_file(store, file_id, pattern, deadline)
            if snippet is not None:
                hits.append(Hit("file", file_id, session, 1.0, snippet, created_at))
                if len(hits) >= options.limit:
                    break
        cursor_id = int(rows[-1][0])
    return hits


def _search_file(store: Store, file_id: str, pattern: Any, deadline: float) -> str | None:
    """The snippet of the first match in a file, or None; an error past the deadline."""
    try:
        for chunk in text_chunks(store.files_dir, file_id):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise InvalidInput("query", "regular expression took too long (over 1 s)")
            try:
                found = pattern.search(chunk, timeout=remaining)
            except TimeoutError:
                raise InvalidInput("query", "regular expression took too long (over 1 s)") from None
            if found is not None:
                return make_snippet(chunk, found.start(), found.end())
    except (NotFound, StorageError):
        return None
    return None


def semantic_files(
    store: Store, options: GrepOptions, ranked: list[tuple[str, int, float]]
) -> list[Hit]:
    """Payload files ranked by their message's similarity (its stub is what is embedded)."""
    scores = {row_id: score for kind, row_id, score in ranked if kind == "message"}
    if not scores:
        return []
    convs = None if options.conversations is None else orjson.dumps(list(options.conversations))
    rows = store.execute(
        _FILES_OF_MESSAGES,
        (
            orjson.dumps(list(scores)),
            convs,
            convs,
            options.since or "",
            options.before or "\uffff",
        ),
    )
    found = [(scores[int(r[3])], str(r[0]), str(r[1]), str(r[2])) for r in rows]
    found.sort(key=lambda t: t[0], reverse=True)
    hits = []
    for score, file_id, session, created_at in found[: options.limit]:
        try:
            lead = snippet_lead(read_head(store.files_dir, file_id, _LEAD_READ))
        except (NotFound, StorageError):
            lead = ""
        hits.append(Hit("file", file_id, session, score, lead, created_at))
    return hits
