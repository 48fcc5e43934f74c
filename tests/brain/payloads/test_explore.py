"""brain.payloads.explore: kind detection, structural summaries within budget, line ranges."""

from __future__ import annotations

import random
import re
from typing import Literal, get_args

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.payloads.explore import Exploration, Kind, count_lines, explore, line_range
from brain.tokens import estimate_tokens

PACKAGE_JSON = orjson.dumps(
    {
        "name": "brain-ui",
        "version": "0.3.1",
        "private": True,
        "description": "Dashboard for the brain memory daemon: sessions, summaries and payloads",
        "scripts": {"dev": "vite", "build": "tsc && vite build", "test": "vitest run"},
        "dependencies": {
            "react": "^18.2.0",
            "react-dom": "^18.2.0",
            "zod": "^3.22.4",
            "@tanstack/react-query": "^5.0.0",
            "date-fns": "^3.0.0",
            "clsx": "^2.0.0",
            "lucide-react": "^0.300.0",
        },
        "files": ["dist", "README.md"],
        "workspaces": [],
    },
    option=orjson.OPT_INDENT_2,
)

USERS = orjson.dumps(
    [
        {
            "id": i,
            "email": f"user{i}@example.com",
            "role": "admin" if i % 4 == 0 else "member",
            "score": round(i * 1.5, 1),
            "manager": None if i % 2 else i + 100,
            "tags": ["beta"] * (i % 3),
        }
        for i in range(1, 41)
    ]
)

JSONL_LOG = b"".join(
    orjson.dumps(
        {
            "ts": f"2024-05-06T07:{minute:02d}:00Z",
            "level": "error" if minute % 10 == 9 else "info",
            "msg": f"request {minute} served",
            "latency_ms": 5 + minute * 3,
        }
    )
    + b"\n"
    for minute in range(30)
)

ITEMS_CSV = b"""id,name,price,qty,updated_at
1,Widget,9.99,3,2024-05-01
2,Gadget,24.50,0,2024-05-02
3,"Gizmo, large",105,12,2024-05-03
4,Doohickey,0.5,,2024-05-04
5,Thingamajig,12,7,2024-05-05
"""

PYTHON = b'''#!/usr/bin/env python3
"""Payload files: large values kept beside the database, one file per id."""

from __future__ import annotations

import os
from pathlib import Path

MAX_SIZE = 10


class FileStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, name: str) -> Path:
        if not name:
            raise ValueError(name)
        return self.root / name


def write_file(root: Path, name: str, data: bytes) -> Path:
    path = root / name
    path.write_bytes(data)
    return path


async def fetch(url: str) -> bytes:
    return b""
'''

TYPESCRIPT = b"""// HTTP client for the brain dashboard.
import { z } from "zod";
import type { Session } from "./types";

export interface ClientOptions {
  baseUrl: string;
  timeoutMs?: number;
}

export type SessionId = string;

export class BrainClient {
  constructor(private readonly opts: ClientOptions) {}

  async sessions(): Promise<Session[]> {
    const res = await fetch(`${this.opts.baseUrl}/sessions`);
    return res.json();
  }
}

export const parseSession = (raw: unknown): Session => schema.parse(raw);

export function formatBytes(n: number): string {
  return n < 1024 ? `${n} B` : `${(n / 1024).toFixed(1)} KiB`;
}
"""

GO = b"""// Package server serves the brain protocol over TCP.
package server

import (
\t"context"
\t"fmt"
\t"net"
)

type Server struct {
\taddr string
}

func New(addr string) *Server {
\treturn &Server{addr: addr}
}

func (s *Server) Serve(ctx context.Context) error {
\tln, err := net.Listen("tcp", s.addr)
\tif err != nil {
\t\treturn fmt.Errorf("listen: %w", err)
\t}
\tdefer ln.Close()
\treturn nil
}
"""

