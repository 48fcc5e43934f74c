"""The summary DAG: summary rows, their ordered sources, and their XML rendering.

A leaf summary (depth 0) covers a contiguous run of messages; a condensed
summary (depth d + 1) covers a contiguous run of depth-d summaries. Sources are
kept in order in ``summary_sources``, so any summary expands back down to the
exact messages it came from.

Tested through compaction, describe and expand (``tests/brain/lcm/``), whose
invariants (``helpers.assert_invariants``) check every summary's sources.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Final, Literal

import orjson

from brain.errors import NotFound
from brain.graph.nodes import insert_summary_node
from brain.store.connection import Store
from brain.tokens import estimate_tokens, message_cost
from brain.vectors.writes import enqueue


@dataclass(frozen=True, slots=True)
class Summary:
    """A stored summary and its metadata."""

    row_id: int
    id: str
    conversation_id: int
    kind: Literal["leaf", "condensed"]
    depth: int
    content: str
    token_count: int
    first_seq: int
    last_seq: int
    earliest_at: str
    latest_at: str
    descendant_count: int
    descendant_tokens: int
    message_count: int
    file_ids: tuple[str, ...]
    summarizer: str
    created_at: str
    suppressed: bool = False
    hidden_by: str | None = None
    """``source``: withheld because a source is suppressed; ``replaced``: a retired
    replacement. Either way hidden from agents, like ``suppressed``."""
    replaces: int | None = None
    """For a replacement: the row id of the withheld original it stands in for."""

    @property
    def hidden(self) -> bool:
        """True when no agent-facing path may show this summary."""
        return self.suppressed or self.hidden_by is not None


@dataclass(frozen=True, slots=True)
class SourceRef:
    """One ordered source of a summary: a message or a child summary row id.

    ``omitted``: its text was left out of the summary (it was hidden when the
    summary was made), so hiding it later does not withhold the summary.
    """

    message_id: int | None = None
    child_id: int | None = None
    omitted: bool = False


@dataclass(frozen=True, slots=True)
class NewSummary:
    """What compaction computed for a summary it is about to store."""

    conversation_id: int
    kind: Literal["leaf", "condensed"]
    depth: int
    content: str
    first_seq: int
    last_seq: int
    earliest_at: str
    latest_at: str
    descendant_count: int
    descendant_tokens: int
    message_count: int
    file_ids: tuple[str, ...]
    summarizer: str
    sources: tuple[SourceRef, ...] = ()
    replaces: int | None = None


_COLUMNS = (
    "id, summary_id, conversation_id, kind, depth, content, token_count, first_seq, last_seq, "
    "earliest_at, latest_at, descendant_count, descendant_tokens, message_count, file_ids, "
    "summarizer, created_at, suppressed_at IS NOT NULL, hidden_by, replaces"
)


_SHARED_FIELDS: Final = tuple(
    f.name for f in fields(NewSummary) if f.name in {g.name for g in fields(Summary)}
)
"""What a stored Summary takes over unchanged from the NewSummary it came from."""


def new_summary_id() -> str:
    """``sum_`` + 16 hex characters."""
    return "sum_" + secrets.token_hex(8)


def insert_summary(store: Store, new: NewSummary, created_at: str) -> Summary:
    """Store a summary, its FTS row and its ordered sources (inside a transaction)."""
    summary_id = new_summary_id()
    token_count = estimate_tokens(new.content)
    store.execute(
        "INSERT INTO summaries (summary_id, conversation_id, kind, depth, content, token_count, "
        "first_seq, last_seq, earliest_at, latest_at, descendant_count, descendant_tokens, "
        "message_count, file_ids, summarizer, created_at, replaces) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            summary_id,
            new.conversation_id,
            new.kind,
            new.depth,
            new.content,
            token_count,
            new.first_seq,
            new.last_seq,
            new.earliest_at,
            new.latest_at,
            new.descendant_count,
            new.descendant_tokens,
            new.message_count,
            orjson.dumps(list(new.file_ids)).decode(),
            new.summarizer,
            created_at,
            new.replaces,
        ),
    )
    row_id = int(store.last_rowid())
    store.execute("INSERT INTO summaries_fts (rowid, content) VALUES (?, ?)", (row_id, new.content))
    enqueue(store, "summary", [row_id])
    # Every summary is a retrieval graph node too; it reads the summary's text and
    # vector, so it costs one row.
    insert_summary_node(store, summary_id, row_id, created_at)
    store.executemany(
        "INSERT INTO summary_sources (summary_id, ordinal, message_id, child_id, omitted) "
        "VALUES (?, ?, ?, ?, ?)",
        [(row_id, i, r.message_id, r.child_id, int(r.omitted)) for i, r in enumerate(new.sources)],
    )
    shared = {f: getattr(new, f) for f in _SHARED_FIELDS}
    return Summary(
        row_id=row_id, id=summary_id, token_count=token_count, created_at=created_at, **shared
    )


def load_summaries(store: Store, row_ids: Sequence[int]) -> dict[int, Summary]:
    """Summaries by row id (missing ids are absent from the result)."""
    if not row_ids:
        return {}
    rows = store.execute(
        f"SELECT {_COLUMNS} FROM summaries WHERE id IN (SELECT value FROM json_each(?))",  # noqa: S608
        (orjson.dumps(list(row_ids)).decode(),),
    )
    return {int(r[0]): _summary(tuple(r)) for r in rows}


def summary_by_id(store: Store, summary_id: str) -> Summary:
    """The summary with this public id; ``NotFound`` otherwise."""
    row = store.one(f"SELECT {_COLUMNS} FROM summaries WHERE summary_id = ?", (summary_id,))  # noqa: S608
    if row is None:
        raise NotFound(f"no summary {summary_id!r}", id=summary_id)
    return _summary(row)


def children(store: Store, summary: Summary) -> list[Summary]:
    """A condensed summary's child summaries, in order."""
    ids = [
        int(r[0])
        for r in store.execute(
            "SELECT child_id FROM summary_sources WHERE summary_id = ? AND child_id IS NOT NULL "
            "ORDER BY ordinal",
            (summary.row_id,),
        )
    ]
    found = load_summaries(store, ids)
    return [found[i] for i in ids if i in found]


