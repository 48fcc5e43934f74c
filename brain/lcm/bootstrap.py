"""Bootstrap: reconcile a session from a JSONL transcript file.

The transcript is read by ``brain.lcm.transcript`` (its two formats, the active
path, stable client ids, the refusal of anything but a regular file). Here it
meets the store: the *anchor* is the newest path message already stored for the
session; only what follows it is imported. When the store holds messages of the
session after the anchor (the transcript branched away from what was stored),
the import is a *fork*: refused with ``Conflict`` unless ``on_fork="append"``,
which appends the transcript's branch after what is stored. Stored history is
never deleted. The client ids keep ingest idempotent, so a run that stopped
half-way resumes at its anchor.

Memory stays flat in the file size apart from the scan's small record per
entry: the second pass reads only the path's lines back by offset, and
messages are ingested in batches of ``BATCH`` (one transaction each).
"""

from __future__ import annotations

import contextlib
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final, Literal

import orjson

from brain.errors import Conflict, InvalidInput
from brain.lcm.content import MessageIn
from brain.lcm.context import find_session
from brain.lcm.ingest import ingest
from brain.lcm.transcript import (
    Format,
    Scan,
    active_path,
    open_transcript,
    read_message,
    scan_transcript,
)
from brain.progress import Progress, ignore
from brain.store.connection import Store, StoreLease

BATCH: Final = 500
"""Messages per ingest transaction."""
OnFork = Literal["refuse", "append"]


@dataclass(frozen=True, slots=True)
class BootstrapReport:
    """What a bootstrap read and did.

    ``entries`` counts transcript entries (header excluded), ``messages`` the
    message entries among them, ``path_length`` the messages on the active
    path. ``anchor`` is the client id of the newest path message that was
    already stored (None: none was). ``already_present`` counts path messages
    up to the anchor plus any after it that ingest found stored; ``skipped``
    counts path messages with a role brain does not store (see the module).
    ``forked``: stored messages of the session follow the anchor
    (``stored_off_path`` of them) and are not on the path; ``fork_point`` is
    then the anchor.
    """

    session: str
    format: Format
    entries: int
    messages: int
    path_length: int
    anchor: str | None
    imported: int
    already_present: int
    skipped: int
    forked: bool
    fork_point: str | None
    stored_off_path: int
    took_ms: float


def bootstrap(
    lease: StoreLease,
    session: str,
    path: str | Path,
    *,
    session_key: str | None = None,
    on_fork: OnFork = "refuse",
    progress: Progress | None = None,
) -> BootstrapReport:
    """Import the transcript at ``path`` into ``session`` from its anchor on.

    Raises ``InvalidInput`` naming the line for a malformed transcript: JSON
    and entry shape are checked in the first pass, before anything is
    written; a message ingest rejects (a bad role or block) fails its batch
    only, after the batches before it committed (run again once fixed: the
    anchor resumes after them). Raises ``Conflict`` on a fork unless
    ``on_fork="append"``. ``progress`` phases: ``scan`` counts bytes of the
    file, ``import`` messages.
    """
    started = time.perf_counter()
    report = progress or ignore
    handle = open_transcript(path)
    with handle:
        scan = scan_transcript(handle, report)
        path_entries = active_path(scan)
        with lease() as store:
            anchor_pos, anchor_seq, conversation = _anchor(
                store, session, session_key, scan, path_entries
            )
            stored_after = _stored_after(store, conversation, anchor_seq)
        anchor = None if anchor_pos < 0 else scan.ids[path_entries[anchor_pos]]
        remaining = len(path_entries) - anchor_pos - 1
        forked = stored_after > 0
        if forked and remaining > 0 and on_fork != "append":
            raise Conflict(
                f"session {session!r} holds {stored_after} message(s) after "
                f"{'the transcript entry ' + repr(anchor) if anchor else 'the start'} that are "
                f"not on the transcript's active path; give on_fork 'append' to add the "
                f"transcript's {remaining} message(s) after them",
                session=session,
                fork_point=anchor,
                stored_off_path=stored_after,
                to_import=remaining,
            )
        imported, duplicates, skipped = _import(
            lease, handle, scan, path_entries[anchor_pos + 1 :], session, session_key, report
        )
    return BootstrapReport(
        session=session,
        format=scan.format,
        entries=len(scan.ids),
        messages=scan.message_count,
        path_length=len(path_entries),
        anchor=anchor,
        imported=imported,
        already_present=anchor_pos + 1 + duplicates,
        skipped=skipped,
        forked=forked,
        fork_point=anchor if forked else None,
        stored_off_path=stored_after,
        took_ms=(time.perf_counter() - started) * 1000,
    )


