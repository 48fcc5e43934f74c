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
"""

from __future__ import annotations

import codecs
import csv
import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import orjson

from brain.tokens import token_quarters

Kind = Literal["json", "jsonl", "csv", "tsv", "code", "markdown", "log", "text", "binary"]


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
    summary = _fit(found.lines, max_tokens, found.more)
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


def count_lines(data: bytes) -> int:
    """Lines in ``data``: its newlines, plus one if the last line has none."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


# -- limits and dispatch ----------------------------------------------------------

_HEAD_BYTES: Final = 256 * 1024  # the sample that shapes, names and outlines come from
_SAMPLE_LINES: Final = 4000
_SCAN_LINE_CHARS: Final = 400  # regexes never see longer lines
_SCAN_BYTES: Final = 8 * 1024 * 1024  # log level counts
_JSON_PARSE_LIMIT: Final = 8 * 1024 * 1024
_RECORD_SAMPLE: Final = 500  # array items, JSONL records and CSV rows profiled
_MAX_ITEMS: Final = 200  # keys, columns or headings rendered as lines; the rest are counted
_LINE_CHARS: Final = 120


@dataclass(slots=True)
class _Summary:
    kind: Kind
    lines: list[str]
    language: str | None = None
    more: int = 0
    """Items not rendered as lines, counted in the "… and N more" trailer."""


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
_HINT_LANGUAGES: Final = {
    **dict.fromkeys(["py", "pyi"], "python"),
    **dict.fromkeys(["js", "mjs", "cjs", "jsx"], "javascript"),
    **dict.fromkeys(["ts", "tsx", "mts", "cts"], "typescript"),
    **dict.fromkeys(["c", "h"], "c"),
    **dict.fromkeys(["cc", "cpp", "cxx", "hpp", "hh"], "cpp"),
    **dict.fromkeys(["sh", "bash", "zsh"], "shell"),
    "go": "go",
    "rs": "rust",
    "java": "java",
    "sql": "sql",
}


@dataclass(frozen=True, slots=True)
class _Hint:
    kind: Kind | None = None
    language: str | None = None

    @classmethod
    def parse(cls, hint: str | None) -> _Hint:
        name = (hint or "").replace("\\", "/").rsplit("/", 1)[-1].lower()
        ext = name.rsplit(".", 1)[1] if "." in name else ""  # a bare tool name is no extension
        if ext in _HINT_LANGUAGES:
            return cls("code", _HINT_LANGUAGES[ext])
        return cls(_HINT_KINDS.get(ext))


def _analyse(data: bytes, encoding: str, hint: _Hint, lines: int) -> _Summary:
    size = f"{_n(lines, 'line')}, {_size(len(data))}"
    if not data.strip():
        return _Summary("text", [f"Empty text ({size})" if data else "Empty (0 bytes)"])
    if _is_binary(data):
        return _Summary("binary", _binary_lines(data))
    text, truncated = _head(data)
    sample = [line.rstrip("\r") for line in text.split("\n", _SAMPLE_LINES)[:_SAMPLE_LINES]]
    if (found := _json_or_jsonl(data, encoding, hint, sample, size)) is not None:
        return found
    if hint.kind in ("csv", "tsv"):
        delimiter = "\t" if hint.kind == "tsv" else ","
        if (table := _sniff_table(sample, delimiter, header=False, hinted=True)) is not None:
            return _table_summary(table, data, lines, size)
    if hint.kind == "log" and _log_share(sample) > 0.2:
        return _Summary("log", _log_lines(data, sample, size))
    if (table := _find_table(sample, header=True)) is not None:
        return _table_summary(table, data, lines, size)
    if hint.kind != "markdown" and _log_share(sample) >= 0.5:
        return _Summary("log", _log_lines(data, sample, size))
    doc = _scan_document(sample)
    language, score = doc.best_language(hint.language)
    code_ok = score >= 2 and score * 20 >= doc.nonempty
    if hint.kind == "markdown" or (doc.fences and doc.markdown_score >= 3):
        return _markdown_summary(doc, size, truncated)
    if hint.language is not None or (code_ok and score >= doc.markdown_score):
        return _Summary("code", _code_lines(language, sample, size, truncated), language)
    if doc.markdown_score >= 2 or doc.headings:
        return _markdown_summary(doc, size, truncated)
    if (table := _find_table(sample, header=False)) is not None:
        return _table_summary(table, data, lines, size)
    return _Summary("text", _text_lines(data, sample, size))


def _head(data: bytes) -> tuple[str, bool]:
    """The decoded sample: the first ``_HEAD_BYTES``, cut back to a whole line."""
    head = data[:_HEAD_BYTES]
    truncated = len(data) > _HEAD_BYTES
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


# -- binary -----------------------------------------------------------------------

_BINARY_SAMPLE: Final = 8192
_CONTROL_BYTES: Final = bytes(b for b in range(32) if b not in b"\t\n\r\x0b\x0c\x1b") + b"\x7f"
_ESCAPED: Final = re.compile("[\udc80-\udcff]")  # undecodable bytes under surrogateescape
_MAGIC: Final = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF8", "GIF image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive"),
    (b"\x1f\x8b", "gzip data"),
    (b"BZh", "bzip2 data"),
    (b"\xfd7zXZ\x00", "xz data"),
    (b"\x28\xb5\x2f\xfd", "zstd data"),
    (b"\x7fELF", "ELF executable"),
    (b"\x00asm", "WebAssembly module"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"OggS", "Ogg media"),
    (b"MZ", "Windows executable"),
)


