"""Reading a JSONL transcript: its two formats, the first pass's scan, the active
path, and each path message read back as ``ingest`` takes it.

Two formats, told apart by the first non-empty line:

* **OpenClaw** sessions: a ``{"type": "session", ...}`` header, then entries
  ``{"type", "id", "parentId", "timestamp", ...}`` forming a tree. Only
  ``"type": "message"`` entries (``{"message": {"role", "content", ...}}``) are
  messages; other entry types are tree nodes and nothing more. The *active
  path* is the chain from the last message entry back through ``parentId`` to
  the root; entries off it (abandoned branches) are not on it.
* **Plain** transcripts: one message a line, in any shape ``ingest`` takes (an
  SDK dump: ``content`` null beside ``tool_calls``, ``refusal``, ``annotations``,
  ...), the whole file being the path. Members ``ingest`` does not know are ignored.

Each message gets a stable client id (the OpenClaw entry id; for a plain line
``line-<n>-<hash of the line>``). Only a regular file is read, and never one
under ``/proc``, ``/sys`` or ``/dev`` (``brain.store.fileguard``). The scan keeps
one small record per entry (id, parent index, byte offset, line number), so
memory stays flat in the file size; messages are read back by offset.

What to do with the path (the anchor, forks, batched ingest) is
``brain.lcm.bootstrap``'s. Tested through it, in tests/brain/lcm/test_bootstrap.py
(both formats, malformed and refused files, block mapping, memory): a transcript
is read only to be reconciled.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final, Literal

import orjson

from brain.errors import InvalidInput
from brain.lcm.content import MESSAGE_FIELDS, RESERVED_PREFIX, MessageIn
from brain.progress import Progress
from brain.store.fileguard import Refused, open_regular

SCAN_PROGRESS_LINES: Final = 5_000
"""The scan reports progress this often (in lines)."""

Format = Literal["openclaw", "plain"]

_NO_PARENT: Final = -1
_NOT_A_MESSAGE: Final = -1


@dataclass(slots=True)
class Scan:
    """The first pass's small per-entry records (arrays, not objects: memory)."""

    format: Format
    ids: list[str]
    parents: array[int]
    offsets: array[int]  # _NOT_A_MESSAGE for entries that are not messages
    line_numbers: array[int]
    last_message: int = _NO_PARENT
    message_count: int = 0


_REFUSED: Final[dict[str, str]] = {
    "system_path": "under /proc, /sys or /dev, which are never read",
    "not_regular": "not a regular file (a directory, FIFO, device or socket is never read)",
    "vanished": "no such file",
}


def open_transcript(path: str | Path) -> IO[bytes]:
    """The transcript, opened only if it is a regular file outside /proc, /sys and /dev.

    Checked before a byte is read: a FIFO would block the reading thread forever
    and ``/dev/zero`` would fill memory; ``/proc`` files claim to be regular.
    """
    try:
        return open_regular(Path(path))
    except Refused as exc:
        problem = _REFUSED.get(exc.reason, exc.detail)
        raise InvalidInput("path", f"cannot read {str(path)!r}: {problem}") from None


# -- pass 1: scan -------------------------------------------------------------------


def scan_transcript(handle: IO[bytes], progress: Progress) -> Scan:
    """The first pass: every entry's small record, with JSON and entry shape checked.

    Raises ``InvalidInput`` naming the line; ``progress`` counts bytes (phase ``scan``).
    """
    size = _size(handle)
    scan: Scan | None = None
    index: dict[str, int] = {}  # OpenClaw entry id -> entry index (keys shared with ids)
    offset = 0
    line_no = 0
    for raw in handle:
        line_no += 1
        start, offset = offset, offset + len(raw)
        if line_no % SCAN_PROGRESS_LINES == 0:
            progress(offset, size, "scan")
        if not raw.strip():
            continue
        obj = _parse(raw, line_no)
        if scan is None:
            scan = Scan(_detect(obj, line_no), [], array("q"), array("q"), array("q"))
            if scan.format == "openclaw":
                continue  # the header: session metadata, not an entry
        if scan.format == "openclaw":
            _openclaw_entry(scan, index, obj, start, line_no)
        else:
            _plain_entry(scan, obj, raw, start, line_no)
    if scan is None:
        raise InvalidInput("path", "the transcript is empty")
    progress(offset, size, "scan")
    return scan


