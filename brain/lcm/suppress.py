"""Suppression: hiding messages and summaries from every agent-facing path without
deleting anything.

A suppressed item is left out of ``grep``, ``assemble``, ``expand`` and of what
compaction feeds the summarizer (so its text does not leak into new
summaries); ``describe`` shows it only when asked explicitly. Rows, sources
and payload files stay, so ``unsuppress`` restores it exactly.

A summary made before the suppression holds the text too. In the same
transaction every summary whose text came from a hidden source (transitively,
through the DAG's source links, except sources ``omitted`` when it was made)
is *withheld* (``hidden_by = 'source'``): hidden exactly like a suppressed one.
Compaction rebuilds a withheld summary of the context list from its remaining
sources (``brain.lcm.compaction``); until then assemble shows a placeholder in its
place. Unsuppress clears what is no longer withheld and swaps an original back
into the context list in place of its replacement, which is retired
(``hidden_by = 'replaced'``, kept).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import orjson

from brain.lcm.dag import child_ids, load_summaries, summary_cost
from brain.lcm.ids import generated_row_id
from brain.lcm.messages import find_messages
from brain.store.connection import Store

SUMMARY_PREFIX: Final = "sum_"


@dataclass(frozen=True, slots=True)
class SuppressResult:
    """Which ids changed state, which already were in it, and which were not found."""

    changed: tuple[str, ...]
    unchanged: tuple[str, ...]
    not_found: tuple[str, ...]
    rebuild: tuple[str, ...] = ()
    """Sessions whose context list now holds a withheld summary to rebuild."""


def set_suppressed(
    store: Store,
    ids: Sequence[str],
    scope: Callable[[int], bool],
    *,
    suppressed: bool,
    now: str,
) -> SuppressResult:
    """Suppress (or unsuppress) messages and summaries by their public ids, in scope."""
    changed: list[str] = []
    unchanged: list[str] = []
    missing: list[str] = []
    touched: set[int] = set()
    messages: list[int] = []
    summaries: list[int] = []
    stamp = now if suppressed else None
    for i, public_id in enumerate(ids):  # a malformed id refuses the call before any write
        generated_row_id(public_id, f"ids[{i}]")
    with store.transaction():
        for public_id in dict.fromkeys(ids):
            found = _resolve(store, public_id, scope)
            if found is None:
                missing.append(public_id)
                continue
            table, row_id, conversation_id, current = found
            if current == suppressed:
                unchanged.append(public_id)
                continue
            if table == "messages":
                store.execute("UPDATE messages SET suppressed_at = ? WHERE id = ?", (stamp, row_id))
                messages.append(row_id)
            else:
                store.execute(
                    "UPDATE summaries SET suppressed_at = ? WHERE id = ?", (stamp, row_id)
                )
                summaries.append(row_id)
            changed.append(public_id)
            touched.add(conversation_id)
        cleared = refresh_withheld(store, messages, summaries)
        restore_originals(store, cleared)
        for conversation_id in touched:
            store.execute(
                "UPDATE conversations SET suppress_epoch = suppress_epoch + 1, "
                "context_version = context_version + 1 WHERE id = ?",
                (conversation_id,),
            )
        rebuild = tuple(
            str(store.scalar("SELECT session_id FROM conversations WHERE id = ?", (c,)))
            for c in sorted(touched)
            if rebuilds_due(store, c)
        )
    return SuppressResult(tuple(changed), tuple(unchanged), tuple(missing), rebuild)


def refresh_withheld(store: Store, messages: Sequence[int], summaries: Sequence[int]) -> set[int]:
    """Recompute ``hidden_by = 'source'`` for every summary above these rows (inside
    the caller's transaction); returns the summaries that stopped being withheld.

    Only non-omitted source links count: a source hidden when the summary was
    made never reached its text. Ancestors are recomputed by depth, children
    before parents (a summary is always deeper than everything below it).
    """
    if not messages and not summaries:
        return set()
    ancestors = store.execute(
        "WITH RECURSIVE up(id) AS ("
        "SELECT summary_id FROM summary_sources WHERE omitted = 0 "
        "AND message_id IN (SELECT value FROM json_each(?)) "
        "UNION SELECT summary_id FROM summary_sources WHERE omitted = 0 "
        "AND child_id IN (SELECT value FROM json_each(?)) "
        "UNION SELECT ss.summary_id FROM up JOIN summary_sources ss ON ss.child_id = up.id "
        "WHERE ss.omitted = 0) "
        "SELECT s.id, s.hidden_by FROM up JOIN summaries s ON s.id = up.id ORDER BY s.depth, s.id",
        (orjson.dumps(list(messages)).decode(), orjson.dumps(list(summaries)).decode()),
    ).fetchall()
    cleared: set[int] = set()
    for row_id, hidden_by in ancestors:
        if hidden_by == "replaced":
            continue  # retired for good: it never comes back on its own
        withheld = bool(
            store.scalar(
                "SELECT EXISTS (SELECT 1 FROM summary_sources ss "
                "LEFT JOIN messages m ON m.id = ss.message_id "
                "LEFT JOIN summaries c ON c.id = ss.child_id "
                "WHERE ss.summary_id = ? AND ss.omitted = 0 AND (m.suppressed_at IS NOT NULL "
                "OR c.suppressed_at IS NOT NULL OR c.hidden_by IS NOT NULL))",
                (row_id,),
            )
        )
        if withheld and hidden_by is None:
            store.execute("UPDATE summaries SET hidden_by = 'source' WHERE id = ?", (row_id,))
        elif not withheld and hidden_by == "source":
            store.execute("UPDATE summaries SET hidden_by = NULL WHERE id = ?", (row_id,))
            cleared.add(int(str(row_id)))
    return cleared


def restore_originals(store: Store, cleared: set[int]) -> None:
    """Swap each original that is no longer withheld back into the context list in place
    of its replacement, and retire the replacement (inside the caller's transaction)."""
    for original in load_summaries(store, sorted(cleared)).values():
        row = store.one(
            "SELECT c.summary_id, c.token_count FROM context_items c "
            "JOIN summaries r ON r.id = c.summary_id "
            "WHERE c.conversation_id = ? AND c.pos = ? AND r.replaces = ?",
            (original.conversation_id, original.first_seq, original.row_id),
        )
        if row is None:
            continue  # never rebuilt, or its replacement was folded into a deeper summary
        cost = summary_cost(original, child_ids(store, original))
        store.execute(
            "UPDATE context_items SET summary_id = ?, depth = ?, token_count = ? "
            "WHERE conversation_id = ? AND pos = ?",
            (original.row_id, original.depth, cost, original.conversation_id, original.first_seq),
        )
        store.execute("UPDATE summaries SET hidden_by = 'replaced' WHERE id = ?", (int(row[0]),))
        store.execute(
            "UPDATE conversations SET context_tokens = context_tokens + ?, "
            "context_version = context_version + 1, compaction_epoch = compaction_epoch + 1 "
            "WHERE id = ?",
            (cost - int(row[1]), original.conversation_id),
        )


def withheld_in_context(store: Store, conversation_id: int) -> list[tuple[int, int]]:
    """(pos, summary row id) of the context items showing a withheld summary (one not
    suppressed itself: a suppressed summary simply leaves the context), in order."""
    return [
        (int(r[0]), int(r[1]))
        for r in store.execute(
            "SELECT c.pos, s.id FROM summaries s INDEXED BY summaries_hidden "
            "JOIN context_items c ON c.conversation_id = s.conversation_id "
            "AND c.pos = s.first_seq AND c.summary_id = s.id "
            "WHERE s.conversation_id = ? "
            "AND (s.suppressed_at IS NOT NULL OR s.hidden_by IS NOT NULL) "
            "AND s.hidden_by = 'source' AND s.suppressed_at IS NULL ORDER BY c.pos",
            (conversation_id,),
        )
    ]


def _resolve(
    store: Store, public_id: str, scope: Callable[[int], bool]
) -> tuple[str, int, int, bool] | None:
    """(table, row id, conversation id, suppressed now) of an id visible in scope."""
    if public_id.startswith(SUMMARY_PREFIX):
        row = store.one(
            "SELECT id, conversation_id, suppressed_at FROM summaries WHERE summary_id = ?",
            (public_id,),
        )
        if row is None or not scope(int(row[1])):
            return None
        return "summaries", int(row[0]), int(row[1]), row[2] is not None
    visible = [r for r in find_messages(store, public_id) if scope(r.conversation_id)]
    if len(visible) != 1:
        return None  # unknown, out of scope, or ambiguous without a session
    ref = visible[0]
    return "messages", ref.row_id, ref.conversation_id, ref.suppressed


# A replacement in a context list left something out that is visible again (a
# partial unsuppress: the original stays withheld by another source): rebuilding
# it makes the span's summary complete again.
_STALE: Final = (
    "r.replaces IS NOT NULL AND r.hidden_by IS NULL AND r.suppressed_at IS NULL "
    "AND EXISTS (SELECT 1 FROM summary_sources ss LEFT JOIN messages m ON m.id = ss.message_id "
    "LEFT JOIN summaries k ON k.id = ss.child_id WHERE ss.summary_id = r.id AND ss.omitted = 1 "
    "AND ((m.id IS NOT NULL AND m.suppressed_at IS NULL) "
    "OR (k.id IS NOT NULL AND k.suppressed_at IS NULL AND k.hidden_by IS NOT 'replaced')))"
)


def stale_in_context(store: Store, conversation_id: int) -> list[tuple[int, int]]:
    """(pos, summary row id) of context items showing a stale replacement, in order."""
    return [
        (int(r[0]), int(r[1]))
        for r in store.execute(
            "SELECT c.pos, r.id FROM summaries r INDEXED BY summaries_replaces "  # noqa: S608
            "JOIN context_items c ON c.conversation_id = r.conversation_id "
            "AND c.pos = r.first_seq AND c.summary_id = r.id "
            f"WHERE r.conversation_id = ? AND {_STALE} ORDER BY c.pos",
            (conversation_id,),
        )
    ]


def rebuild_due(store: Store, summary_row_id: int) -> bool:
    """Whether this summary, shown in a context list, needs a rebuild: withheld (and not
    suppressed itself), or a stale replacement."""
    return bool(
        store.scalar(
            "SELECT (r.hidden_by = 'source' AND r.suppressed_at IS NULL) "  # noqa: S608
            f"OR ({_STALE}) FROM summaries r WHERE r.id = ?",
            (summary_row_id,),
        )
    )


def rebuilds_due(store: Store, conversation_id: int) -> list[tuple[int, int]]:
    """(pos, summary row id) of every context item due for a rebuild, in order."""
    return sorted(
        withheld_in_context(store, conversation_id) + stale_in_context(store, conversation_id)
    )


def withheld_sessions(store: Store) -> list[str]:
    """Sessions with a rebuild due in their context list (after a suppression or
    unsuppression by another process, or a restart before the rebuild landed)."""
    conversations = [
        (int(r[0]), str(r[1]))
        for r in store.execute(
            "SELECT DISTINCT v.id, v.session_id FROM summaries s INDEXED BY summaries_hidden "  # noqa: S608
            "JOIN context_items c ON c.conversation_id = s.conversation_id "
            "AND c.pos = s.first_seq AND c.summary_id = s.id "
            "JOIN conversations v ON v.id = s.conversation_id "
            "WHERE (s.suppressed_at IS NOT NULL OR s.hidden_by IS NOT NULL) "
            "AND s.hidden_by = 'source' AND s.suppressed_at IS NULL "
            "UNION SELECT v.id, v.session_id FROM summaries r INDEXED BY summaries_replaces "
            "JOIN context_items c ON c.conversation_id = r.conversation_id "
            "AND c.pos = r.first_seq AND c.summary_id = r.id "
            f"JOIN conversations v ON v.id = r.conversation_id WHERE {_STALE}"
        )
    ]
    return [session for _id, session in sorted(conversations)]