def is_binary(data: bytes) -> bool:
    """True when ``data`` is not text: what ``explore`` reports as binary."""
    return _is_binary(data)


def _is_binary(data: bytes) -> bool:
    """A NUL byte, or over a tenth invalid UTF-8 or control bytes, in the first 8 KiB."""
    sample = data[:_BINARY_SAMPLE]
    if b"\x00" in sample:
        return True
    if len(data) > _BINARY_SAMPLE:
        # Drop a character the sample edge cut in two: back over continuation bytes to its lead.
        lead = len(sample) - 1
        while lead > len(sample) - 4 and sample[lead] & 0xC0 == 0x80:
            lead -= 1
        if sample[lead] >= 0xC0:
            sample = sample[:lead]
    invalid = len(_ESCAPED.findall(sample.decode("utf-8", "surrogateescape")))
    control = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    return (invalid + control) * 10 > len(sample)


def _binary_lines(data: bytes) -> list[str]:
    what = next((name for magic, name in _MAGIC if data.startswith(magic)), "Binary data")
    head = data[:32]
    ascii_view = "".join(chr(b) if 32 <= b < 127 else "." for b in head)
    return [f"{what}, {_size(len(data))}", f"hex: {head.hex(' ')}", f"ascii: {ascii_view}"]


# -- JSON and JSONL ---------------------------------------------------------------

_JSON_TYPES: Final[dict[type, str]] = {
    type(None): "null",
    bool: "bool",
    int: "int",
    float: "float",
    str: "string",
    dict: "object",
    list: "array",
}


def _json_or_jsonl(
    data: bytes, encoding: str, hint: _Hint, sample: list[str], size: str
) -> _Summary | None:
    body = data.removeprefix(codecs.BOM_UTF8).strip()
    bracketed = body[:1] in (b"{", b"[")
    if not (bracketed or encoding == "json" or hint.kind == "json"):
        return None
    if hint.kind == "jsonl" and (records := _jsonl_records(sample, loose=True)) is not None:
        return _jsonl_summary(records, data, size)
    if len(body) <= _JSON_PARSE_LIMIT:
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
        else:
            return _json_summary(value, size)
    if (records := _jsonl_records(sample, loose=False)) is not None:
        return _jsonl_summary(records, data, size)
    if bracketed and len(body) > _JSON_PARSE_LIMIT:
        if body[:1] == b"[" and (items := _array_prefix(body)) is not None:
            header = f"JSON array, too large to parse ({size}); {len(items):,}+ items"
            lines, more = _items_shape(items, "items", len(items) + 1)
            return _Summary("json", [header, *lines], more=more)
        top = "object" if body[:1] == b"{" else "array"
        starts = [_clip(line) for line in sample[:5] if line.strip()]
        return _Summary("json", [f"JSON {top}, too large to parse ({size}); starts:", *starts])
    return None


def _array_prefix(body: bytes) -> list[object] | None:
    """The first items of a JSON array too large to parse, from its first 256 KiB.

    The prefix is cut at a comma and closed with "]"; only a comma between
    top-level items parses (any other leaves a string or container open), so
    trying the last few commas finds the items without a tokenizer.
    """
    prefix = body[:_HEAD_BYTES]
    end = len(prefix)
    for _ in range(32):
        end = prefix.rfind(b",", 0, end)
        if end <= 0:
            break
        try:
            items = orjson.loads(prefix[:end] + b"]")
        except orjson.JSONDecodeError:
            continue
        return items if isinstance(items, list) else None
    return None


def _jsonl_records(sample: list[str], *, loose: bool) -> list[object] | None:
    """Records parsed from the sample's lines, if nearly all of them parse."""
    lines = [line for line in sample if line.strip()][:_RECORD_SAMPLE]
    if not lines or not lines[0].lstrip().startswith(("{", "[")):
        return None
    records: list[object] = []
    for line in lines:
        try:
            records.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
    enough = len(records) >= (1 if loose else 2)
    return records if enough and len(records) * 10 >= len(lines) * 9 else None


def _jsonl_summary(records: list[object], data: bytes, size: str) -> _Summary:
    blank = data.count(b"\n\n") + data.count(b"\n\r\n") + data.startswith((b"\n", b"\r\n"))
    total = count_lines(data) - blank
    lines, more = _items_shape(records, "records", total)
    return _Summary("jsonl", [f"JSONL, {_n(total, 'record')} ({size})", *lines], more=more)


def _json_summary(value: object, size: str) -> _Summary:
    if isinstance(value, dict):
        lines = [f"JSON object, {_n(len(value), 'key')} ({size})"]
        for key, item in itertools.islice(value.items(), _MAX_ITEMS):
            lines.append(f"{_key(key)}: {_describe(item, 1)}")
        return _Summary("json", lines, more=max(len(value) - _MAX_ITEMS, 0))
    if isinstance(value, list):
        shape, more = _items_shape(value, "items", len(value))
        return _Summary(
            "json", [f"JSON array, {_n(len(value), 'item')} ({size})", *shape], more=more
        )
    return _Summary("json", [f"JSON {_type_name(value)} ({size})", _describe(value, 0)])


