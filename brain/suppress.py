"""Suppression: hiding messages and summaries from every agent-facing path without
deleting anything.

A suppressed item is left out of ``grep``, ``assemble``, ``expand`` and of what
compaction feeds the summarizer (so its text does not leak into new
summaries); ``describe`` shows it only when asked explicitly. Rows, sources
and payload files stay, so ``unsuppress`` restores it exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from brain.ingest import generated_row_id
from brain.messages import find_messages
from brain.store import Store

SUMMARY_PREFIX: Final = "sum_"


@dataclass(frozen=True, slots=True)
class SuppressResult:
    """Which ids changed state, which already were in it, and which were not found."""

    changed: tuple[str, ...]
    unchanged: tuple[str, ...]
    not_found: tuple[str, ...]


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
            else:
                store.execute(
                    "UPDATE summaries SET suppressed_at = ? WHERE id = ?", (stamp, row_id)
                )
            changed.append(public_id)
            touched.add(conversation_id)
        for conversation_id in touched:
            store.execute(
                "UPDATE conversations SET suppress_epoch = suppress_epoch + 1, "
                "context_version = context_version + 1 WHERE id = ?",
                (conversation_id,),
            )
    return SuppressResult(tuple(changed), tuple(unchanged), tuple(missing))


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
