"""Markdown cut into heading-aware chunks with their heading path and 1-based line range.

Cut at ATX headings (not inside code fences), a long section further at blank lines; the
chunks of a file, joined, are its text exactly. Tested in tests/brain/graph/sync/test_chunks.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["CHUNK_CHARS", "Chunk", "chunk_markdown", "split_lines"]

CHUNK_CHARS: Final = 1_500
"""A section longer than this is cut at blank lines (a single longer line stays whole)."""

_HEADING: Final = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_FENCE: Final = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a markdown file: its heading path, text and 1-based line range."""

    heading: str
    text: str
    line_start: int
    line_end: int


def split_lines(text: str) -> list[str]:
    r"""``text`` as lines with their ``\n`` kept (the last one may lack it).

    Only ``\n`` ends a line, as in editors and ``wc -l``; ``str.splitlines`` would
    also split at form feeds and Unicode separators and number lines differently.
    """
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def chunk_markdown(text: str, max_chars: int = CHUNK_CHARS) -> list[Chunk]:
    """Chunks of a markdown text, in order; joined, their texts are ``text``.

    A text with nothing but whitespace has no chunks. Blank lines that would be a
    chunk of their own (before the first heading) join the chunk after them.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    lines = split_lines(text)
    fenced = _fenced(lines)
    pieces: list[tuple[str, int, int]] = []
    for heading, start, end in _sections(lines, fenced):
        pieces.extend((heading, s, e) for s, e in _cut(lines, fenced, start, end, max_chars))
    merged: list[tuple[str, int, int]] = []
    carry: int | None = None  # start of blank lines waiting for the next chunk
    for heading, start, end in pieces:
        if not "".join(lines[start:end]).strip():
            if merged:
                last = merged[-1]
                merged[-1] = (last[0], last[1], end)
            elif carry is None:
                carry = start
            continue
        merged.append((heading, start if carry is None else carry, end))
        carry = None
    return [Chunk(h, "".join(lines[s:e]), s + 1, e) for h, s, e in merged]


def _fenced(lines: Sequence[str]) -> list[bool]:
    """Per line, whether it is inside a fenced code block (fence lines included)."""
    out: list[bool] = []
    fence: str | None = None
    for line in lines:
        match = _FENCE.fullmatch(line.rstrip("\r\n"))
        if fence is None:
            if match is not None and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                fence = match.group(1)
                out.append(True)
            else:
                out.append(False)
        else:
            out.append(True)
            if (
                match is not None
                and not match.group(2).strip()
                and match.group(1)[0] == fence[0]
                and len(match.group(1)) >= len(fence)
            ):
                fence = None
    return out


def _sections(lines: Sequence[str], fenced: Sequence[bool]) -> list[tuple[str, int, int]]:
    """(heading path, first line index, end index) of each section, preamble included."""
    sections: list[tuple[str, int, int]] = []
    stack: list[tuple[int, str]] = []
    path, start = "", 0
    for i, line in enumerate(lines):
        if fenced[i]:
            continue
        match = _HEADING.fullmatch(line.rstrip("\r\n"))
        if match is None:
            continue
        if i > start:
            sections.append((path, start, i))
        level = len(match.group(1))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, (match.group(2) or "").strip()))
        path = " > ".join(title for _, title in stack if title)
        start = i
    if start < len(lines):
        sections.append((path, start, len(lines)))
    return sections


def _cut(
    lines: Sequence[str], fenced: Sequence[bool], start: int, end: int, max_chars: int
) -> list[tuple[int, int]]:
    """Line ranges covering [start, end) of at most ``max_chars`` where it can be helped.

    Blocks end after a run of blank lines outside code fences; blocks are packed
    greedily, and a block longer than the cap is cut between lines.
    """
    if sum(len(line) for line in lines[start:end]) <= max_chars:
        return [(start, end)]
    blocks: list[tuple[int, int]] = []
    block_start = start
    for i in range(start, end):
        blank = not lines[i].strip() and not fenced[i]
        next_blank = i + 1 < end and not lines[i + 1].strip() and not fenced[i + 1]
        if blank and not next_blank:
            blocks.append((block_start, i + 1))
            block_start = i + 1
    if block_start < end:
        blocks.append((block_start, end))
    units: list[tuple[int, int]] = []
    for s, e in blocks:
        if sum(len(line) for line in lines[s:e]) <= max_chars:
            units.append((s, e))
        else:
            units.extend((i, i + 1) for i in range(s, e))
    ranges: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    size = 0
    for s, e in units:
        cost = sum(len(line) for line in lines[s:e])
        if current is not None and size + cost <= max_chars:
            current, size = (current[0], e), size + cost
            continue
        if current is not None:
            ranges.append(current)
        current, size = (s, e), cost
    if current is not None:
        ranges.append(current)
    return ranges
