"""brain.recall.search.pattern: bounded regex over messages, newest first."""

from __future__ import annotations

import pytest

from brain import Brain, InvalidInput, MessageIn
from brain.recall.search import GrepOptions
from tests.brain.recall.search.helpers import fill


def test_regex_finds_paths_newest_first_with_a_marked_snippet(fresh_brain: Brain) -> None:
    fill(fresh_brain)
    hits = fresh_brain.grep(GrepOptions(r"/var/log/\w+\.log", mode="regex"), session="s")
    assert [h.id for h in hits] == ["a1"]
    assert "[/var/log/app.log]" in hits[0].snippet


def test_a_pathological_regex_is_an_error_not_a_hang(fresh_brain: Brain) -> None:
    fresh_brain.ingest("s", [MessageIn("user", "a" * 3000 + "b")])  # under the payload threshold
    with pytest.raises(InvalidInput, match="too long"):
        fresh_brain.grep(GrepOptions(r"(a|aa)+$", mode="regex"), session="s")


@pytest.mark.parametrize(
    "pattern", [r"(?:host nova){e<=10}", r"nova{e}", r"x{i<=1,d<=1}", r"x{2i+2d+1s<=4}", r"\\{e}"]
)
def test_a_fuzzy_regex_is_refused_before_any_row_is_read(fresh_brain: Brain, pattern: str) -> None:
    fill(fresh_brain)
    with pytest.raises(InvalidInput, match="fuzzy matching"):
        fresh_brain.grep(GrepOptions(pattern, mode="regex"), session="s")


def test_an_invalid_regex_names_the_query(fresh_brain: Brain) -> None:
    fill(fresh_brain)
    with pytest.raises(InvalidInput, match="not a valid regular expression"):
        fresh_brain.grep(GrepOptions("(unclosed", mode="regex"), session="s")