def _items_shape(items: list[object], noun: str, total: int) -> tuple[list[str], int]:
    """Lines describing array items or records (one per key for objects), and keys left out.

    ``total`` is how many there are in all; when it is more than are profiled
    here, the first line says so.
    """
    sample = items[:_RECORD_SAMPLE]
    scope = f" (first {len(sample):,} profiled)" if total > len(sample) else ""
    if not sample:
        return [], 0
    if any(not isinstance(item, dict) for item in sample):
        return [f"{noun}{scope}: {_field_detail(sample)}"], 0
    fields: dict[str, list[object]] = {}
    for record in sample:
        if isinstance(record, dict):
            for key, val in record.items():
                fields.setdefault(key, []).append(val)
    lines = [f"{noun}: objects with {_n(len(fields), 'distinct key')}{scope}"]
    for key, values in itertools.islice(fields.items(), _MAX_ITEMS):
        seen = "" if len(values) == len(sample) else f" (in {len(values)}/{len(sample)})"
        lines.append(f"{_key(key)}: {_field_detail(values)}{seen}")
    return lines, max(len(fields) - _MAX_ITEMS, 0)


def _describe(value: object, depth: int) -> str:
    """One value: scalars shown, containers by size with one more level of shape."""
    if isinstance(value, str):
        if len(value) <= 60:
            return _quote(value, 60)
        return f"string ({_n(len(value), 'char')}) {_quote(value, 40)}"
    if isinstance(value, dict):
        text = f"object ({_n(len(value), 'key')})"
        if depth < 2 and value:
            inner = [f"{_key(k)}: {_brief(v)}" for k, v in itertools.islice(value.items(), 30)]
            text += " {" + _join_limited(inner, 80, len(value)) + "}"
        return text
    if isinstance(value, list):
        text = f"array ({len(value):,})"
        return text + f" of {_field_detail(value[:_RECORD_SAMPLE])}" if value else text
    return _scalar(value)


def _brief(value: object) -> str:
    if isinstance(value, dict | list):
        return f"{_type_name(value)}({len(value)})"
    return _type_name(value)


def _field_detail(values: Sequence[object]) -> str:
    """Many values of one field: their types, then a range, counts, keys or examples."""
    names = "|".join(name for name, _ in Counter(map(_type_name, values)).most_common())
    present = [v for v in values if v is not None]
    kinds = {_type_name(v) for v in present}
    detail = ""
    if present and kinds <= {"int", "float"}:
        numbers = [float(v) for v in present if isinstance(v, int | float)]
        detail = _number_range(numbers, ints=kinds == {"int"})
    elif kinds == {"string"}:
        detail = _strings_detail([v for v in present if isinstance(v, str)])
    elif kinds == {"bool"}:
        detail = _counts(Counter("true" if v else "false" for v in present))
    elif kinds == {"object"}:
        keys: dict[str, None] = {}
        for v in present:
            if isinstance(v, dict) and len(keys) <= 30:
                keys.update(dict.fromkeys(itertools.islice(v, 30)))
        detail = "{" + _join_limited([_key(k) for k in keys], 60) + "}"
    elif kinds == {"array"}:
        detail = "len " + _number_range([float(len(v)) for v in present if isinstance(v, list)])
    return f"{names} {detail}".rstrip()


def _type_name(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _scalar(value: object) -> str:
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, float):
        return f"{value:.6g}"
    return _clip(str(value), 40)


def _key(key: object) -> str:
    return _clip(_oneline(str(key)), 32)


# -- tables (CSV, TSV) ------------------------------------------------------------

_NUMBER: Final = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_INTEGER: Final = re.compile(r"[+-]?\d+", re.ASCII)
_NOT_A_HEADER: Final = re.compile(r"[(){}\[\];=<>]")
_DELIMITER_NAMES: Final = {"\t": "tab", ",": "comma", ";": "semicolon"}


@dataclass(frozen=True, slots=True)
class _Table:
    delimiter: str
    header: list[str] | None
    rows: list[list[str]]


def _find_table(sample: list[str], *, header: bool) -> _Table | None:
    for delimiter in _DELIMITER_NAMES:
        if (table := _sniff_table(sample, delimiter, header=header)) is not None:
            return table
    return None


def _sniff_table(
    sample: list[str], delimiter: str, *, header: bool, hinted: bool = False
) -> _Table | None:
    """The sample as a table, if the delimiter splits nearly every line to one width.

    With ``header`` the first row must read as column names (short, no numbers,
    timestamps or code punctuation); without it a first row of data is allowed.
    Unless ``hinted``, it takes three rows, and two columns need a number in
    them, so prose with one comma a line does not read as CSV.
    """
    lines = [line for line in sample if line.strip()][: _RECORD_SAMPLE + 1]
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
    data_like = any(_NUMBER.fullmatch(c) or _DATE.search(c) or _TIMESTAMP.search(c) for c in named)
    if not data_like and not any(_NOT_A_HEADER.search(c) for c in named):
        return _Table(delimiter, rows[0], rows[1:])
    return None if header else _Table(delimiter, None, rows)


