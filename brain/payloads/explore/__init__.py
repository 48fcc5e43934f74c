"""Exploration summaries: what is in a payload, in about 200 tokens, before reading it.

``explore`` looks at a payload's bytes and writes a short structural overview
for an agent: the shape of JSON, the columns of a CSV, the functions of a
source file, the outline of a Markdown document, the levels and time range of
a log. Detection is from content, in a fixed order: binary, JSON, JSONL, the
hint's kind, CSV with a header, log, code or Markdown, CSV without a header,
text. A hint (a filename or tool name) only breaks ties and relaxes thresholds.

Work is bounded whatever the size. Shapes and names come from a head sample
(the first 256 KiB, whole lines), level counts from the first 8 MiB, JSON is
parsed in full up to 8 MiB, and only line, word and byte counts run over the
whole input (``bytes.count``, ``bytes.translate``). Regexes see lines clipped
to a few hundred characters, so no single line can make them slow. Nothing
here raises on any input, and the same bytes always give the same summary.

This module is the entry point and the detection order; each kind's analysis
is a module of this package (``binary``, ``structured`` for JSON and JSONL,
``tables``, ``logs``, ``source`` with its pattern table in ``languages``,
``document`` for Markdown and text) and ``summary`` holds the budget helpers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from brain.payloads.explore.binary import binary_lines, is_binary
from brain.payloads.explore.document import markdown_summary, scan_document, text_lines
from brain.payloads.explore.languages import EXTENSIONS
from brain.payloads.explore.logs import log_lines, log_share
from brain.payloads.explore.source import code_lines
from brain.payloads.explore.structured import json_or_jsonl
from brain.payloads.explore.summary import (
    HEAD_BYTES,
    SAMPLE_LINES,
    Kind,
    Summary,
    count_lines,
    fit_lines,
    human_size,
    plural,
)
from brain.payloads.explore.tables import find_table, sniff_table, table_summary

__all__ = ["Exploration", "Kind", "count_lines", "explore", "is_binary", "line_range"]


@dataclass(frozen=True, slots=True)
class Exploration:
    """A structural overview of a payload: its kind, a summary and its size."""

    kind: Kind
    summary: str
    """Multi-line overview, at most ``max_tokens`` by ``brain.tokens.estimate_tokens``."""
    lines: int
    """Lines as ``count_lines`` counts them."""
    bytes: int
    language: str | None = None
    """For code: python, javascript, typescript, go, rust, java, c, cpp, shell or sql."""


def explore(
    data: bytes,
    *,
    encoding: Literal["utf8", "json"] = "utf8",
    hint: str | None = None,
    max_tokens: int = 200,
) -> Exploration:
    """Summarize ``data`` within ``max_tokens``; never raises, same input same output.

    ``encoding`` is the payload file's encoding: a ``"json"`` payload is JSON
    by contract, so any JSON value is accepted, not only objects and arrays.
    ``hint`` is a filename or tool name; its extension breaks ties.
    """
    lines = count_lines(data)
    found = _analyse(data, encoding, _Hint.parse(hint), lines)
    summary = fit_lines(found.lines, max_tokens, found.more)
    return Exploration(found.kind, summary, lines, len(data), found.language)


def line_range(data: bytes, start: int, end: int) -> str:
    """Lines ``start`` to ``end`` (1-based, inclusive), with their line endings.

    Bounds are clamped to the payload; an empty range gives "". Lines split on
    ``\\n`` as ``count_lines`` counts them, and bytes decode as UTF-8 with
    replacement, so adjacent ranges concatenate to the whole decoded payload.
    """
    start = max(start, 1)
    if end < start:
        return ""
    begin = _skip_lines(data, 0, start - 1)
    stop = _skip_lines(data, begin, end - start + 1)
    return data[begin:stop].decode("utf-8", "replace")


# -- dispatch ----------------------------------------------------------------------

_HINT_KINDS: Final[dict[str, Kind]] = {
    "json": "json",
    "jsonl": "jsonl",
    "ndjson": "jsonl",
    "csv": "csv",
    "tsv": "tsv",
    "md": "markdown",
    "markdown": "markdown",
    "log": "log",
}


@dataclass(frozen=True, slots=True)
class _Hint:
    kind: Kind | None = None
    language: str | None = None

    @classmethod
    def parse(cls, hint: str | None) -> _Hint:
        name = (hint or "").replace("\\", "/").rsplit("/", 1)[-1].lower()
        ext = name.rsplit(".", 1)[1] if "." in name else ""  # a bare tool name is no extension
        if ext in EXTENSIONS:
            return cls("code", EXTENSIONS[ext])
        return cls(_HINT_KINDS.get(ext))


def _analyse(data: bytes, encoding: str, hint: _Hint, lines: int) -> Summary:
    size = f"{plural(lines, 'line')}, {human_size(len(data))}"
    if not data.strip():
        return Summary("text", [f"Empty text ({size})" if data else "Empty (0 bytes)"])
    if is_binary(data):
        return Summary("binary", binary_lines(data))
    text, truncated = _head(data)
    sample = [line.rstrip("\r") for line in text.split("\n", SAMPLE_LINES)[:SAMPLE_LINES]]
    if (found := json_or_jsonl(data, encoding, hint.kind, sample, size)) is not None:
        return found
    if hint.kind in ("csv", "tsv"):
        delimiter = "\t" if hint.kind == "tsv" else ","
        if (table := sniff_table(sample, delimiter, header=False, hinted=True)) is not None:
            return table_summary(table, data, lines, size)
    if hint.kind == "log" and log_share(sample) > 0.2:
        return Summary("log", log_lines(data, sample, size))
    if (table := find_table(sample, header=True)) is not None:
        return table_summary(table, data, lines, size)
    if hint.kind != "markdown" and log_share(sample) >= 0.5:
        return Summary("log", log_lines(data, sample, size))
    doc = scan_document(sample)
    language, score = doc.best_language(hint.language)
    code_ok = score >= 2 and score * 20 >= doc.nonempty
    if hint.kind == "markdown" or (doc.fences and doc.markdown_score >= 3):
        return markdown_summary(doc, size, truncated)
    if hint.language is not None or (code_ok and score >= doc.markdown_score):
        return Summary("code", code_lines(language, sample, size, truncated), language)
    if doc.markdown_score >= 2 or doc.headings:
        return markdown_summary(doc, size, truncated)
    if (table := find_table(sample, header=False)) is not None:
        return table_summary(table, data, lines, size)
    return Summary("text", text_lines(data, sample, size))


def _head(data: bytes) -> tuple[str, bool]:
    """The decoded sample: the first ``HEAD_BYTES``, cut back to a whole line."""
    head = data[:HEAD_BYTES]
    truncated = len(data) > HEAD_BYTES
    if truncated and (cut := head.rfind(b"\n")) > 0:
        head = head[:cut]
    return head.decode("utf-8", "replace").removeprefix("\ufeff"), truncated


def _skip_lines(data: bytes, pos: int, count: int) -> int:
    """The offset just past ``count`` more lines from ``pos``, or the end."""
    for _ in range(count):
        found = data.find(b"\n", pos)
        if found < 0:
            return len(data)
        pos = found + 1
    return pos