README = b"""# brain

A memory daemon for AI agents. See [the docs](https://example.com/docs).

## Install

```bash
pip install brain-memory
```

## Usage

```python
# Not a heading: a comment inside a code block.
from brain import Brain
```

### Configuration

| key | default |
|-----|---------|
| large_payload_tokens | 1000 |

## License

Apache-2.0, see [LICENSE](LICENSE).
"""

APP_LOG = b"""2024-05-06 07:08:09,123 INFO server: listening on :8080
2024-05-06 07:08:10,001 INFO db: opened brain.db
2024-05-06 07:09:11,532 WARN db: slow query (812 ms)
2024-05-06 07:10:00,002 ERROR db: connection refused to 10.0.0.3:5432
2024-05-06 07:10:01,002 ERROR db: connection refused to 10.0.0.4:5432
Traceback (most recent call last):
  File "app.py", line 10, in <module>
ConnectionError: refused
2024-05-06 07:10:02,100 ERROR http: handler crashed: KeyError 'session'
2024-05-06 07:11:00,000 INFO server: shutting down
"""

NGINX_ACCESS_LOG = b"""\
10.0.0.1 - - [06/May/2024:07:08:09 +0000] "GET / HTTP/1.1" 200 612 "-" "curl/8.0"
10.0.0.2 - - [06/May/2024:07:08:10 +0000] "GET /api/sessions HTTP/1.1" 200 1201 "-" "Mozilla"
10.0.0.2 - - [06/May/2024:07:08:11 +0000] "POST /api/save HTTP/1.1" 502 157 "-" "Mozilla"
10.0.0.3 - - [06/May/2024:07:08:12 +0000] "GET /missing HTTP/1.1" 404 153 "-" "curl/8.0"
"""

PROSE = b"""The quick brown fox jumps over the lazy dog. It was a bright cold day in April,
and the clocks were striking thirteen.

Call me Ishmael. Some years ago, never mind how long precisely, having little
or no money in my purse, I thought I would sail about a little.
"""


def _lines(found: Exploration) -> list[str]:
    return found.summary.splitlines()


# -- JSON and JSONL ----------------------------------------------------------------


def test_a_package_json_shows_scalars_and_the_keys_of_nested_objects() -> None:
    found = explore(PACKAGE_JSON, hint="package.json")
    assert found.kind == "json"
    lines = _lines(found)
    assert lines[0].startswith("JSON object, 8 keys")
    assert 'name: "brain-ui"' in lines
    assert "private: true" in lines
    assert "scripts: object (3 keys) {dev: string, build: string, test: string}" in lines
    deps = next(line for line in lines if line.startswith("dependencies:"))
    assert deps.startswith("dependencies: object (7 keys) {react: string")
    assert re.search(r"… and \d+ more}$", deps)  # a long key list is cut, with a count
    assert 'files: array (2) of string e.g. "dist", "README.md"' in lines
    assert "workspaces: array (0)" in lines


def test_an_array_of_records_shows_its_length_and_the_common_keys_with_types() -> None:
    found = explore(USERS)
    assert found.kind == "json"
    lines = _lines(found)
    assert lines[0].startswith("JSON array, 40 items")
    assert "items: objects with 6 distinct keys" in lines
    assert "id: int 1..40" in lines
    assert 'role: string "member" 30, "admin" 10' in lines
    assert "score: float 1.5..60" in lines
    assert "manager: null|int 102..140" in lines
    assert "tags: array len 0..2" in lines


def test_a_json_payload_file_accepts_any_json_value() -> None:
    assert explore(b'"just a string"', encoding="json").kind == "json"
    assert explore(b"42", encoding="json").summary == "JSON int (1 line, 2 B)\n42"
    assert explore(b"42").kind == "text"  # as plain utf8 a bare number is text


def test_a_json_array_too_large_to_parse_is_profiled_from_its_first_items() -> None:
    record = b'{"id": 7, "path": "/a,b]", "ok": true}'
    data = b"[" + b",".join([record] * 250_000) + b"]"  # ~10 MB
    found = explore(data)
    assert found.kind == "json"
    lines = _lines(found)
    assert re.match(r"JSON array, too large to parse \(.*\); [\d,]+\+ items$", lines[0])
    assert 'path: string "/a,b]" 500' in lines
    assert "ok: bool true 500" in lines