# -- the anchor ---------------------------------------------------------------------


def _anchor(
    store: Store, session: str, session_key: str | None, scan: Scan, path: array[int]
) -> tuple[int, int, int | None]:
    """(path position of the anchor or -1, its seq or 0, conversation id or None)."""
    filed = find_session(store, session)
    if filed is None:
        return -1, 0, None
    conversation, stored_key = filed
    # Checked here as ingest would, since a run with nothing to import never ingests.
    if session_key is not None and stored_key is not None and stored_key != session_key:
        raise Conflict(
            f"session {session!r} already belongs to session key {stored_key!r}",
            session=session,
            session_key=stored_key,
        )
    # Newest first, a chunk at a time: a resumed import finds its anchor in
    # the first chunk; only a new session checks every id.
    end = len(path)
    while end > 0:
        begin = max(0, end - BATCH)
        chunk = {scan.ids[path[i]]: i for i in range(begin, end)}
        found = list(
            store.execute(
                "SELECT client_id, seq FROM messages WHERE conversation_id = ? "
                "AND client_id IN (SELECT value FROM json_each(?))",
                (conversation, orjson.dumps(list(chunk)).decode()),
            )
        )
        if found:
            client_id, seq = max(found, key=lambda r: chunk[str(r[0])])
            return chunk[str(client_id)], int(seq), conversation
        end = begin
    return -1, 0, conversation


def _stored_after(store: Store, conversation: int | None, seq: int) -> int:
    if conversation is None:
        return 0
    count = store.scalar(
        "SELECT count(*) FROM messages WHERE conversation_id = ? AND seq > ?", (conversation, seq)
    )
    return int(count)


# -- pass 2: import -------------------------------------------------------------------


def _import(
    lease: StoreLease,
    handle: IO[bytes],
    scan: Scan,
    todo: array[int],
    session: str,
    session_key: str | None,
    progress: Progress,
) -> tuple[int, int, int]:
    """(imported, duplicates, skipped) for the path messages in ``todo``."""
    imported = duplicates = skipped = 0
    total = len(todo)
    progress(0, total, "import")
    for begin in range(0, total, BATCH):
        batch: list[MessageIn] = []
        lines: list[int] = []
        for entry in todo[begin : begin + BATCH]:
            line_no = scan.line_numbers[entry]
            message = read_message(handle, scan, entry, line_no)
            if message is None:
                skipped += 1
                continue
            batch.append(message)
            lines.append(line_no)
        if batch:
            with lease() as store, _at_line(lines):
                result = ingest(store, session, batch, session_key=session_key)
            imported += result.ingested
            duplicates += result.duplicates
        progress(min(begin + BATCH, total), total, "import")
    return imported, duplicates, skipped


@contextlib.contextmanager
def _at_line(lines: list[int]) -> Iterator[None]:
    """Rename ingest's ``messages[i].x`` errors to the transcript's ``line n.x``."""
    try:
        yield
    except InvalidInput as exc:
        field = exc.field
        if field.startswith("messages["):
            i, _, rest = field[len("messages[") :].partition("]")
            if i.isdigit() and int(i) < len(lines):
                problem = exc.message[len(field) + 2 :]
                raise InvalidInput(f"line {lines[int(i)]}{rest}", problem) from None
        raise
