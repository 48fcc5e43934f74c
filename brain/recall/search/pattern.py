"""``regex``: the ``regex`` module's engine under a time budget for the whole search.

Rows are scanned newest first in pages, so a pathological pattern ends with an
error within the budget and memory stays flat. Tested through ``grep``
(tests/brain/recall/search/test_pattern.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Final, Literal

import orjson
import regex

from brain.errors import InvalidInput
from brain.lcm.ids import public_message_id
from brain.recall.search.files import scan_files
from brain.recall.search.model import (
    PAGE,
    REGEX_BUDGET_S,
    GrepOptions,
    Hit,
)
from brain.recall.search.snippets import make_snippet
from brain.store.connection import Store

_FUZZY: Final = regex.compile(r"\\.|(\{[\s\d<=+]*[eids][\s<=+,:}])", regex.DOTALL)
"""An escape (skipped), or the start of a fuzzy constraint: ``{e<=2}``, ``{i}``, ``{1<=s<3}``,
``{2i+1d<=4}``, ``{e<=1:[a-z]}``."""


def _refuse_fuzzy(pattern: str) -> None:
    """Refuse the ``regex`` module's fuzzy matching.

    It does not honour the match timeout (``(?:...){e<=10}`` over 3,000 rows
    ran 2.1 s against a 1 s budget, holding the engine's lock), and grep
    never promised approximate matching. Escapes are skipped, so ``\\{e}``
    is a literal; a brace inside a set (``[{e}]``) is refused too, which
    costs nothing but an escape.
    """
    for found in _FUZZY.finditer(pattern):
        if found.group(1) is not None:
            construct = pattern[found.start(1) : pattern.find("}", found.start(1)) + 1]
            raise InvalidInput(
                "query",
                f"fuzzy matching ({construct}) is not supported in a regular expression; "
                "escape the brace (\\{) to match it literally",
            )


def regex_search(store: Store, options: GrepOptions) -> list[Hit]:
    """``regex`` grep: a bounded regular expression over messages and summaries (or files)."""
    _refuse_fuzzy(options.query)
    try:
        pattern = regex.compile(options.query, regex.IGNORECASE if options.query.islower() else 0)
    except regex.error as exc:
        raise InvalidInput("query", f"is not a valid regular expression: {exc}") from None
    deadline = time.monotonic() + REGEX_BUDGET_S
    hits: list[Hit] = []
    if options.scope in ("messages", "both"):
        hits += _scan(store, options, pattern, deadline, _MESSAGE_PAGE, "message")
    if options.scope in ("summaries", "both") and len(hits) < options.limit:
        hits += _scan(store, options, pattern, deadline, _SUMMARY_PAGE, "summary")
    if options.scope == "files":
        hits += scan_files(store, options, pattern, deadline)
    return hits[: options.limit]


_MESSAGE_PAGE: Final = (
    "SELECT m.id, m.client_id, m.seq, m.role, m.created_at, c.session_id, m.content "
    "FROM messages m JOIN conversations c ON c.id = m.conversation_id "
    "WHERE m.id < ? AND (? IS NULL OR m.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL "
    "ORDER BY m.id DESC LIMIT ?"
)
_SUMMARY_PAGE: Final = (
    "SELECT s.id, s.summary_id, NULL, NULL, s.latest_at, c.session_id, s.content "
    "FROM summaries s JOIN conversations c ON c.id = s.conversation_id "
    "WHERE s.id < ? AND (? IS NULL OR s.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND s.latest_at >= ? AND s.earliest_at < ? "
    "AND s.suppressed_at IS NULL AND s.hidden_by IS NULL "
    "ORDER BY s.id DESC LIMIT ?"
)


def _scan(
    store: Store,
    options: GrepOptions,
    pattern: Any,
    deadline: float,
    page_sql: str,
    kind: Literal["message", "summary"],
) -> list[Hit]:
    convs = None if options.conversations is None else orjson.dumps(list(options.conversations))
    hits: list[Hit] = []
    cursor_id = 1 << 62
    while len(hits) < options.limit:
        rows: Sequence[Any] = list(
            store.execute(
                page_sql,
                (cursor_id, convs, convs, options.since or "", options.before or "\uffff", PAGE),
            )
        )
        if not rows:
            break
        for row in rows:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise InvalidInput("query", "regular expression took too long (over 1 s)")
            try:
                found = pattern.search(row[6], timeout=remaining)
            except TimeoutError:
                raise InvalidInput("query", "regular expression took too long (over 1 s)") from None
            if found is None:
                continue
            hit_id = public_message_id(row[0], row[1]) if kind == "message" else str(row[1])
            hits.append(
                Hit(
                    kind,
                    hit_id,
                    row[5],
                    1.0,
                    make_snippet(row[6], found.start(), found.end()),
                    row[4],
                    row[2],
                    row[3],
                )
            )
            if len(hits) >= options.limit:
                break
        cursor_id = int(rows[-1][0])
    return hits