def test_jsonl_counts_every_record_and_profiles_the_common_keys() -> None:
    found = explore(JSONL_LOG)
    assert found.kind == "jsonl"
    lines = _lines(found)
    assert lines[0].startswith("JSONL, 30 records")
    assert "ts: string 2024-05-06T07:00:00Z → 2024-05-06T07:29:00Z" in lines
    assert 'level: string "info" 27, "error" 3' in lines
    assert "latency_ms: int 5..92" in lines


def test_a_jsonl_hint_reads_a_single_record_as_jsonl() -> None:
    assert explore(b'{"a": 1}\n').kind == "json"
    assert explore(b'{"a": 1}\n', hint="events.jsonl").kind == "jsonl"


# -- tables -------------------------------------------------------------------------


def test_a_csv_reports_columns_rows_examples_and_numeric_ranges() -> None:
    found = explore(ITEMS_CSV)
    assert found.kind == "csv"
    lines = _lines(found)
    assert lines[0].startswith("CSV (comma-delimited), 5 columns, 5 rows")
    assert lines[1] == "columns: id, name, price, qty, updated_at"
    assert "id: int 1..5" in lines
    assert any(
        line.startswith('name: text e.g. "Widget", "Gadget", "Gizmo, large"') for line in lines
    )
    assert "price: float 0.5..105" in lines
    assert "qty: int 0..12 (1 empty)" in lines
    assert "updated_at: text 2024-05-01 → 2024-05-05" in lines


def test_a_tsv_is_told_apart_by_its_delimiter() -> None:
    found = explore(b"name\tage\tcity\nalice\t31\tParis\nbob\t42\tLyon\ncarol\t27\tNice\n")
    assert found.kind == "tsv"
    assert "age: int 27..42" in _lines(found)


def test_prose_with_one_comma_a_line_is_not_a_csv_unless_hinted() -> None:
    prose = b"Hello, world.\nGoodbye, moon.\nSee you, friend.\n"
    assert explore(prose).kind == "text"
    assert explore(b"a,b\n1,2\n").kind == "text"
    assert explore(b"a,b\n1,2\n", hint="data.csv").kind == "csv"


# -- code ---------------------------------------------------------------------------


def test_python_source_lists_its_docstring_classes_functions_and_imports() -> None:
    found = explore(PYTHON)
    assert (found.kind, found.language) == ("code", "python")
    assert _lines(found) == [
        f"Python code (29 lines, {len(PYTHON)} B)",
        "doc: Payload files: large values kept beside the database, one file per id.",
        "classes (1): FileStore",
        "functions (2): write_file, fetch",
        "imports (3): __future__, os, pathlib",
    ]


def test_typescript_is_told_apart_from_javascript_by_its_types() -> None:
    found = explore(TYPESCRIPT)
    assert (found.kind, found.language) == ("code", "typescript")
    lines = _lines(found)
    assert "doc: HTTP client for the brain dashboard." in lines
    assert "classes (1): BrainClient" in lines
    assert "interfaces (1): ClientOptions" in lines
    assert "types (1): SessionId" in lines
    assert "functions (2): parseSession, formatBytes" in lines
    assert "imports (2): zod, ./types" in lines


def test_go_source_lists_types_functions_and_methods_with_their_receivers() -> None:
    found = explore(GO)
    assert (found.kind, found.language) == ("code", "go")
    lines = _lines(found)
    assert "doc: Package server serves the brain protocol over TCP." in lines
    assert "types (1): Server" in lines
    assert "functions (1): New" in lines
    assert "methods (1): Server.Serve" in lines
    assert "imports (3): context, fmt, net" in lines


