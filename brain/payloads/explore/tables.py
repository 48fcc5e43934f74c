"""CSV and TSV payloads: sniffing a delimiter, and profiling each column's values.

The value profiles (a number range, value counts, examples) also describe
JSON fields. Tested through ``explore`` in tests/brain/payloads/test_explore.py
(the tables section).
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Final

from brain.payloads.explore.logs import DATE, TIMESTAMP
from brain.payloads.explore.summary import (
    LINE_CHARS,
    MAX_ITEMS,
    RECORD_SAMPLE,
    Kind,
    Summary,
    clip,
    join_limited,
    key_text,
    oneline,
    plural,
    quote,
)

_NUMBER: Final = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_INTEGER: Final = re.compile(r"[+-]?\d+", re.ASCII)
_NOT_A_HEADER: Final = re.compile(r"[(){}\[\];=<>]")
_DELIMITER_NAMES: Final = {"\t": "tab", ",": "comma", ";": "semicolon"}


@dataclass(frozen=True, slots=True)
class _Table:
    delimiter: str
    header: list[str] | None
    rows: list[list[str]]


def find_table(sample: list[str], *, header: bool) -> _Table | None:
    """``sample`` as a table, with the first delimiter (``_DELIMITER_NAMES``) that fits, if any."""
    for delimiter in _DELIMITER_NAMES:
        if (table := sniff_table(sample, delimiter, header=header)) is not None:
            return table
    return None


def sniff_table(
    sample: list[str], delimiter: str, *, header: bool, hinted: bool = False
) -> _Table | None:
    """The sample as a table, if the delimiter splits nearly every line to one width.

    With ``header`` the first row must read as column names (short, no numbers,
    timestamps or code punctuation); without it a first row of data is allowed.
    Unless ``hinted``, it takes three rows, and two columns need a number in
    them, so prose with one comma a line does not read as CSV.
    """
    lines = [line for line in sample if line.strip()][: RECORD_SAMPLE + 1]
    if len(lines) < (2 if hinted else 3):
        return None
    try:
        rows = list(csv.reader(lines, delimiter=delimiter))
    except csv.Error:  # a field over the csv module's size limit
        return None
    width = len(rows[0]) if rows else 0
    named = [cell.strip() for cell in rows[0] if cell.strip()] if rows else []
    if width < 2 or len(named) < 2 or any(len(cell) > 64 for cell in named):
        return None
    if sum(len(row) == width for row in rows) * 10 < len(rows) * 9:
        return None
    if width == 2 and not hinted and not any(_NUMBER.fullmatch(c.strip()) for r in rows for c in r):
        return None
    data_like = any(_NUMBER.fullmatch(c) or DATE.search(c) or TIMESTAMP.search(c) for c in named)
    if not data_like and not any(_NOT_A_HEADER.search(c) for c in named):
        return _Table(delimiter, rows[0], rows[1:])
    return None if header else _Table(delimiter, None, rows)


def table_summary(table: _Table, data: bytes, lines: int, size: str) -> Summary:
    """The summary of a CSV or TSV table: its shape and a profile of each column."""
    kind: Kind = "tsv" if table.delimiter == "\t" else "csv"
    blank = data.count(b"\n\n") + data.count(b"\n\r\n")
    total = lines - blank - (1 if table.header is not None else 0)
    width = len(table.header or table.rows[0])
    columns = table.header or [f"column {i + 1}" for i in range(width)]
    sampled = "" if total <= len(table.rows) else f"; values from the first {len(table.rows):,}"
    delimiter = _DELIMITER_NAMES[table.delimiter]
    shape = f"{plural(width, 'column')}, {plural(total, 'row')}"
    out = [f"{kind.upper()} ({delimiter}-delimited), {shape} ({size}){sampled}"]
    if table.header is None:
        out.append("no header row")
    else:
        out.append("columns: " + join_limited([key_text(c) for c in columns], LINE_CHARS - 10))
    for i, column in enumerate(columns[:MAX_ITEMS]):
        values = [row[i] for row in table.rows if i < len(row)]
        out.append(f"{key_text(column)}: {_column_detail(values)}")
    return Summary(kind, out, more=max(width - MAX_ITEMS, 0))


def _column_detail(values: list[str]) -> str:
    filled = [v.strip() for v in values if v.strip()]
    empty = f" ({len(values) - len(filled):,} empty)" if len(filled) < len(values) else ""
    if not filled:
        return "empty"
    if all(_NUMBER.fullmatch(v) for v in filled):
        numbers = [float(v) for v in filled]
        if all(map(math.isfinite, numbers)):
            ints = all(_INTEGER.fullmatch(v) for v in filled)
            return f"{'int' if ints else 'float'} {number_range(numbers, ints=ints)}{empty}"
    return f"text {strings_detail(filled)}{empty}"


def number_range(numbers: list[float], *, ints: bool = True) -> str:
    """The range of the finite ``numbers``, as text ("" when there are none)."""
    finite = [n for n in numbers if math.isfinite(n)]
    if not finite:
        return ""
    low, high = min(finite), max(finite)
    if ints and max(abs(low), abs(high)) < 2**53:
        shown = (f"{int(low)}", f"{int(high)}")
    else:
        shown = (f"{low:.6g}", f"{high:.6g}")
    return shown[0] if low == high else f"{shown[0]}..{shown[1]}"


def strings_detail(values: list[str]) -> str:
    """Value counts when few are distinct, first → last for timestamps, else examples."""
    if not values:
        return ""
    distinct = Counter(values)
    if len(distinct) <= 5 and len(values) >= 2 * len(distinct):
        return value_counts(Counter({quote(k, 20): n for k, n in distinct.items()}))
    if all(DATE.match(v) or TIMESTAMP.match(v) for v in values):
        return f"{clip(oneline(values[0]), 32)} → {clip(oneline(values[-1]), 32)}"
    lengths = [float(len(v)) for v in values]
    length = f"len {number_range(lengths)} " if max(lengths) > 24 else ""
    examples = [quote(v, 24) for v in itertools.islice(distinct, 20)]
    return length + "e.g. " + join_limited(examples, 70, len(distinct))


def value_counts(counter: Counter[str]) -> str:
    """Values with their counts, most common first: ``"info" 30, "warn" 15``."""
    return join_limited([f"{value} {n:,}" for value, n in counter.most_common()], 70)
