"""The summary being built, and the text helpers that keep it within its budget.

Every kind's analysis returns a ``Summary`` (its lines, and how many items it
left out); ``fit_lines`` joins the lines within ``max_tokens``, and the clipping,
counting and joining helpers give every line its bounded width. Tested
through ``explore`` in tests/brain/payloads/test_explore.py (the budget
section and its properties): these helpers only mean something as the
summary they shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from brain.tokens import token_quarters

Kind = Literal["json", "jsonl", "csv", "tsv", "code", "markdown", "log", "text", "binary"]

HEAD_BYTES: Final = 256 * 1024  # the sample that shapes, names and outlines come from
SAMPLE_LINES: Final = 4000
SCAN_LINE_CHARS: Final = 400  # regexes never see longer lines
SCAN_BYTES: Final = 8 * 1024 * 1024  # log level counts
JSON_PARSE_LIMIT: Final = 8 * 1024 * 1024
RECORD_SAMPLE: Final = 500  # array items, JSONL records and CSV rows profiled
MAX_ITEMS: Final = 200  # keys, columns or headings rendered as lines; the rest are counted
LINE_CHARS: Final = 120


@dataclass(slots=True)
class Summary:
    """What a kind's analysis found: the kind, its lines and how many items it left out."""

    kind: Kind
    lines: list[str]
    language: str | None = None
    more: int = 0
    """Items not rendered as lines, counted in the "… and N more" trailer."""


def count_lines(data: bytes) -> int:
    """Lines in ``data``: its newlines, plus one if the last line has none."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def fit_lines(lines: list[str], max_tokens: int, more: int = 0) -> str:
    """Lines joined within the budget, ending "… and N more" when any are left out.

    ``estimate_tokens`` is a quarter of a text's ``_units`` rounded up, so a
    text is within ``max_tokens`` exactly when its units are at most 4x that.
    """
    budget = max(max_tokens, 0) * 4
    kept: list[str] = []
    used = -1  # the first line has no newline before it
    for line in lines:
        if used + _units(line) + 1 > budget:
            break
        kept.append(line)
        used += _units(line) + 1
    hidden = len(lines) - len(kept) + more
    while hidden and kept:
        trailer = f"… and {hidden:,} more"
        if used + _units(trailer) + 1 <= budget:
            kept.append(trailer)
            break
        used -= _units(kept.pop()) + 1
        hidden += 1
    if not kept:  # not even the first line fits whole
        return _clip_bytes(lines[0], budget) if lines else ""
    return "\n".join(kept)


def _units(text: str) -> int:
    """UTF-8 bytes, but four for a CJK character (a token each): see ``token_quarters``."""
    return token_quarters(text)


def _clip_bytes(text: str, limit: int) -> str:
    if _units(text) <= limit:
        return text
    ellipsis = "…" if limit >= 3 else ""  # three bytes in UTF-8
    cut = text.encode("utf-8", "surrogatepass")[: limit - len(ellipsis) * 3]
    kept = cut.decode("utf-8", "ignore")
    while kept and _units(kept) > limit - len(ellipsis) * 3:  # CJK: 4 units in 3 bytes
        kept = kept[:-1]
    return kept + ellipsis


def clip(text: str, chars: int = LINE_CHARS) -> str:
    """``text`` cut to ``chars`` characters, ending in "…" when cut."""
    return text if len(text) <= chars else text[: chars - 1] + "…"


def oneline(text: str) -> str:
    """``text`` with control characters and line breaks as spaces."""
    return _CONTROL.sub(" ", text)


def quote(text: str, chars: int) -> str:
    """``text`` on one line, clipped and in double quotes."""
    return '"' + clip(oneline(text), chars) + '"'


def join_limited(items: list[str], width: int, total: int | None = None) -> str:
    """Items joined by ", " in about ``width`` characters, then "… and N more".

    ``total`` counts items beyond the list given (a caller that only rendered
    the first few of many).
    """
    total = len(items) if total is None else total
    out: list[str] = []
    length = -2
    for i, item in enumerate(items):
        rest = total - i - 1
        reserve = len(f", … and {rest:,} more") if rest else 0
        if out and length + 2 + len(item) + reserve > width:
            break
        out.append(item)
        length += 2 + len(item)
    if len(out) == total:
        return ", ".join(out)
    return ", ".join([*out, f"… and {total - len(out):,} more"])


def plural(count: int, noun: str) -> str:
    """``count`` (with thousands separators) and ``noun``, plural unless one."""
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def human_size(n: int) -> str:
    """A byte count in B, KiB or MiB."""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def key_text(key: object) -> str:
    """A key or column name as a line shows it: one line, at most 32 characters."""
    return clip(oneline(str(key)), 32)
