"""Markdown chunking: headings, code fences, long sections, exact cover of the text."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from brain.graph.sync import chunk_markdown, split_lines
from tests.brain.graph.sync.helpers import MEMORY


def test_chunks_follow_headings_with_their_path_and_line_ranges() -> None:
    chunks = chunk_markdown(MEMORY)
    assert [(c.heading, c.line_start, c.line_end) for c in chunks] == [
        ("", 1, 2),
        ("Deploys", 3, 5),
        ("Deploys > Rollback", 6, 8),
        ("Coffee", 9, 10),
    ]
    assert chunks[1].text.startswith("# Deploys\n")
    assert "".join(c.text for c in chunks) == MEMORY


def test_a_hash_line_inside_a_code_fence_is_not_a_heading() -> None:
    text = "# Shell\n```sh\n# not a heading\necho hi\n```\n# Next\nmore\n"
    assert [c.heading for c in chunk_markdown(text)] == ["Shell", "Next"]


def test_a_long_section_is_cut_at_blank_lines_under_the_cap() -> None:
    paragraphs = [f"paragraph {i} " + "word " * 40 + "\n" for i in range(10)]
    text = "# Long\n" + "\n".join(paragraphs)
    chunks = chunk_markdown(text, max_chars=600)
    assert len(chunks) > 1
    assert all(len(c.text) <= 600 for c in chunks)
    assert all(c.heading == "Long" for c in chunks)
    # Every chunk after the first starts at the beginning of a paragraph.
    assert all(c.text.startswith("paragraph") for c in chunks[1:])


def test_whitespace_only_text_has_no_chunks() -> None:
    assert chunk_markdown("\n  \n\n") == []


_LINE = st.one_of(
    st.sampled_from(["", "# A", "## B", "### C", "```", "~~~", "text", "    # indented code"]),
    st.text(alphabet="ab #`\t", max_size=30),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_LINE, max_size=60),
    st.booleans(),
    st.integers(min_value=1, max_value=200),
)
def test_chunks_cover_the_lines_in_order_without_overlap_and_join_to_the_text(
    lines: list[str], trailing_newline: bool, cap: int
) -> None:
    text = "\n".join(lines) + ("\n" if trailing_newline and lines else "")
    chunks = chunk_markdown(text, max_chars=cap)
    if not text.strip():
        assert chunks == []
        return
    assert "".join(c.text for c in chunks) == text
    assert chunks[0].line_start == 1
    assert chunks[-1].line_end == len(split_lines(text))
    for before, after in itertools.pairwise(chunks):
        assert after.line_start == before.line_end + 1
    file_lines = split_lines(text)
    for c in chunks:
        assert c.line_start <= c.line_end
        assert c.text == "".join(file_lines[c.line_start - 1 : c.line_end])
        assert c.text.strip()