def _table_summary(table: _Table, data: bytes, lines: int, size: str) -> _Summary:
    kind: Kind = "tsv" if table.delimiter == "\t" else "csv"
    blank = data.count(b"\n\n") + data.count(b"\n\r\n")
    total = lines - blank - (1 if table.header is not None else 0)
    width = len(table.header or table.rows[0])
    columns = table.header or [f"column {i + 1}" for i in range(width)]
    sampled = "" if total <= len(table.rows) else f"; values from the first {len(table.rows):,}"
    delimiter = _DELIMITER_NAMES[table.delimiter]
    shape = f"{_n(width, 'column')}, {_n(total, 'row')}"
    out = [f"{kind.upper()} ({delimiter}-delimited), {shape} ({size}){sampled}"]
    if table.header is None:
        out.append("no header row")
    else:
        out.append("columns: " + _join_limited([_key(c) for c in columns], _LINE_CHARS - 10))
    for i, column in enumerate(columns[:_MAX_ITEMS]):
        values = [row[i] for row in table.rows if i < len(row)]
        out.append(f"{_key(column)}: {_column_detail(values)}")
    return _Summary(kind, out, more=max(width - _MAX_ITEMS, 0))


def _column_detail(values: list[str]) -> str:
    filled = [v.strip() for v in values if v.strip()]
    empty = f" ({len(values) - len(filled):,} empty)" if len(filled) < len(values) else ""
    if not filled:
        return "empty"
    if all(_NUMBER.fullmatch(v) for v in filled):
        numbers = [float(v) for v in filled]
        if all(map(math.isfinite, numbers)):
            ints = all(_INTEGER.fullmatch(v) for v in filled)
            return f"{'int' if ints else 'float'} {_number_range(numbers, ints=ints)}{empty}"
    return f"text {_strings_detail(filled)}{empty}"


def _number_range(numbers: list[float], *, ints: bool = True) -> str:
    finite = [n for n in numbers if math.isfinite(n)]
    if not finite:
        return ""
    low, high = min(finite), max(finite)
    if ints and max(abs(low), abs(high)) < 2**53:
        shown = (f"{int(low)}", f"{int(high)}")
    else:
        shown = (f"{low:.6g}", f"{high:.6g}")
    return shown[0] if low == high else f"{shown[0]}..{shown[1]}"


def _strings_detail(values: list[str]) -> str:
    """Value counts when few are distinct, first → last for timestamps, else examples."""
    if not values:
        return ""
    distinct = Counter(values)
    if len(distinct) <= 5 and len(values) >= 2 * len(distinct):
        return _counts(Counter({_quote(k, 20): n for k, n in distinct.items()}))
    if all(_DATE.match(v) or _TIMESTAMP.match(v) for v in values):
        return f"{_clip(_oneline(values[0]), 32)} → {_clip(_oneline(values[-1]), 32)}"
    lengths = [float(len(v)) for v in values]
    length = f"len {_number_range(lengths)} " if max(lengths) > 24 else ""
    examples = [_quote(v, 24) for v in itertools.islice(distinct, 20)]
    return length + "e.g. " + _join_limited(examples, 70, len(distinct))


def _counts(counter: Counter[str]) -> str:
    """Values with their counts, most common first: ``"info" 30, "warn" 15``."""
    return _join_limited([f"{value} {n:,}" for value, n in counter.most_common()], 70)


# -- logs -------------------------------------------------------------------------

_TIMESTAMP: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}"
    r"|\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2}(?: [+-]\d{4})?"
    r"|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}",
    re.ASCII,
)
_LEVEL_SOURCE: Final = (
    r"\b(ERROR|ERR|FATAL|CRITICAL|CRIT|SEVERE|PANIC|EMERG|ALERT|WARNING|WARN"
    r"|INFO|NOTICE|DEBUG|TRACE)\b"
    r"|\[(error|crit|alert|emerg|warn|warning|notice|info|debug)\]"
    r"|\blevel[=:]\"?([A-Za-z]+)"
    r"|\"(?:level|severity)\": ?\"([A-Za-z]+)\""
)
_LEVEL: Final = re.compile(_LEVEL_SOURCE)
_LEVEL_BYTES: Final = re.compile(_LEVEL_SOURCE.encode())
_LEVEL_CLASS: Final = {
    **dict.fromkeys(
        ["error", "err", "fatal", "critical", "crit", "severe", "panic", "emerg", "alert"], "ERROR"
    ),
    **dict.fromkeys(["warn", "warning"], "WARN"),
    **dict.fromkeys(["info", "notice"], "INFO"),
    **dict.fromkeys(["debug", "trace"], "DEBUG"),
}
_HTTP_STATUS: Final = re.compile(rb'" ([1-5])\d\d ')
_DIGITS: Final = re.compile(r"\d+")
_DATE: Final = re.compile(r"\d{4}[-/]\d{2}[-/]\d{2}\b", re.ASCII)
_ERROR_LINES: Final = 3


