"""Line framing: any chunking of a stream yields the same lines; long lines are cut off."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.framing import OVERSIZED, LineSplitter, encode_frame

line_bytes = st.binary(min_size=1, max_size=60).filter(lambda b: b"\n" not in b and b.strip())


def _split(data: bytes, cuts: list[int], limit: int = 1 << 20) -> list[object]:
    splitter = LineSplitter(limit)
    out: list[object] = []
    start = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        out += splitter.feed(data[start:cut])
        start = max(start, cut)
    out += splitter.feed(data[start:])
    return out + splitter.finish()


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(line_bytes, max_size=20), cuts=st.lists(st.integers(0, 2000), max_size=10))
def test_any_chunking_yields_the_same_lines(lines: list[bytes], cuts: list[int]) -> None:
    data = b"".join(line + b"\n" for line in lines)
    expected = [line[:-1] if line.endswith(b"\r") else line for line in lines]
    assert _split(data, cuts) == [e for e in expected if e.strip()]


@settings(max_examples=100, deadline=None)
@given(
    before=st.lists(line_bytes, max_size=5),
    after=st.lists(line_bytes, max_size=5),
    extra=st.integers(1, 500),
    cuts=st.lists(st.integers(0, 3000), max_size=10),
)
def test_an_oversized_line_is_reported_once_and_the_next_lines_survive(
    before: list[bytes], after: list[bytes], extra: int, cuts: list[int]
) -> None:
    limit = 100
    long_line = b"x" * (limit + extra)
    data = b"".join(line + b"\n" for line in [*before, long_line, *after])
    out = _split(data, cuts, limit)
    keep = [line[:-1] if line.endswith(b"\r") else line for line in before]
    tail = [line[:-1] if line.endswith(b"\r") else line for line in after]
    assert out == [*[k for k in keep if k.strip()], OVERSIZED, *[t for t in tail if t.strip()]]


def test_a_line_exactly_at_the_limit_is_accepted() -> None:
    splitter = LineSplitter(10)
    assert splitter.feed(b"0123456789\n") == [b"0123456789"]
    assert splitter.feed(b"0123456789X\n") == [OVERSIZED]


def test_the_last_line_without_newline_is_delivered_at_eof() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"id":1}\n{"id":2}') == [b'{"id":1}']
    assert splitter.finish() == [b'{"id":2}']


def test_blank_and_crlf_lines() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"\n   \r\nabc\r\n") == [b"abc"]


def test_encoded_frames_are_one_line_even_with_newlines_in_strings() -> None:
    frame = encode_frame({"text": "a\nb\r\nc\u2028", "emoji": "\U0001f600"})
    assert frame.count(b"\n") == 1
    assert frame.endswith(b"\n")
    assert orjson.loads(frame) == {"text": "a\nb\r\nc\u2028", "emoji": "\U0001f600"}