@pytest.mark.parametrize(
    ("source", "language", "expected"),
    [
        (
            b"use std::collections::HashMap;\n\npub struct Counter {\n    seen: usize,\n}\n\n"
            b"impl Counter {\n    pub fn new() -> Self {\n        let mut seen = 0;\n"
            b"        Self { seen }\n    }\n}\n\npub fn estimate(text: &str) -> usize {\n"
            b"    text.len()\n}\n",
            "rust",
            "functions (1): estimate",
        ),
        (
            b"package com.example;\n\nimport java.util.List;\n\npublic class Store {\n"
            b"    public List<String> get(String id) {\n        return null;\n    }\n\n"
            b"    @Override\n    public String toString() {\n"
            b'        System.out.println("x");\n        return "Store";\n    }\n}\n',
            "java",
            "methods (2): get, toString",
        ),
        (
            b'#include <stdio.h>\n#include "ring.h"\n\nstruct ring {\n    int head;\n};\n\n'
            b"static int ring_push(struct ring *r)\n{\n    return 0;\n}\n\n"
            b'int main(void)\n{\n    printf("hi");\n    return 0;\n}\n',
            "c",
            "functions (2): ring_push, main",
        ),
        (
            b"#include <vector>\n\nnamespace brain {\nclass Dag {\npublic:\n"
            b"    std::vector<int> nodes;\n};\n}\n\nint main() {\n    return 0;\n}\n",
            "cpp",
            "imports (1): vector",
        ),
        (
            b'#!/usr/bin/env bash\nset -euo pipefail\n\ncheck() {\n    echo "checking $1"\n}\n\n'
            b'if [[ -n "${CI:-}" ]]; then\n    check all\nfi\n',
            "shell",
            "functions (1): check",
        ),
        (
            b"-- Schema.\nCREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT);\n"
            b"CREATE INDEX idx_body ON messages(body);\nSELECT count(*) FROM messages;\n",
            "sql",
            "tables (1): messages",
        ),
        (
            b'const path = require("path");\n\nexport function joinAll(parts) {\n'
            b'  return parts.join("/");\n}\n\nexport const load = async (file) => {\n'
            b"  console.log(file);\n  return file === '' ? null : file;\n};\n",
            "javascript",
            "functions (2): joinAll, load",
        ),
    ],
)
def test_each_language_is_detected_from_content(
    source: bytes, language: str, expected: str
) -> None:
    found = explore(source)
    assert (found.kind, found.language) == ("code", language)
    assert expected in _lines(found)


def test_a_filename_hint_breaks_a_tie_between_markdown_and_code() -> None:
    snippet = b"# setup\nimport os\n# run\nprint(os.getcwd())\n"
    assert explore(snippet).kind == "markdown"  # '#' lines read as headings
    hinted = explore(snippet, hint="scripts/setup.py")
    assert (hinted.kind, hinted.language) == ("code", "python")


def test_a_bare_tool_name_is_not_read_as_a_file_extension() -> None:
    assert explore(b"just words\n", hint="bash").kind == "text"
    assert explore(b"just words\n", hint="run.sh").language == "shell"


# -- Markdown, logs, text, binary ------------------------------------------------------


def test_a_markdown_readme_gives_a_heading_outline_that_skips_code_blocks() -> None:
    found = explore(README)
    assert found.kind == "markdown"
    assert _lines(found) == [
        f"Markdown (26 lines, {len(README)} B): "
        "5 headings, 2 code blocks (bash, python), 2 links, 1 table",
        "# brain",
        "  ## Install",
        "  ## Usage",
        "    ### Configuration",
        "  ## License",
    ]


def test_an_app_log_counts_levels_and_shows_the_first_distinct_errors() -> None:
    found = explore(APP_LOG)
    assert found.kind == "log"
    assert _lines(found) == [
        f"Log (10 lines, {len(APP_LOG)} B)",
        "time: 2024-05-06 07:08:09,123 → 2024-05-06 07:11:00,000",
        "levels: ERROR 3, WARN 1, INFO 3",
        "Python tracebacks: 1",
        "first errors:",
        "  ERROR db: connection refused to 10.0.0.3:5432",  # the .4 twin differs only in digits
        "  ERROR http: handler crashed: KeyError 'session'",
    ]