def _log_share(sample: list[str]) -> float:
    """The share of the first non-empty lines with a timestamp or level near their start."""
    lines = [line[:64] for line in itertools.islice(filter(str.strip, sample), 200)]
    if not lines:
        return 0.0
    stamped = sum(1 for line in lines if _TIMESTAMP.search(line))
    leveled = sum(1 for line in lines if _LEVEL.search(line))
    return max(stamped, leveled) / len(lines)


def _log_lines(data: bytes, sample: list[str], size: str) -> list[str]:
    window = data[:_SCAN_BYTES]
    levels: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    errors: dict[str, str] = {}  # first lines of distinct errors, keyed with digits masked
    for raw in window.split(b"\n"):
        found = _LEVEL_BYTES.search(raw, 0, 160)
        level = _LEVEL_CLASS.get(found[found.lastindex or 0].decode().lower()) if found else None
        status = None if level else _HTTP_STATUS.search(raw, 0, 2000)
        if level:
            levels[level] += 1
        elif status:
            statuses[status[1].decode() + "xx"] += 1
        failed = level == "ERROR" or (status is not None and status[1] == b"5")
        if failed and len(errors) < _ERROR_LINES:
            line = _strip_timestamp(_oneline(raw[:400].decode("utf-8", "replace")))
            errors.setdefault(_DIGITS.sub("#", line), line)
    scope = "" if len(data) <= _SCAN_BYTES else f"; counts from the first {_size(_SCAN_BYTES)}"
    out = [f"Log ({size}){scope}"]
    first = next((m[0] for line in sample if (m := _TIMESTAMP.search(line[:64]))), None)
    last = _last_timestamp(data)
    if first:
        out.append(f"time: {first} → {last}" if last and last != first else f"time: {first}")
    if levels:
        order = ("ERROR", "WARN", "INFO", "DEBUG")
        out.append("levels: " + ", ".join(f"{n} {levels[n]:,}" for n in order if levels[n]))
    if statuses:
        out.append("HTTP status: " + ", ".join(f"{k} {n:,}" for k, n in sorted(statuses.items())))
    if tracebacks := window.count(b"Traceback (most recent call last)"):
        out.append(f"Python tracebacks: {tracebacks:,}")
    if errors:
        out.append("first errors:")
        out += [f"  {_clip(line, _LINE_CHARS - 2)}" for line in errors.values()]
    return out


def _strip_timestamp(line: str) -> str:
    """The line without a leading timestamp (and any address or bracket before it)."""
    found = _TIMESTAMP.search(line, 0, 64)
    if found is None:
        return line.strip()
    return line[found.end() :].lstrip(" ]:-,|\t").rstrip()


def _last_timestamp(data: bytes) -> str | None:
    tail = data[-64 * 1024 :].decode("utf-8", "replace").split("\n")
    for line in reversed(tail[-400:]):
        if found := _TIMESTAMP.search(line[:64]):
            return found[0]
    return None


# -- code -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Language:
    name: str
    signals: re.Pattern[str]
    """Every match counts towards detecting the language."""
    symbols: dict[str, re.Pattern[str]]
    """Plural label to a top-level definition pattern: group ``name`` (or ``alt``),
    and for methods maybe ``owner``."""
    imports: re.Pattern[str] | None
    comment: re.Pattern[str]
    """A comment or docstring line; group ``text`` is its content."""
    dialect: tuple[str, re.Pattern[str]] | None
    """A dialect named instead when its pattern matches (TypeScript, C++)."""


def _language(
    name: str,
    signals: list[str],
    symbols: dict[str, str],
    imports: str | None,
    comment: str,
    dialect: tuple[str, list[str]] | None = None,
    flags: int = 0,
) -> _Language:
    """Compile a language's patterns, where a space matches a space or a tab.

    Patterns work line by line (``[ \\t]`` never crosses a newline), so a space
    inside a character class is written ``\\x20``.
    """

    def rx(*alternatives: str) -> re.Pattern[str]:
        source = "|".join(alternatives).replace(" ", "[ \t]")
        return re.compile(source, re.MULTILINE | flags)

    return _Language(
        name,
        rx(*signals),
        {label: rx(pattern) for label, pattern in symbols.items()},
        None if imports is None else rx(imports),
        rx(comment),
        None if dialect is None else (dialect[0], rx(*dialect[1])),
    )


