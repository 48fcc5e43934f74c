"""brain.recall.search.fulltext: bm25 over messages and summaries, scopes, time bounds, CJK."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain import Brain, InvalidInput, MessageIn, NotFound
from brain.recall.search import GrepOptions
from brain.store.schema import MIGRATIONS
from tests.brain.recall.search.helpers import fill, fill_cjk


def test_full_text_ranks_the_matching_message_first_and_carries_its_ids(fresh_brain: Brain) -> None:
    fill(fresh_brain)
    hits = fresh_brain.grep(GrepOptions("migration timeout log"), session="s")
    assert hits[0].id == "a1"
    assert hits[0].kind == "message"
    assert hits[0].session == "s"
    assert "[migration]" in hits[0].snippet


def test_full_text_is_scoped_to_the_session_unless_asked_for_all(fresh_brain: Brain) -> None:
    fill(fresh_brain)
    assert {h.id for h in fresh_brain.grep(GrepOptions("alpha"), session="s")} == {"u1"}
    assert {h.id for h in fresh_brain.grep(GrepOptions("alpha"))} == {"u1", "x1"}
    assert {h.id for h in fresh_brain.grep(GrepOptions("alpha"), session_key="k")} == {"x1"}
    with pytest.raises(NotFound, match="no session 'nobody'"):
        fresh_brain.grep(GrepOptions("alpha"), session="nobody")


def test_since_and_before_bound_the_time_of_writing(fresh_brain: Brain) -> None:
    fill(fresh_brain)
    opts = GrepOptions("the", since="2026-01-02T00:00:00Z", before="2026-01-03T00:00:00Z")
    assert [h.id for h in fresh_brain.grep(opts, session="s")] == ["a1"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["kiwi", "fig", "kiwi fig"])),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from(["a", "b", "c"]),
)
def test_a_scoped_search_finds_exactly_the_sessions_matches_however_sessions_interleave(
    tmp_path_factory: pytest.TempPathFactory,
    writes: list[tuple[str, str]],
    session: str,
) -> None:
    brain = Brain(tmp_path_factory.mktemp("interleaved") / "b.db")
    try:
        for i, (where, text) in enumerate(writes):
            brain.ingest(where, [MessageIn("user", text, client_id=f"m{i}")])
        expected = {
            f"m{i}" for i, (where, t) in enumerate(writes) if where == session and "kiwi" in t
        }
        options = GrepOptions("kiwi", limit=100)
        if session not in {where for where, _ in writes}:
            with pytest.raises(NotFound):  # never written: a mistaken name, not empty
                brain.grep(options, session=session)
            return
        assert {h.id for h in brain.grep(options, session=session)} == expected
        everywhere = brain.grep(options)
        assert {h.id for h in everywhere if h.session == session} == expected
    finally:
        brain.close()


def test_operator_words_and_punctuation_never_raise(fresh_brain: Brain) -> None:
    fill(fresh_brain)
    for text in ['"unbalanced', "alpha AND NOT (", "NEAR(x y", "*alpha*", "col:alpha", "a - b ^ c"]:
        fresh_brain.grep(GrepOptions(text), session="s")
    with pytest.raises(InvalidInput, match="query"):
        fresh_brain.grep(GrepOptions("!!! ---"), session="s")


def test_summaries_are_searchable_after_compaction(fresh_brain: Brain) -> None:
    words = ["alpha", "deploy", "database", "migration", "service", "timeout", "retry"]
    messages = [
        MessageIn(
            "user" if i % 2 == 0 else "assistant",
            " ".join(words[(i + k) % len(words)] for k in range(120)) + f" zebra{i}",
        )
        for i in range(120)
    ]
    fresh_brain.ingest("s", messages)
    report = fresh_brain.compact("s")
    assert report.summaries
    hits = fresh_brain.grep(GrepOptions("migration", scope="summaries"), session="s")
    assert hits
    assert all(h.kind == "summary" and h.id.startswith("sum_") for h in hits)
    assert fresh_brain.describe(hits[0].id, session="s")["kind"] == "summary"


def test_a_word_inside_unspaced_cjk_text_is_found(fresh_brain: Brain) -> None:
    fill_cjk(fresh_brain)
    assert [h.id for h in fresh_brain.grep(GrepOptions("障害"), session="s")] == ["ja"]
    assert [h.id for h in fresh_brain.grep(GrepOptions("北京开会"), session="s")] == ["zh"]
    hit = fresh_brain.grep(GrepOptions("サーバー"), session="s")[0]
    assert hit.id == "ja"
    assert "[" in hit.snippet
    assert [h.id for h in fresh_brain.grep(GrepOptions("점검"), session="s")] == ["ko"]


def test_a_cjk_query_ranks_the_row_sharing_most_of_it_first(fresh_brain: Brain) -> None:
    fill_cjk(fresh_brain)
    fresh_brain.ingest("s", [MessageIn("user", "北京很冷", client_id="cold")])
    hits = fresh_brain.grep(GrepOptions("明天北京开会"), session="s")
    assert hits[0].id == "zh"
    assert "cold" not in {h.id for h in hits}  # shares no trigram with the query


def test_mixed_queries_find_both_scripts_and_cjk_respects_scope_and_suppression(
    fresh_brain: Brain,
) -> None:
    fill_cjk(fresh_brain)
    fresh_brain.ingest("t", [MessageIn("user", "障害の報告", client_id="other")])
    assert {h.id for h in fresh_brain.grep(GrepOptions("障害 servers"), session="s")} == {
        "ja",
        "en",
    }
    assert {h.id for h in fresh_brain.grep(GrepOptions("障害"))} == {"ja", "other"}
    fresh_brain.suppress(["ja"], session="s")
    assert fresh_brain.grep(GrepOptions("障害"), session="s") == []
    assert fresh_brain.grep(GrepOptions("サーバーで障害"), session="s") == []


def test_cjk_in_summaries_is_found(fresh_brain: Brain) -> None:
    phrases = [
        "データベースの移行が失敗しました",
        "サービスを再起動します",
        "設定を確認してください",
    ]
    messages = [
        MessageIn(
            "user" if i % 2 == 0 else "assistant",
            "。".join(phrases[(i + k) % 3] for k in range(60)),
        )
        for i in range(120)
    ]
    fresh_brain.ingest("s", messages)
    assert fresh_brain.compact("s").summaries
    for query in ("移行", "再起動します"):
        hits = fresh_brain.grep(GrepOptions(query, scope="summaries"), session="s")
        assert hits
        assert all(h.kind == "summary" for h in hits)


def test_cjk_rows_stored_before_the_trigram_index_are_found_after_upgrading(
    db_path: Path,
) -> None:
    brain = Brain(db_path)
    fill_cjk(brain)
    brain.close()
    conn = apsw.Connection(str(db_path))
    for name, kind in list(
        conn.execute("SELECT name, type FROM sqlite_schema WHERE name LIKE '%_cjk%'")
    ):
        if kind in ("table", "trigger"):
            conn.execute(f"DROP {kind.upper()} IF EXISTS {name}")
    conn.execute(MIGRATIONS[6])  # version 7, as an upgrade from 6 runs it
    conn.close()
    again = Brain(db_path)
    assert [h.id for h in again.grep(GrepOptions("障害"), session="s")] == ["ja"]
    assert [h.id for h in again.grep(GrepOptions("北京开会"), session="s")] == ["zh"]
    again.close()


def _common_corpus(brain: Brain) -> None:
    """600 messages of six common words, a rare word in every 20th, in two sessions."""
    import random

    rng = random.Random(3)
    common = ["deploy", "review", "budget", "release", "meeting", "server"]
    texts = [" ".join(rng.choice(common) for _ in range(rng.randint(3, 12))) for _ in range(600)]
    for i in range(0, 600, 20):
        texts[i] += " zephyrine" + " deploy" * (i % 3)
    brain.ingest("s", [MessageIn("user", t) for t in texts[:300]])
    brain.ingest("t", [MessageIn("user", t) for t in texts[300:]])


def test_the_bounded_ranking_answers_as_ranking_every_match_when_it_ranks_them_all(
    fresh_brain: Brain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Forced onto the bounded path (brain_bm25 with counted document frequencies,
    # snippets from a second walk), a query whose matches are all among the newest
    # ranked must give FTS5's bm25 ranking: rows, scores and snippets.
    import brain.recall.search.fulltext as fulltext

    _common_corpus(fresh_brain)
    bounded: list[bool] = []
    original = fulltext._bounded_messages

    def counted(*args: object, **kwargs: object) -> object:
        rows = original(*args, **kwargs)  # type: ignore[arg-type]
        bounded.append(rows is not None)
        return rows

    monkeypatch.setattr(fulltext, "_LARGE", 0)
    for scope in (None, "s"):
        for query in ("zephyrine deploy budget", "deploy zephyrine", "review budget"):
            options = GrepOptions(query, scope="messages", limit=10, rank=False)
            monkeypatch.setattr(fulltext, "_bounded_messages", counted)
            fast = fresh_brain.grep(options, session=scope)
            monkeypatch.setattr(fulltext, "_bounded_messages", lambda *a, **k: None)
            full = fresh_brain.grep(options, session=scope)
            assert [round(h.score, 9) for h in fast] == [round(h.score, 9) for h in full]
            # Rows tied with the last one shown may be any of the tied rows.
            last = round(full[-1].score, 9)
            assert {
                (h.id, round(h.score, 9), h.snippet) for h in fast if round(h.score, 9) > last
            } == {(h.id, round(h.score, 9), h.snippet) for h in full if round(h.score, 9) > last}
    assert bounded == [True] * 6


def test_a_query_of_common_words_ranks_only_the_newest_matches_but_every_rare_words_row(
    fresh_brain: Brain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Words in most rows: ranking every match cannot be fast, so only the newest
    # matches in scope are ranked, plus every row holding the query's rare words.
    import brain.recall.search.fulltext as fulltext

    old = [
        MessageIn("user", "budget budget budget", client_id="old-best"),
        MessageIn("user", "a plan about quokkas and the budget", client_id="old-rare"),
    ]
    newer = [MessageIn("user", f"budget talk number {i} of many") for i in range(200)]
    fresh_brain.ingest("s", old + newer)
    monkeypatch.setattr(fulltext, "_LARGE", 100)
    monkeypatch.setattr(fulltext, "_NEWEST", 50)
    monkeypatch.setattr(fulltext, "_RARE_ROWS", 5)
    for scope in (None, "s"):
        common = fresh_brain.grep(GrepOptions("budget", limit=5, rank=False), session=scope)
        # Ranking every match would put the old row first (three hits in three words).
        assert "old-best" not in [h.id for h in common]
        assert len(common) == 5
        rare = fresh_brain.grep(GrepOptions("budget quokkas", limit=5, rank=False), session=scope)
        assert rare[0].id == "old-rare"
        assert "[quokkas]" in rare[0].snippet
    monkeypatch.setattr(fulltext, "_LARGE", 10_000)  # a small table: every match ranked
    exact = fresh_brain.grep(GrepOptions("budget", limit=5, rank=False))
    assert exact[0].id == "old-best"


def test_the_newest_rows_of_the_rarest_remaining_word_are_ranked_before_common_only_rows(
    fresh_brain: Brain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A word in too many rows to rank them all, but far fewer than the others: its
    # newest rows are ranked too, not only the newest rows holding any word.
    import brain.recall.search.fulltext as fulltext

    older = [MessageIn("user", f"the wombat budget plan {i}", client_id=f"w{i}") for i in range(10)]
    newer = [MessageIn("user", f"budget review talk number {i}") for i in range(200)]
    fresh_brain.ingest("s", older + newer)
    monkeypatch.setattr(fulltext, "_LARGE", 100)
    monkeypatch.setattr(fulltext, "_NEWEST", 50)
    monkeypatch.setattr(fulltext, "_RARE_ROWS", 5)  # wombat's 10 rows are not "rare"
    for scope in (None, "s"):
        hits = fresh_brain.grep(
            GrepOptions("wombat budget review", limit=5, rank=False), session=scope
        )
        assert {h.id for h in hits} <= {f"w{i}" for i in range(10)}
        assert len(hits) == 5


def test_a_word_shaped_like_a_conversation_token_is_searched_as_text(fresh_brain: Brain) -> None:
    # Scoped searches match "conv : c<id>"; the user's words never search that column.
    fresh_brain.ingest("s", [MessageIn("user", "the c1 board is ready", client_id="board")])
    fresh_brain.ingest("t", [MessageIn("user", "nothing here")])
    for scope in (None, "s", "t"):
        hits = fresh_brain.grep(GrepOptions("c1 c2", scope="messages"), session=scope)
        assert [h.id for h in hits] == ([] if scope == "t" else ["board"])