def test_an_nginx_access_log_counts_http_status_classes() -> None:
    found = explore(NGINX_ACCESS_LOG)
    assert found.kind == "log"
    lines = _lines(found)
    assert "time: 06/May/2024:07:08:09 +0000 → 06/May/2024:07:08:12 +0000" in lines
    assert "HTTP status: 2xx 2, 4xx 1, 5xx 1" in lines
    assert '  "POST /api/save HTTP/1.1" 502 157 "-" "Mozilla"' in lines


def test_a_large_log_counts_lines_over_the_whole_input() -> None:
    data = b"".join(b"2024-01-01 00:00:00 INFO tick %d\n" % i for i in range(400_000))
    found = explore(data)
    assert (found.kind, found.lines, found.bytes) == ("log", 400_000, len(data))
    assert "(400,000 lines" in _lines(found)[0]


def test_plain_prose_is_text_with_counts_and_its_first_lines() -> None:
    found = explore(PROSE)
    assert found.kind == "text"
    assert _lines(found) == [
        f"Text (5 lines, {len(PROSE)} B), 50 words",
        "> The quick brown fox jumps over the lazy dog. It was a bright cold day in April,",
        "> and the clocks were striking thirteen.",
        "> Call me Ishmael. Some years ago, never mind how long precisely, having little",
        "> or no money in my purse, I thought I would sail about a little.",
    ]


def test_random_bytes_are_binary_with_a_hex_preview_of_the_first_32_bytes() -> None:
    data = random.Random(5).randbytes(4096)
    found = explore(data)
    assert found.kind == "binary"
    assert _lines(found) == [
        "Binary data, 4.0 KiB",
        f"hex: {data[:32].hex(' ')}",
        "ascii: " + "".join(chr(b) if 32 <= b < 127 else "." for b in data[:32]),
    ]


def test_a_known_binary_format_is_named_from_its_magic_bytes() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)
    assert explore(png).summary.startswith("PNG image, 80 B\nhex: 89 50 4e 47")


def test_empty_and_blank_inputs_are_empty_text() -> None:
    assert explore(b"") == Exploration("text", "Empty (0 bytes)", 0, 0)
    assert explore(b" \n\n").summary == "Empty text (2 lines, 3 B)"


# -- budget -------------------------------------------------------------------------


def test_a_long_key_list_is_cut_to_the_budget_with_the_count_left_out() -> None:
    data = orjson.dumps({f"key_{i:03d}": i for i in range(500)})
    found = explore(data, max_tokens=120)
    lines = _lines(found)
    assert estimate_tokens(found.summary) <= 120
    shown = len(lines) - 2  # the header and the trailer
    assert lines[-1] == f"… and {500 - shown} more"


def test_a_larger_budget_shows_more_of_the_same_summary() -> None:
    data = orjson.dumps({f"key_{i:03d}": i for i in range(500)})
    small, large = explore(data, max_tokens=60), explore(data, max_tokens=600)
    assert len(large.summary) > len(small.summary)
    assert large.summary.startswith(small.summary.rsplit("\n", 1)[0])


# -- line_range ---------------------------------------------------------------------


def test_line_range_returns_inclusive_one_based_lines_with_their_endings() -> None:
    data = b"one\ntwo\r\nthree\nfour"
    assert line_range(data, 2, 3) == "two\r\nthree\n"
    assert line_range(data, 4, 4) == "four"
    assert line_range(data, 1, 1) == "one\n"


def test_line_range_clamps_out_of_range_bounds() -> None:
    data = b"one\ntwo\nthree\n"
    assert line_range(data, -5, 1) == "one\n"
    assert line_range(data, 0, 99) == "one\ntwo\nthree\n"
    assert line_range(data, 3, 10**9) == "three\n"
    assert line_range(data, 4, 9) == ""
    assert line_range(data, 3, 2) == ""
    assert line_range(b"", 1, 1) == ""