_ID: Final = r"[A-Za-z_$][\w$]*"
_PUB: Final = r"(?:pub(?:\([^)\n]*\))? +)?"
_SLASH_COMMENT: Final = r"^ *(?:///?!?|/\*+|\*(?!/)) *(?P<text>.*?) *(?:\*/)?$"
_LANGUAGES: Final = (
    _language(
        "python",
        [
            r"^(?:async +)?def +\w+ *\(|^class +\w+ *[(:]",
            r"^from +[\w.]+ +import\b|^import +[\w.]+(?: +as +\w+)? *$",
            r"^ +(?:if|elif|for|while|with|except)\b.*: *$|^ *(?:try|else|finally): *$",
            r"\bself\.\w|^if __name__ ==",
        ],
        {"classes": r"^class +(?P<name>\w+)", "functions": r"^(?:async +)?def +(?P<name>\w+)"},
        r"^(?:from|import) +(?P<name>\.*[\w.]+)",
        r"^ *(?:[rRuU]?(?:\"\"\"|''')|#(?![!\[])) *(?P<text>.*?)(?:\"\"\"|''')?$",
    ),
    _language(
        "javascript",
        [
            r"^ *(?:export +)?(?:default +)?(?:async +)?function\b",
            r"^ *(?:export +)?(?:const|let|var) +[\w${}\[\],\t\x20]+=",
            r"=>|^ *import\b.*\bfrom *['\"]|\brequire\( *['\"]",
            r"^ *export |\bconsole\.\w+\(|===|!==",
        ],
        {
            "classes": rf"^(?:export +)?(?:default +)?(?:abstract +)?class +(?P<name>{_ID})",
            "interfaces": rf"^(?:export +)?(?:declare +)?interface +(?P<name>{_ID})",
            "types": rf"^(?:export +)?type +(?P<name>{_ID}) *(?:<[^>\n]*>)? *=",
            "functions": (
                rf"^(?:export +)?(?:default +)?(?:async +)?function\*? *(?P<name>{_ID})"
                rf"|^(?:export +)?(?:const|let|var) +(?P<alt>{_ID}) *(?::[^=\n]+)?="
                rf" *(?:async *)?(?:function\b|\([^)\n]*\)[^=\n]*=>|{_ID} *=>)"
            ),
        },
        r"^(?:import\b[^'\"\n]*|\} *from *|(?:const|let|var)\b[^=\n]*= *require\( *)"
        r"['\"](?P<name>[^'\"\n]+)['\"]",
        _SLASH_COMMENT,
        (
            "typescript",
            [
                r"^ *(?:export +)?(?:declare +)?(?:interface|type|enum|namespace) +\w+",
                r"\w *\??: *(?:string|number|boolean|void|any|unknown|never)\b",
                r"\w\??: ?(?:Promise|Record|Array)<|\bas const\b|\bimport type\b",
            ],
        ),
    ),
    _language(
        "go",
        [
            r"^package +\w+ *$|^func\b|:=|^import *\(|\berr != nil\b",
            r"^type +\w+ +(?:struct|interface)\b|\bfmt\.\w+\(",
        ],
        {
            "types": r"^type +(?P<name>\w+)",
            "functions": r"^func +(?P<name>\w+)",
            "methods": r"^func *\( *(?:\w+ +)?\*?(?P<owner>\w+)[^)\n]*\) *(?P<name>\w+)",
        },
        r"^(?:import +|\t)(?:[\w.]+ +)?\"(?P<name>[^\"\n]+)\" *$",
        _SLASH_COMMENT,
    ),
    _language(
        "rust",
        [
            rf"^ *{_PUB}(?:async +)?(?:unsafe +)?fn +\w+|\blet +mut\b|^ *impl\b|^ *#!?\[",
            r"^ *(?:pub +)?use +[\w:]+|^ *pub +(?:struct|enum|trait)",
            r"\b(?:println|vec|format)!\(|&(?:mut +)?self\b",
        ],
        {
            "types": rf"^{_PUB}(?:struct|enum|trait|union) +(?P<name>\w+)",
            "impls": r"^impl\b(?:<[^>\n]*>)? +(?P<name>[^{\n]+?) *(?:where\b.*)?\{",
            "functions": rf"^{_PUB}(?:const +)?(?:async +)?(?:unsafe +)?"
            r"(?:extern +\"[^\"\n]*\" +)?fn +(?P<name>\w+)",
        },
        r"^ *(?:pub +)?use +(?P<name>[^;\n]+);",
        _SLASH_COMMENT,
    ),
    _language(
        "java",
        [
            r"^ *(?:public|private|protected) +(?:static +)?(?:final +)?"
            r"(?:class|interface|enum|record|void|[\w<>\[\],\x20]+ +\w+ *\()",
            r"^import +(?:static +)?[\w.]+(?:\.\*)?;|^package +[\w.]+;",
            r"\bSystem\.(?:out|err)\.|@Override\b",
        ],
        {
            "classes": r"^ *(?:(?:public|private|protected|abstract|final|static|sealed) +)*"
            r"(?:class|interface|enum|record) +(?P<name>\w+)",
            "methods": r"^ +(?:(?:public|private|protected|static|final|abstract|synchronized) +)+"
            r"(?:<[^>\n]+> +)?[\w<>\[\],.?\x20]+? +(?P<name>\w+) *\(",
        },
        r"^import +(?:static +)?(?P<name>[\w.*]+) *;",
        _SLASH_COMMENT,
    ),
    _language(
        "c",
        [
            r"^ *# *(?:include|define|ifn?def|endif|pragma)\b|\b(?:printf|malloc|free|sizeof)\(",
            r"^(?:static +)?(?:int|void|char|unsigned|long|double|float|size_t|bool)[\t\x20*]+\w+"
            r" *\([^;\n]*\) *\{? *$",
            r"\bstd::|^ *(?:template *<|namespace +\w+)",
        ],
        {
            "types": r"^(?:typedef +)?(?:struct|class|union|enum(?: +class)?) +(?P<name>\w+)"
            r" *(?::[^{;\n]*)?\{? *$",
            "functions": r"^(?!(?:if|else|for|while|switch|return|case|do|typedef|goto)\b)"
            r"[A-Za-z_][\w:<>,*&\t\x20]*[\t\x20*&](?P<name>~?[A-Za-z_][\w:]*) *\([^;\n]*\)"
            r" *(?:const *)?(?:noexcept *)?\{? *$",
        },
        r"^ *# *include *[<\"](?P<name>[^>\"\n]+)[>\"]",
        _SLASH_COMMENT,
        (
            "cpp",
            [
                r"\bstd::|^ *(?:template *<|namespace +\w+|using +namespace\b)",
                r"^ *(?:class +\w+|(?:public|private|protected):)",
                r"#include *<(?:iostream|vector|string|memory|map|unordered_map|algorithm)>",
            ],
        ),
    ),
    _language(
        "shell",
        [
            r"^#!.*\b(?:ba|z|k|da)?sh\b|^ *(?:if|elif|while) +\[\[? ",
            r"^ *(?:fi|done|esac|then|do) *$|^ *(?:export|local|readonly) +\w+=",
            r"^ *set +-[euxo]|\$\(|\$\{\w+|^ *echo ",
        ],
        {
            "functions": r"^ *(?:function +(?P<name>[\w:.-]+) *(?:\(\))? *\{"
            r"|(?:function +)?(?P<alt>[A-Za-z_][\w:.-]*) *\(\) *\{?)",
        },
        r"^ *(?:source|\.) +(?P<name>\S+)",
        r"^ *#(?![!\[]) *(?P<text>.*)$",
    ),
    _language(
        "sql",
        [
            r"^ *(?:select +[\w*]|insert +into |update +\w+ +set\b|delete +from ",
            r"create +(?:table|index|view|unique +index|trigger)\b|alter +table ",
            r"drop +(?:table|index|view) |with +\w+ +as *\()",
        ],
        {
            "tables": r"^ *create +(?:or +replace +)?(?:temp(?:orary)? +)?(?:virtual +)?"
            r"(?:table|view) +(?:if +not +exists +)?(?P<name>[\w.\"`\[\]]+)",
            "indexes": r"^ *create +(?:unique +)?index +(?:if +not +exists +)?"
            r"(?P<name>[\w.\"`\[\]]+)",
        },
        None,
        r"^ *-- *(?P<text>.*)$",
        flags=re.IGNORECASE,
    ),
)
_BY_NAME: Final = {lang.name: lang for lang in _LANGUAGES}
_DIALECTS: Final = {"typescript": "javascript", "cpp": "c"}
_SHEBANG: Final = re.compile(r"#!.*\b(python[\d.]*|node|deno|bun|(?:ba|z|k|da)?sh)\b")
_SHEBANG_LANGUAGES: Final = {"node": "javascript", "deno": "javascript", "bun": "javascript"}
_DISPLAY: Final = {
    "python": "Python",
    "javascript": "JavaScript",
    "typescript": "TypeScript",
    "go": "Go",
    "rust": "Rust",
    "java": "Java",
    "c": "C",
    "cpp": "C++",
    "shell": "Shell",
    "sql": "SQL",
}


