"""brain.recall.search.pattern: bounded regex over messages, newest first."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from brain import Brain, BrainConfig, CompactionConfig, InvalidInput, MessageIn
from brain.recall.search import GrepOptions
from brain.recall.search.pattern import regex_search
from brain.store.connection import open_store
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


def test_a_regex_nested_thousands_deep_is_refused_as_invalid_input(fresh_brain: Brain) -> None:
    fill(fresh_brain)
    with pytest.raises(InvalidInput, match="nested too deeply"):
        fresh_brain.grep(GrepOptions("(" * 3000, mode="regex"), session="s")


def _scoped_regex_steps(db: Path, session: str) -> tuple[int, int]:
    """(hits, SQLite VM steps / 100) of a regex grep scoped to ``session``, on its own store."""
    store = open_store(db, create=False)
    try:
        (conversation,) = store.execute(
            "SELECT id FROM conversations WHERE session_id = ?", (session,)
        ).fetchone()
        ticks = [0]

        def tick() -> bool:
            ticks[0] += 1
            return False  # go on

        store.conn.set_progress_handler(tick, 100)
        options = GrepOptions(r"deploy note \d+", mode="regex", conversations=(conversation,))
        hits = regex_search(store, replace(options, limit=100))
        store.conn.set_progress_handler(None)
        return len(hits), ticks[0]
    finally:
        store.close()


def test_a_scoped_regex_reads_its_conversations_rows_not_every_newer_message(
    tmp_path: Path,
) -> None:
    # Scoped to an old conversation, the page query walked the whole table down from
    # the newest id: 301 ms p50 at 1M messages for a 1,000-message conversation (and,
    # at 10M, past the 1 s budget before the first row). It now starts from the
    # conversation's own rows, so what it reads does not grow with the others'.
    db = tmp_path / "b.db"
    brain = Brain(db, BrainConfig(compaction=CompactionConfig(auto=False)))
    try:
        brain.ingest(
            "old", [MessageIn("user", f"deploy note {i} for the old host") for i in range(30)]
        )
        newer = [MessageIn("user", f"chatter {i} about lunch plans") for i in range(2_000)]
        brain.ingest("new", newer)
        first = _scoped_regex_steps(db, "old")
        for n in range(9):
            brain.ingest(f"new-{n}", newer)
        later = _scoped_regex_steps(db, "old")
    finally:
        brain.close()
    assert first[0] == later[0] == 30
    assert later[1] < 2 * first[1], (first, later)  # old code: ~10x, as the table grew 10x
