"""JSON and JSONL payloads: the shape of a document, or the common keys of records.

A document is parsed in full up to 8 MiB; a larger array is profiled from the
items in its first 256 KiB. Tested through ``explore`` in tests/brain/payloads/test_explore.py
(the JSON and JSONL section).
"""

from __future__ import annotations

import codecs
import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Final

import orjson

from brain.payloads.explore.summary import (
    HEAD_BYTES,
    JSON_PARSE_LIMIT,
    MAX_ITEMS,
    RECORD_SAMPLE,
    Kind,
    Summary,
    clip,
    count_lines,
    join_limited,
    key_text,
    plural,
    quote,
)
from brain.payloads.explore.tables import number_range, strings_detail, value_counts

_JSON_TYPES: Final[dict[type, str]] = {
    type(None): "null",
    bool: "bool",
    int: "int",
    float: "float",
    str: "string",
    dict: "object",
    list: "array",
}


def json_or_jsonl(
    data: bytes, encoding: str, hint: Kind | None, sample: list[str], size: str
) -> Summary | None:
    """The summary of a JSON document or JSONL records, or None when ``data`` is neither."""
    body = data.removeprefix(codecs.BOM_UTF8).strip()
    bracketed = body[:1] in (b"{", b"[")
    if not (bracketed or encoding == "json" or hint == "json"):
        return None
    if hint == "jsonl" and (records := _jsonl_records(sample, loose=True)) is not None:
        return _jsonl_summary(records, data, size)
    if len(body) <= JSON_PARSE_LIMIT:
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
        else:
            return _json_summary(value, size)
    if (records := _jsonl_records(sample, loose=False)) is not None:
        return _jsonl_summary(records, data, size)
    if bracketed and len(body) > JSON_PARSE_LIMIT:
        if body[:1] == b"[" and (items := _array_prefix(body)) is not None:
            header = f"JSON array, too large to parse ({size}); {len(items):,}+ items"
            lines, more = _items_shape(items, "items", len(items) + 1)
            return Summary("json", [header, *lines], more=more)
        top = "object" if body[:1] == b"{" else "array"
        starts = [clip(line) for line in sample[:5] if line.strip()]
        return Summary("json", [f"JSON {top}, too large to parse ({size}); starts:", *starts])
    return None


def _array_prefix(body: bytes) -> list[object] | None:
    """The first items of a JSON array too large to parse, from its first 256 KiB.

    The prefix is cut at a comma and closed with "]"; only a comma between
    top-level items parses (any other leaves a string or container open), so
    trying the last few commas finds the items without a tokenizer.
    """
    prefix = body[:HEAD_BYTES]
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
    lines = [line for line in sample if line.strip()][:RECORD_SAMPLE]
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


def _jsonl_summary(records: list[object], data: bytes, size: str) -> Summary:
    blank = data.count(b"\n\n") + data.count(b"\n\r\n") + data.startswith((b"\n", b"\r\n"))
    total = count_lines(data) - blank
    lines, more = _items_shape(records, "records", total)
    return Summary("jsonl", [f"JSONL, {plural(total, 'record')} ({size})", *lines], more=more)


def _json_summary(value: object, size: str) -> Summary:
    if isinstance(value, dict):
        lines = [f"JSON object, {plural(len(value), 'key')} ({size})"]
        for key, item in itertools.islice(value.items(), MAX_ITEMS):
            lines.append(f"{key_text(key)}: {_describe(item, 1)}")
        return Summary("json", lines, more=max(len(value) - MAX_ITEMS, 0))
    if isinstance(value, list):
        shape, more = _items_shape(value, "items", len(value))
        return Summary(
            "json", [f"JSON array, {plural(len(value), 'item')} ({size})", *shape], more=more
        )
    return Summary("json", [f"JSON {_type_name(value)} ({size})", _describe(value, 0)])


def _items_shape(items: list[object], noun: str, total: int) -> tuple[list[str], int]:
    """Lines describing array items or records (one per key for objects), and keys left out.

    ``total`` is how many there are in all; when it is more than are profiled
    here, the first line says so.
    """
    sample = items[:RECORD_SAMPLE]
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
    lines = [f"{noun}: objects with {plural(len(fields), 'distinct key')}{scope}"]
    for key, values in itertools.islice(fields.items(), MAX_ITEMS):
        seen = "" if len(values) == len(sample) else f" (in {len(values)}/{len(sample)})"
        lines.append(f"{key_text(key)}: {_field_detail(values)}{seen}")
    return lines, max(len(fields) - MAX_ITEMS, 0)


def _describe(value: object, depth: int) -> str:
    """One value: scalars shown, containers by size with one more level of shape."""
    if isinstance(value, str):
        if len(value) <= 60:
            return quote(value, 60)
        return f"string ({plural(len(value), 'char')}) {quote(value, 40)}"
    if isinstance(value, dict):
        text = f"object ({plural(len(value), 'key')})"
        if depth < 2 and value:
            inner = [f"{key_text(k)}: {_brief(v)}" for k, v in itertools.islice(value.items(), 30)]
            text += " {" + join_limited(inner, 80, len(value)) + "}"
        return text
    if isinstance(value, list):
        text = f"array ({len(value):,})"
        return text + f" of {_field_detail(value[:RECORD_SAMPLE])}" if value else text
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
        detail = number_range(numbers, ints=kinds == {"int"})
    elif kinds == {"string"}:
        detail = strings_detail([v for v in present if isinstance(v, str)])
    elif kinds == {"bool"}:
        detail = value_counts(Counter("true" if v else "false" for v in present))
    elif kinds == {"object"}:
        keys: dict[str, None] = {}
        for v in present:
            if isinstance(v, dict) and len(keys) <= 30:
                keys.update(dict.fromkeys(itertools.islice(v, 30)))
        detail = "{" + join_limited([key_text(k) for k in keys], 60) + "}"
    elif kinds == {"array"}:
        detail = "len " + number_range([float(len(v)) for v in present if isinstance(v, list)])
    return f"{names} {detail}".rstrip()


def _type_name(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _scalar(value: object) -> str:
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, float):
        return f"{value:.6g}"
    return clip(str(value), 40)