def _code_lines(language: str, sample: list[str], size: str, truncated: bool) -> list[str]:
    spec = _BY_NAME[_DIALECTS.get(language, language)]
    text = "\n".join(line[:_SCAN_LINE_CHARS] for line in sample)
    scope = "; names from the first 256 KiB" if truncated else ""
    out = [f"{_DISPLAY[language]} code ({size}){scope}"]
    if doc := _first_comment(spec, sample):
        out.append(f"doc: {_clip(doc, _LINE_CHARS - 5)}")
    for label, pattern in spec.symbols.items():
        names = []
        for match in pattern.finditer(text):
            groups = match.groupdict()
            name = (groups["name"] or groups.get("alt") or "").strip()
            names.append(f"{groups['owner']}.{name}" if groups.get("owner") else name)
        if names:
            out.append(_named_list(label, names))
    if spec.imports is not None and (imports := [m["name"] for m in spec.imports.finditer(text)]):
        out.append(_named_list("imports", [name.strip() for name in imports]))
    return out


def _named_list(label: str, names: list[str]) -> str:
    unique = list(dict.fromkeys(_clip(name, 40) for name in names))
    prefix = f"{label} ({len(unique):,}): "
    return prefix + _join_limited(unique, _LINE_CHARS - len(prefix))


def _first_comment(spec: _Language, sample: list[str]) -> str | None:
    """The first comment or docstring text in the first lines, skipping pragmas."""
    in_docstring = False
    for full in sample[:60]:
        line = full[:_SCAN_LINE_CHARS]
        found = spec.comment.match(line)
        text = _oneline(found["text"] if found else line).strip(" \"'*/#-")
        pragma = text.lower().startswith(("-*-", "coding", "type:", "noqa", "!", "eslint"))
        if (found or in_docstring) and text and not pragma:
            return text
        in_docstring = found is not None and ('"""' in line or "'''" in line)
    return None