def child_ids(store: Store, summary: Summary) -> list[str]:
    """Public ids of a summary's child summaries, in order (what its XML lists)."""
    return [
        str(r[0])
        for r in store.execute(
            "SELECT c.summary_id FROM summary_sources ss JOIN summaries c ON c.id = ss.child_id "
            "WHERE ss.summary_id = ? ORDER BY ss.ordinal",
            (summary.row_id,),
        )
    ]


def source_message_ids(store: Store, summary: Summary) -> list[int]:
    """A leaf summary's source message row ids, in order."""
    return [
        int(r[0])
        for r in store.execute(
            "SELECT message_id FROM summary_sources WHERE summary_id = ? "
            "AND message_id IS NOT NULL ORDER BY ordinal",
            (summary.row_id,),
        )
    ]


def source_refs(store: Store, summary: Summary) -> list[SourceRef]:
    """A summary's sources in order, messages and child summaries alike (a replacement
    can hold both)."""
    return [
        SourceRef(r[0], r[1], bool(r[2]))
        for r in store.execute(
            "SELECT message_id, child_id, omitted FROM summary_sources WHERE summary_id = ? "
            "ORDER BY ordinal",
            (summary.row_id,),
        )
    ]


def parent_of(store: Store, summary: Summary) -> Summary | None:
    """The summary that took this one in, if any (a visible one first: a child can
    also be a source of a replacement of its withheld parent)."""
    rows = [
        int(r[0])
        for r in store.execute(
            "SELECT summary_id FROM summary_sources WHERE child_id = ?", (summary.row_id,)
        )
    ]
    found = load_summaries(store, rows)
    parents = sorted(found.values(), key=lambda p: (p.hidden, p.row_id))
    return parents[0] if parents else None


def summary_xml(summary: Summary, child_ids: Sequence[str] = ()) -> str:
    """The user-message text a summary is shown to the model as."""
    head = (
        f'<summary id="{summary.id}" kind="{summary.kind}" depth="{summary.depth}" '
        f'descendant_count="{summary.descendant_count}" earliest_at="{summary.earliest_at}" '
        f'latest_at="{summary.latest_at}">'
    )
    parents = ""
    if child_ids:
        refs = "\n".join(f'<summary_ref id="{c}" />' for c in child_ids)
        parents = f"\n<parents>\n{refs}\n</parents>"
    return f"{head}{parents}\n<content>\n{summary.content}\n</content>\n</summary>"


WITHHELD_NOTE: Final = (
    "[withheld: a source of this summary was suppressed; "
    "a summary of the remaining sources replaces it shortly]"
)


def withheld_xml(summary: Summary, child_ids: Sequence[str] = ()) -> str:
    """What stands in for a withheld summary until its replacement lands: its span
    without its text, never longer than the summary itself (the context item keeps
    the summary's cost, so the budget stays an upper bound)."""
    note = (
        f'<summary id="{summary.id}" kind="{summary.kind}" depth="{summary.depth}" '
        f'earliest_at="{summary.earliest_at}" latest_at="{summary.latest_at}" withheld="true">'
        f"\n<content>\n{WITHHELD_NOTE}\n</content>\n</summary>"
    )
    if estimate_tokens(note) <= estimate_tokens(summary_xml(summary, child_ids)):
        return note
    return f'<summary id="{summary.id}" withheld="true" />'


def summary_cost(summary: Summary, child_ids: Sequence[str] = ()) -> int:
    """What a summary costs in an assembled context (its XML as one user message)."""
    return message_cost(estimate_tokens(summary_xml(summary, child_ids)))


def _summary(row: tuple[object, ...]) -> Summary:
    (
        row_id,
        sid,
        conv,
        kind,
        depth,
        content,
        tokens,
        first,
        last,
        earliest,
        latest,
        desc_count,
        desc_tokens,
        msg_count,
        file_ids,
        summarizer,
        created,
        suppressed,
        hidden_by,
        replaces,
    ) = row
    return Summary(
        int(str(row_id)),
        str(sid),
        int(str(conv)),
        "leaf" if kind == "leaf" else "condensed",
        int(str(depth)),
        str(content),
        int(str(tokens)),
        int(str(first)),
        int(str(last)),
        str(earliest),
        str(latest),
        int(str(desc_count)),
        int(str(desc_tokens)),
        int(str(msg_count)),
        tuple(orjson.loads(str(file_ids))),
        str(summarizer),
        str(created),
        bool(suppressed),
        None if hidden_by is None else str(hidden_by),
        None if replaces is None else int(str(replaces)),
    )