def _size(handle: IO[bytes]) -> int | None:
    try:
        return int(os.fstat(handle.fileno()).st_size)
    except (OSError, ValueError):
        return None


def _parse(raw: bytes, line_no: int) -> dict[str, Any]:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"line {line_no}", f"not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise InvalidInput(f"line {line_no}", "must be a JSON object")
    return obj


def _detect(obj: dict[str, Any], line_no: int) -> Format:
    if obj.get("type") == "session":
        return "openclaw"
    if "role" in obj:
        return "plain"
    raise InvalidInput(
        f"line {line_no}",
        'neither an OpenClaw session header ({"type": "session"}) nor a {"role", ...} message',
    )


def _openclaw_entry(
    scan: Scan, index: dict[str, int], obj: dict[str, Any], start: int, line_no: int
) -> None:
    entry_id = obj.get("id")
    is_message = obj.get("type") == "message"
    if not isinstance(entry_id, str) or not entry_id:
        if is_message:
            raise InvalidInput(f"line {line_no}.id", "a message entry needs a string id")
        return  # an id-less entry cannot be anyone's parent: nothing to keep
    if entry_id in index:
        raise InvalidInput(f"line {line_no}.id", f"duplicate entry id {entry_id!r}")
    parent_id = obj.get("parentId")
    if parent_id is not None and not isinstance(parent_id, str):
        raise InvalidInput(f"line {line_no}.parentId", "must be a string or null")
    if is_message:
        message = obj.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise InvalidInput(f"line {line_no}.message", "must be an object with a string role")
    # A parent is resolved when its child is read: append-only files write
    # parents first, so an unknown parent id (a truncated file) starts a root.
    # Parents always index earlier entries, so the walk up can never cycle.
    parent = _NO_PARENT if parent_id is None else index.get(parent_id, _NO_PARENT)
    position = len(scan.ids)
    index[entry_id] = position
    scan.ids.append(entry_id)
    scan.parents.append(parent)
    scan.offsets.append(start if is_message else _NOT_A_MESSAGE)
    scan.line_numbers.append(line_no)
    if is_message:
        scan.last_message = position
        scan.message_count += 1


def _plain_entry(scan: Scan, obj: dict[str, Any], raw: bytes, start: int, line_no: int) -> None:
    if not isinstance(obj.get("role"), str):
        raise InvalidInput(f"line {line_no}.role", "must be a string")
    # Types only: whether content may be missing is ingest's rule (normalize),
    # applied when the line is imported.
    content = obj.get("content")
    if content is not None and not isinstance(content, str | list):
        raise InvalidInput(f"line {line_no}.content", "must be a string or an array of blocks")
    for i, block in enumerate(content if isinstance(content, list) else ()):
        if not isinstance(block, dict):
            raise InvalidInput(f"line {line_no}.content[{i}]", "must be an object")
    digest = hashlib.blake2b(raw.strip(), digest_size=6).hexdigest()
    position = len(scan.ids)
    scan.ids.append(f"line-{line_no}-{digest}")
    scan.parents.append(position - 1)
    scan.offsets.append(start)
    scan.line_numbers.append(line_no)
    scan.last_message = position
    scan.message_count += 1


def active_path(scan: Scan) -> array[int]:
    """Entry indexes of the path's messages, root first."""
    path = array("q")
    at = scan.last_message
    while at != _NO_PARENT:
        if scan.offsets[at] != _NOT_A_MESSAGE:
            path.append(at)
        at = scan.parents[at]
    path.reverse()
    return path


# -- pass 2: the path's messages read back -----------------------------------------


def read_message(handle: IO[bytes], scan: Scan, entry: int, line_no: int) -> MessageIn | None:
    """The message of ``entry`` as ``ingest`` takes it (None: a role brain does not store)."""
    handle.seek(scan.offsets[entry])
    obj = _parse(handle.readline(), line_no)
    client_id = scan.ids[entry]
    if scan.format == "plain":
        return _plain_message(obj, client_id, line_no)
    return _openclaw_message(obj, client_id, line_no)