# -- documents: code or Markdown --------------------------------------------------

_HEADING: Final = re.compile(r"(#{1,6})[ \t]+(\S.*?)[ \t#]*$")
_FENCE: Final = re.compile(r" {0,3}(```+|~~~+)[ \t]*([\w+#.-]*)")
_LINK: Final = re.compile(r"\[[^\[\]\n]+\]\([^)\s]+\)")
_TABLE_RULE: Final = re.compile(r" *\|? *:?-{3,}:? *(?:\| *:?-{3,}:? *)+\|? *")


@dataclass(slots=True)
class _Document:
    """One pass over the sample: Markdown signals, and the text outside code fences."""

    first_line: str
    headings: list[tuple[int, str]]
    fences: int = 0
    fence_languages: tuple[str, ...] = ()
    links: int = 0
    tables: int = 0
    nonempty: int = 0
    code_text: str = ""

    @property
    def markdown_score(self) -> int:
        return len(self.headings) + 2 * self.fences + self.links + 2 * self.tables

    def best_language(self, hinted: str | None) -> tuple[str, int]:
        """The language with the most signals (a shebang or the hint weigh in) and its score."""
        scores = {lang.name: len(lang.signals.findall(self.code_text)) for lang in _LANGUAGES}
        if shebang := _SHEBANG.match(self.first_line):
            word = shebang[1]
            scores[
                "python" if word.startswith("py") else _SHEBANG_LANGUAGES.get(word, "shell")
            ] += 5
        base = _DIALECTS.get(hinted or "", hinted)
        if base is not None:
            scores[base] += 2
        best = max(scores, key=lambda name: (scores[name], name == base))
        dialect = _BY_NAME[best].dialect
        if hinted is not None and base == best:
            language = hinted if hinted in _DIALECTS else best
        else:
            language = best
        if language == best and dialect is not None and dialect[1].search(self.code_text):
            language = dialect[0]
        return language, scores[best]


def _scan_document(sample: list[str]) -> _Document:
    doc = _Document(sample[0] if sample else "", [])
    code: list[str] = []
    languages: dict[str, None] = {}
    fence: str | None = None
    previous = ""
    for full in sample:
        line = full[:_SCAN_LINE_CHARS]
        doc.nonempty += bool(line.strip())
        opened = _FENCE.match(line)
        if fence is not None:  # inside a fenced block until a bare fence at least as long
            if opened and opened[1].startswith(fence) and not opened[2]:
                fence = None
            continue
        if opened:
            fence = opened[1]
            doc.fences += 1
            if opened[2]:
                languages[opened[2]] = None
            continue
        code.append(line)
        if heading := _HEADING.match(line):
            doc.headings.append((len(heading[1]), heading[2]))
        elif line.startswith("===") and previous.strip() and not line.strip("= \t"):
            doc.headings.append((1, previous.strip()))
        elif _TABLE_RULE.fullmatch(line):
            doc.tables += 1
        doc.links += len(_LINK.findall(line))
        previous = line
    doc.code_text = "\n".join(code)
    doc.fence_languages = tuple(languages)
    return doc


def _markdown_summary(doc: _Document, size: str, truncated: bool) -> _Summary:
    parts = [_n(len(doc.headings), "heading")]
    if doc.fences:
        langs = f" ({_join_limited(list(doc.fence_languages), 40)})" if doc.fence_languages else ""
        parts.append(_n(doc.fences, "code block") + langs)
    if doc.links:
        parts.append(_n(doc.links, "link"))
    if doc.tables:
        parts.append(_n(doc.tables, "table"))
    scope = " in the first 256 KiB" if truncated else ""
    out = [f"Markdown ({size}): " + ", ".join(parts) + scope]
    top = min((level for level, _ in doc.headings), default=1)
    for level, title in doc.headings[:_MAX_ITEMS]:
        out.append(_clip("  " * (level - top) + "#" * level + " " + _oneline(title)))
    return _Summary("markdown", out, more=max(len(doc.headings) - _MAX_ITEMS, 0))


# -- text -------------------------------------------------------------------------

_WORD_TABLE: Final = bytes(32 if i in b" \t\n\r\x0b\x0c" else 120 for i in range(256))


def _text_lines(data: bytes, sample: list[str], size: str) -> list[str]:
    mapped = data.translate(_WORD_TABLE)  # whitespace to " ", everything else to "x"
    words = mapped.count(b" x") + mapped.startswith(b"x")
    firsts = itertools.islice(filter(str.strip, sample), 5)
    return [f"Text ({size}), {_n(words, 'word')}"] + [
        f"> {_clip(_oneline(line).strip(), _LINE_CHARS - 2)}" for line in firsts
    ]


# -- formatting -------------------------------------------------------------------

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def _fit(lines: list[str], max_tokens: int, more: int = 0) -> str:
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


def _clip(text: str, chars: int = _LINE_CHARS) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _oneline(text: str) -> str:
    return _CONTROL.sub(" ", text)


def _quote(text: str, chars: int) -> str:
    return '"' + _clip(_oneline(text), chars) + '"'


def _join_limited(items: list[str], width: int, total: int | None = None) -> str:
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


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"
