"""describe and expand: looking into summaries, payload files and messages.

``describe`` says what an id is: a summary's content, metadata, source range,
children and parent and subtree costs; a payload file's metadata, a
deterministic exploration summary and (a line range of) its content; a
message as it was sent. ``expand`` walks a summary down through child
summaries to source messages, level by level, under a token cap.

Every lookup is scoped: an id outside the caller's session is reported as not
found, exactly like an id that does not exist.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Final

from brain.errors import InvalidInput, NotFound
from brain.lcm.context import Scope, visible
from brain.lcm.dag import Summary, children, parent_of, source_message_ids, summary_by_id
from brain.lcm.messages import find_messages, load_messages
from brain.lcm.rollups.read import ROLLUP_ID_RE, describe_rollup, expand_rollup
from brain.payloads.files import FILE_ID_RE, file_path, read_stored_file
from brain.store.connection import Store
from brain.tokens import estimate_tokens

SUMMARY_ID_RE: Final = re.compile(r"sum_[0-9a-f]{16}")


def describe(
    store: Store,
    target: str,
    scope: Scope,
    *,
    max_tokens: int = 4_000,
    lines: tuple[int, int] | None = None,
    get_message: Callable[[int], dict[str, Any]] | None = None,
    include_suppressed: bool = False,
) -> dict[str, Any]:
    """Describe a summary (``sum_``), a rollup (``rol_``), payload file (``file_``) or
    message id.

    Suppressed items (and payload files of suppressed messages) are reported
    as not found unless ``include_suppressed``.
    """
    if SUMMARY_ID_RE.fullmatch(target):
        summary = _scoped_summary(store, target, scope, include_suppressed)
        return _describe_summary(store, summary)
    if ROLLUP_ID_RE.fullmatch(target):
        # Derived, never suppressed itself: hidden while a leaf of it is, whatever is asked.
        return describe_rollup(store, target, visible(scope))
    if FILE_ID_RE.fullmatch(target):
        return _describe_file(store, target, scope, max_tokens, lines, include_suppressed)
    if get_message is not None:
        row = _message_row(store, target, scope, include_suppressed, _not_found(target))
        return {
            "kind": "message",
            "id": target,
            "seq": row[1],
            "session": row[2],
            "created_at": store.scalar("SELECT created_at FROM messages WHERE id = ?", (row[0],)),
            "covered_by": _covering_summary(store, row[0]),
            "message": get_message(row[0]),
            "suppressed": row[3],
            "missing_files": _missing_files(store, row[0]),
        }
    raise _not_found(target)


_KINDS: Final = (
    ("sum_", "summary", SUMMARY_ID_RE),
    ("rol_", "rollup", ROLLUP_ID_RE),
    ("file_", "file", FILE_ID_RE),
)
_NOT_DESCRIBED: Final = {"nd_": "graph node", "tr_": "query trace", "grt_": "grant"}


def _not_found(target: str) -> NotFound:
    """What an id that names nothing was taken for, by its prefix: a model that mistypes
    a summary id is told of a summary (and of the id's shape), not of a message."""
    for prefix, kind, shape in _KINDS:
        if target.startswith(prefix):
            malformed = (
                "" if shape.fullmatch(target) else f" (a {kind} id is {prefix} and 16 hex digits)"
            )
            return NotFound(f"no {kind} {target!r}{malformed}", id=target)
    for prefix, kind in _NOT_DESCRIBED.items():
        if target.startswith(prefix):
            return NotFound(
                f"no message {target!r} ({prefix} ids are {kind}s, which describe does not "
                "read: it takes sum_, rol_, file_ and message ids)",
                id=target,
            )
    return NotFound(f"no message {target!r}", id=target)


def expand(
    store: Store, summary_id: str, scope: Scope, *, max_tokens: int = 4_000
) -> dict[str, Any]:
    """Walk a summary down to child summaries and source messages, under ``max_tokens``
    (a ``rol_`` rollup: to its leaf summaries).

    Level by level (children before grandchildren), each level in time order,
    so a small cap gives an overview and a larger one reaches the messages.
    A first item that alone costs more than the cap comes back cut to it
    (``truncated`` on the item), so a small cap never answers with nothing.
    """
    if ROLLUP_ID_RE.fullmatch(summary_id):
        return expand_rollup(store, summary_id, visible(scope), max_tokens=max_tokens)
    root = _scoped_summary(store, summary_id, scope)
    out: list[dict[str, Any]] = []
    reached: list[str] = []
    spent = 0
    truncated = False
    level: list[Summary] = [root]
    while level and not truncated:
        next_level: list[Summary] = []
        for summary in level:
            # A replacement can hold child summaries and messages side by side.
            kids = [k for k in children(store, summary) if not k.hidden]
            sources = load_messages(store, source_message_ids(store, summary))
            messages = [m for m in sources if not m.suppressed]
            entries = [_summary_entry(k) for k in kids] + [
                {
                    "kind": "message",
                    "id": m.id,
                    "seq": m.seq,
                    "role": m.role,
                    "name": m.name,  # who said it, when given
                    "created_at": m.created_at,
                    "content": m.content,
                    "tokens": m.token_count,
                    "parent": summary.id,
                }
                for m in messages
            ]
            next_level += kids
            for entry in entries:
                entry["parent"] = summary.id
                cost = int(entry["tokens"])
                if spent + cost > max_tokens:
                    truncated = True
                    if not out:
                        # Nothing fits otherwise: half a summary beats an empty answer.
                        entry["content"] = _truncate(str(entry["content"]), max_tokens)
                        entry["tokens"] = estimate_tokens(entry["content"])
                        entry["truncated"] = True
                        out.append(entry)
                        reached.append(str(entry["id"]))
                        spent += int(entry["tokens"])
                    break
                out.append(entry)
                reached.append(str(entry["id"]))
                spent += cost
            if truncated:
                break
        level = next_level
    return {
        "id": root.id,
        "items": out,
        "reached": reached,
        "tokens": spent,
        "truncated": truncated,
    }


# -- summaries --------------------------------------------------------------------


def _scoped_summary(
    store: Store, summary_id: str, scope: Scope, include_suppressed: bool = False
) -> Summary:
    summary = summary_by_id(store, summary_id)
    # Withheld (a source suppressed) hides a summary exactly like suppressing it.
    if not visible(scope)(summary.conversation_id) or (summary.hidden and not include_suppressed):
        raise NotFound(f"no summary {summary_id!r}", id=summary_id)
    return summary


def _describe_summary(store: Store, summary: Summary) -> dict[str, Any]:
    kids = children(store, summary) if summary.kind == "condensed" else []
    parent = parent_of(store, summary)
    session = store.scalar(
        "SELECT session_id FROM conversations WHERE id = ?", (summary.conversation_id,)
    )
    sources: dict[str, Any] = {"first_seq": summary.first_seq, "last_seq": summary.last_seq}
    ids = source_message_ids(store, summary)
    if summary.kind == "leaf" or ids:
        sources["messages"] = [m.id for m in load_messages(store, ids)]
    subtree_summary_tokens = int(
        store.scalar(
            "WITH RECURSIVE sub(id) AS (SELECT ? UNION ALL "
            "SELECT child_id FROM summary_sources JOIN sub ON summary_sources.summary_id = sub.id "
            "WHERE child_id IS NOT NULL) "
            "SELECT coalesce(sum(token_count), 0) FROM summaries WHERE id IN (SELECT id FROM sub)",
            (summary.row_id,),
        )
    )
    info = asdict(summary)
    info.pop("row_id")
    info.pop("conversation_id")
    info["withheld"] = info.pop("hidden_by") == "source"
    replaces = info.pop("replaces")
    info["replaces"] = (
        None
        if replaces is None
        else store.scalar("SELECT summary_id FROM summaries WHERE id = ?", (replaces,))
    )
    info["summary_kind"] = info.pop("kind")
    info["file_ids"] = list(summary.file_ids)
    return {
        "kind": "summary",
        **info,
        "session": session,
        "sources": sources,
        "children": [
            {
                "id": k.id,
                "depth": k.depth,
                "tokens": k.token_count,
                "earliest_at": k.earliest_at,
                "latest_at": k.latest_at,
            }
            for k in kids
        ],
        "parent": None if parent is None else parent.id,
        "subtree": {
            "summary_tokens": subtree_summary_tokens,
            "source_tokens": summary.descendant_tokens,
            "messages": summary.message_count,
        },
    }


def _summary_entry(summary: Summary) -> dict[str, Any]:
    return {
        "kind": "summary",
        "id": summary.id,
        "depth": summary.depth,
        "earliest_at": summary.earliest_at,
        "latest_at": summary.latest_at,
        "content": summary.content,
        "tokens": summary.token_count,
    }


# -- files ------------------------------------------------------------------------


def _describe_file(
    store: Store,
    file_id: str,
    scope: Scope,
    max_tokens: int,
    lines: tuple[int, int] | None,
    include_suppressed: bool,
) -> dict[str, Any]:
    from brain.payloads.explore import explore, line_range  # its many patterns load on first use

    row = store.one(
        "SELECT f.conversation_id, f.message_id, f.part_kind, f.encoding, f.byte_size, "
        # An OpenAI tool message names its tool in the message's name, as the stub shows it.
        "f.token_count, f.sha256, f.created_at, c.session_id, m.client_id, "
        "coalesce(p.tool_name, CASE WHEN m.role = 'tool' THEN m.name END), "
        "m.suppressed_at IS NOT NULL "
        "FROM large_files f JOIN conversations c ON c.id = f.conversation_id "
        "JOIN messages m ON m.id = f.message_id "
        "LEFT JOIN message_parts p ON p.file_id = f.file_id "
        "WHERE f.file_id = ?",
        (file_id,),
    )
    if row is None or not visible(scope)(int(row[0])) or (row[-1] and not include_suppressed):
        raise NotFound(f"no file {file_id!r}", id=file_id)
    data = read_stored_file(store.files_dir, file_id)
    found = explore(data, encoding="json" if row[3] == "json" else "utf8", hint=row[10])
    text: str
    if lines is not None:
        if lines[0] < 1 or lines[1] < lines[0]:
            raise InvalidInput("lines", "must be [start, end] with 1 <= start <= end")
        text = line_range(data, lines[0], lines[1])
    else:
        text = data.decode("utf-8", errors="replace")
    truncated = False
    if estimate_tokens(text) > max_tokens:
        text = _truncate(text, max_tokens)
        truncated = True
    message_id = row[9] if row[9] is not None else f"msg_{row[1]}"
    return {
        "kind": "file",
        "id": file_id,
        "session": row[8],
        "message_id": message_id,
        "part_kind": row[2],
        "encoding": row[3],
        "bytes": row[4],
        "tokens": row[5],
        "sha256": row[6],
        "created_at": row[7],
        "tool": row[10],
        "exploration": {
            "kind": found.kind,
            "language": found.language,
            "lines": found.lines,
            "summary": found.summary,
        },
        "content": text,
        "lines": list(lines) if lines else None,
        "truncated": truncated,
    }


def _truncate(text: str, max_tokens: int) -> str:
    """Cut ``text`` to about ``max_tokens`` at a line boundary where possible."""
    budget = max_tokens * 4
    cut = text[:budget]
    newline = cut.rfind("\n")
    if newline > budget // 2:
        cut = cut[:newline]
    while cut and estimate_tokens(cut) > max_tokens:
        cut = cut[: len(cut) * 9 // 10]
    return cut


# -- messages ---------------------------------------------------------------------


def _message_row(
    store: Store,
    message_id: str,
    scope: Scope,
    include_suppressed: bool = False,
    missing: NotFound | None = None,
) -> tuple[int, int, str, bool]:
    """(row id, seq, session, suppressed) of a message by client id or ``msg_<n>`` id;
    ``missing`` (default: "no message") when there is none in scope."""
    seen = visible(scope)
    found = [
        r
        for r in find_messages(store, message_id)
        if seen(r.conversation_id) and (include_suppressed or not r.suppressed)
    ]
    if len(found) > 1:
        raise InvalidInput("session", f"message id {message_id!r} is ambiguous; give a session")
    if not found:
        raise missing or NotFound(f"no message {message_id!r}", id=message_id)
    ref = found[0]
    return ref.row_id, ref.seq, ref.session, ref.suppressed


def _missing_files(store: Store, message_row_id: int) -> list[str]:
    """Payload files of a message that are gone from the files directory (damage:
    ``get_message`` leaves their stored markers in the message)."""
    return [
        str(r[0])
        for r in store.execute(
            "SELECT file_id FROM message_parts WHERE message_id = ? AND file_id IS NOT NULL "
            "ORDER BY ordinal",
            (message_row_id,),
        )
        if not file_path(store.files_dir, str(r[0])).exists()
    ]


def _covering_summary(store: Store, message_row_id: int) -> str | None:
    row = store.one(
        "SELECT s.summary_id FROM summary_sources ss JOIN summaries s ON s.id = ss.summary_id "
        # A visible one first: a replacement can cover the message beside its withheld original.
        "WHERE ss.message_id = ? "
        "ORDER BY s.suppressed_at IS NOT NULL OR s.hidden_by IS NOT NULL, s.id LIMIT 1",
        (message_row_id,),
    )
    return None if row is None else str(row[0])