def test_line_range_decodes_invalid_utf8_with_replacement() -> None:
    assert line_range(b"ok\n\xff\xfebad\n", 2, 2) == "\ufffd\ufffdbad\n"


# -- properties ---------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=20,
)
_CHUNKS = [
    *",;\t\n\r{}[]\":0123456789 abcxyz#=-()`|>*.'/_\x1b\u00e9\u4e2d",
    *["def ", "class ", "func ", "fn ", "import ", "```", "# ", "ERROR ", "WARN ", " => "],
    *["2024-01-01T10:00:00Z ", '"level": "error"', "SELECT ", "#include <x>\n", "\n"],
]
structured_text = st.lists(st.sampled_from(_CHUNKS), max_size=80).map(
    lambda chunks: "".join(chunks).encode("utf-8")
)
payloads = (
    st.binary(max_size=2000)
    | structured_text
    | json_values.map(orjson.dumps)
    | st.lists(json_values.map(orjson.dumps), max_size=8).map(b"\n".join)
    | st.lists(
        st.lists(st.text(alphabet="ab1.,-x ", max_size=6), min_size=3, max_size=3).map(
            lambda row: ",".join(row).encode()
        ),
        max_size=8,
    ).map(b"\n".join)
)
hints = st.none() | st.sampled_from(
    ["a.py", "x.csv", "x.tsv", "x.md", "x.log", "x.json", "x.jsonl", "t.ts", "bash"]
)


@settings(max_examples=400, deadline=None)
@given(data=payloads, encoding=st.sampled_from(["utf8", "json"]), hint=hints)
def test_explore_never_raises_and_is_deterministic(
    data: bytes, encoding: Literal["utf8", "json"], hint: str | None
) -> None:
    first = explore(data, encoding=encoding, hint=hint)
    assert first == explore(data, encoding=encoding, hint=hint)
    assert first.kind in get_args(Kind)


@settings(max_examples=400, deadline=None)
@given(data=payloads, max_tokens=st.integers(40, 400), hint=hints)
def test_the_summary_is_within_max_tokens(data: bytes, max_tokens: int, hint: str | None) -> None:
    found = explore(data, hint=hint, max_tokens=max_tokens)
    assert found.summary
    assert estimate_tokens(found.summary) <= max_tokens


@settings(deadline=None)
@given(data=payloads, max_tokens=st.integers(-5, 40))
def test_even_a_tiny_budget_is_respected(data: bytes, max_tokens: int) -> None:
    assert estimate_tokens(explore(data, max_tokens=max_tokens).summary) <= max(max_tokens, 0)


@settings(max_examples=300, deadline=None)
@given(data=payloads)
def test_lines_and_bytes_describe_the_input(data: bytes) -> None:
    found = explore(data)
    pieces = data.split(b"\n")
    expected_lines = len(pieces) - 1 if pieces[-1] == b"" else len(pieces)
    assert (found.lines, found.bytes) == (expected_lines, len(data))
    assert count_lines(data) == expected_lines


@settings(max_examples=300, deadline=None)
@given(data=payloads, cut=st.integers(-2, 12))
def test_adjacent_line_ranges_concatenate_to_the_whole_payload(data: bytes, cut: int) -> None:
    whole = data.decode("utf-8", "replace")
    lines = count_lines(data)
    assert line_range(data, 1, lines) == whole
    assert line_range(data, 1, cut) + line_range(data, cut + 1, lines + 5) == whole


def test_a_budget_counts_cjk_characters_as_a_token_each() -> None:
    # "、" is three UTF-8 bytes but one token: a byte-counted budget let it through.
    assert estimate_tokens(explore("、".encode(), max_tokens=8).summary) <= 8
    assert estimate_tokens(explore(("東京" * 50).encode(), max_tokens=3).summary) <= 3
