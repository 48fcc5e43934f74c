"""NDJSON framing: bytes in, lines out; objects in, frames out.

``LineSplitter`` turns an arbitrary chunking of a byte stream into lines with a
size limit. A line over the limit is reported once, as ``OVERSIZED``, as soon
as the limit is passed; the rest of it is skipped without being buffered, and
reading goes on with the next line. orjson is used only here and in
``protocol.wire``.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

DEFAULT_MAX_LINE: Final = 16 * 1024 * 1024


class _Oversized:
    __slots__ = ()

    def __repr__(self) -> str:
        return "OVERSIZED"


OVERSIZED: Final = _Oversized()
"""Yielded in place of a line that exceeded the limit."""

Line = bytes | _Oversized


class LineSplitter:
    """Incremental splitter of a byte stream into ``\\n``-terminated lines.

    A trailing ``\\r`` is dropped (CRLF input works); lines that are empty or
    only whitespace are skipped, so a blank line between requests is harmless.
    """

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        if max_line < 1:
            raise ValueError("max_line must be positive")
        self.max_line = max_line
        self._buf = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> list[Line]:
        """Add bytes; return the complete lines (and oversize markers) they finish."""
        out: list[Line] = []
        start = 0
        end = len(chunk)
        while start < end:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                self._absorb(chunk[start:], out)
                break
            if self._skipping:
                self._skipping = False
            else:
                self._absorb(chunk[start:nl], out)
                if not self._skipping:
                    self._emit(out)
                self._skipping = False
            self._buf.clear()
            start = nl + 1
        return out

    def finish(self) -> list[Line]:
        """At end of input: the last line, if it had no final newline."""
        out: list[Line] = []
        if not self._skipping:
            self._emit(out)
        self._buf.clear()
        self._skipping = False
        return out

    def _absorb(self, piece: bytes, out: list[Line]) -> None:
        if self._skipping:
            return
        if len(self._buf) + len(piece) > self.max_line:
            self._buf.clear()
            self._skipping = True
            out.append(OVERSIZED)
            return
        self._buf += piece

    def _emit(self, out: list[Line]) -> None:
        line = bytes(self._buf)
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            out.append(line)


def encode_frame(obj: Any) -> bytes:
    """One protocol line: compact UTF-8 JSON and a newline (orjson escapes inner newlines)."""
    return orjson.dumps(obj) + b"\n"