def _plain_message(obj: dict[str, Any], client_id: str, line_no: int) -> MessageIn:
    """A plain line as ``ingest`` would take it: members brain does not read go
    in ``extra`` (null ones say nothing; ``timestamp`` is read as the time), and
    content may be null or missing where ingest allows it (checked by
    ``normalize``, naming the line)."""
    where = f"line {line_no}"
    read = (*MESSAGE_FIELDS, "timestamp")
    extra = {k: v for k, v in obj.items() if k not in read and v is not None}
    reserved = next((k for k in extra if k.startswith(RESERVED_PREFIX)), None)
    if reserved is not None:
        raise InvalidInput(f"{where}.{reserved}", f"names starting {RESERVED_PREFIX} are reserved")
    return MessageIn(
        role=obj["role"],
        content=obj.get("content"),
        client_id=client_id,
        name=_opt_str(obj, "name", where),
        created_at=_time(obj.get("created_at", obj.get("timestamp")), where),
        tool_calls=_opt_list(obj, "tool_calls", where),
        tool_call_id=_opt_str(obj, "tool_call_id", where),
        extra=extra or None,
        content_absent="content" not in obj,
    )


# OpenClaw roles brain has no place for (bash executions, custom and summary
# messages of the coding agent) are skipped and counted, not guessed into a role.
def _openclaw_message(obj: dict[str, Any], client_id: str, line_no: int) -> MessageIn | None:
    where = f"line {line_no}.message"
    message: dict[str, Any] = obj["message"]
    role = message["role"]
    created_at = _time(obj.get("timestamp", message.get("timestamp")), f"line {line_no}")
    content = message.get("content")
    if role in ("user", "assistant", "system"):
        if isinstance(content, str):
            mapped: str | list[dict[str, Any]] = content
        else:
            mapped = _blocks(content, f"{where}.content")
        return MessageIn(role, mapped, client_id=client_id, created_at=created_at)
    if role == "toolResult":
        call_id = message.get("toolCallId")
        if not isinstance(call_id, str):
            raise InvalidInput(f"{where}.toolCallId", "must be a string")
        body = content if isinstance(content, str) else _blocks(content, f"{where}.content")
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": body}
        if message.get("isError") is True:
            result["is_error"] = True
        # Anthropic's shape: a user turn carrying the result, paired by id
        # with the assistant's tool_use block.
        return MessageIn("user", [result], client_id=client_id, created_at=created_at)
    return None


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        raise InvalidInput(where, "must be a string or an array of blocks")
    out = []
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise InvalidInput(f"{where}[{i}]", "must be an object with a string type")
        out.append(_block(block))
    return out


def _block(block: dict[str, Any]) -> dict[str, Any]:
    """An OpenClaw block in Anthropic shape; blocks of other types are kept as they are."""
    match block["type"]:
        case "text":
            return {"type": "text", "text": block.get("text")}
        case "thinking" if block.get("redacted") is True:
            return {"type": "redacted_thinking", "data": block.get("thinkingSignature", "")}
        case "thinking":
            out: dict[str, Any] = {"type": "thinking", "thinking": block.get("thinking")}
            if isinstance(block.get("thinkingSignature"), str):
                out["signature"] = block["thinkingSignature"]
            return out
        case "toolCall":
            arguments = block.get("arguments")
            return {
                "type": "tool_use",
                "id": block.get("id"),
                "name": block.get("name"),
                "input": arguments if isinstance(arguments, dict) else {},
            }
        case "image" if "source" not in block:
            return {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": block.get("mimeType"),
                    "data": block.get("data"),
                },
            }
        case _:
            return block


def _time(value: Any, where: str) -> str | None:
    """An ISO-8601 string as is; epoch milliseconds (OpenClaw's message times) as ISO."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value / 1000, UTC).isoformat()
        except (OverflowError, OSError, ValueError):
            raise InvalidInput(f"{where}.timestamp", "is out of range") from None
    raise InvalidInput(f"{where}.timestamp", "must be an ISO-8601 string or epoch milliseconds")


def _opt_str(obj: dict[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"{where}.{key}", "must be a string")
    return value


def _opt_list(obj: dict[str, Any], key: str, where: str) -> list[dict[str, Any]] | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, list):
        raise InvalidInput(f"{where}.{key}", "must be an array")
    for i, item in enumerate(value or ()):
        if not isinstance(item, dict):
            raise InvalidInput(f"{where}.{key}[{i}]", "must be an object")
    return value
