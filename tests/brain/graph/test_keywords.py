"""The nodes' keyword ranking in memory equals FTS5's bm25 and follows every write
(brain.graph.keywords)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import Brain, Store
from brain.graph import keywords
from brain.graph.keywords import KeywordIndex, index_for
from brain.graph.nodes import NewNode

WORDS = [
    "deploy",
    "deploys",
    "deployed",
    "Deploying",
    "café",
    "cafe",
    "CAFÉS",
    "naïve",
    "running",
    "runs",
    "the",
    "kestrel",
    "osprey",
    "x1",
    "über",
    "uber",
    "e-mail",
    "migration",
    "migrations",
]
"""Stems shared by several spellings, diacritics, case, and a word of two tokens."""
QUERY_WORDS = [w for w in WORDS if w != "e-mail"] + ["absent", "über", "ÜBER"]

texts = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=0, max_size=25).map(" ".join),
    min_size=1,
    max_size=14,
)
queries = st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=5).map(
    lambda words: " OR ".join(f'"{w}"' for w in words)
)


def fts(store: Store, match: str, n: int) -> list[tuple[int, float]]:
    """What ``bm25(nodes_fts)`` ranks (higher is better), as keyword seeding read it."""
    return [
        (int(r[0]), -float(r[1]))
        for r in store.execute(
            "SELECT rowid, bm25(nodes_fts) FROM nodes_fts WHERE nodes_fts MATCH ? "
            "ORDER BY rank LIMIT ?",
            (match, n),
        )
    ]


def assert_ranks_as_fts(index: KeywordIndex, store: Store, match: str, n: int = 1_000) -> None:
    """The same nodes with the same scores, to the bit, in the same order (among equal
    scores FTS5 returns the lower row id first, and so does the index)."""
    assert index.ranking(store, match, n) == fts(store, match, n)


def replace_nodes(store: Store, contents: list[str]) -> None:
    with store.transaction():
        store.execute("DELETE FROM nodes")
        for i, text in enumerate(contents):
            store.execute(
                "INSERT INTO nodes (node_id, kind, content, created_at) "
                "VALUES (?, 'teaching', ?, '2026-01-01T00:00:00Z')",
                (f"nd_{i}", text),
            )


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    contents=texts,
    match=queries,
    n=st.integers(min_value=1, max_value=12),
    edits=st.lists(st.tuples(st.integers(min_value=0, max_value=20), texts), max_size=4),
)
def test_the_index_ranks_every_node_text_and_query_as_fts5s_bm25_does(
    store: Store, contents: list[str], match: str, n: int, edits: list[tuple[int, list[str]]]
) -> None:
    # One index follows the store across examples (each replaces every node: row ids
    # grow, so both score layouts run), then across a few edits of single nodes
    # (rewritten, deleted, added: the postings written since the base); a fresh one
    # builds from nothing.
    followed = index_for(store)
    replace_nodes(store, contents)
    for index in (followed, KeywordIndex()):
        assert_ranks_as_fts(index, store, match)
        assert_ranks_as_fts(index, store, match, n)
    for at, (text, *_) in edits:
        ids = [int(r[0]) for r in store.execute("SELECT id FROM nodes ORDER BY id")]
        with store.transaction():
            if ids and at % 3 == 0:
                store.execute("DELETE FROM nodes WHERE id = ?", (ids[at % len(ids)],))
            elif ids and at % 3 == 1:
                store.execute(
                    "UPDATE nodes SET content = ? WHERE id = ?", (text, ids[at % len(ids)])
                )
            else:
                store.execute(
                    "INSERT INTO nodes (node_id, kind, content, created_at) "
                    "VALUES (?, 'teaching', ?, '2026-01-01T00:00:00Z')",
                    (f"nd_new_{max(ids, default=0)}", text),
                )
        assert_ranks_as_fts(followed, store, match)
        assert_ranks_as_fts(followed, store, match, n)


def test_a_word_of_several_tokens_is_left_to_fts5(store: Store) -> None:
    replace_nodes(store, ["send the e-mail", "mail it"])
    index = KeywordIndex()
    assert index.ranking(store, '"e-mail"', 10) is None
    assert index.ranking(store, '"mail"', 10) == fts(store, '"mail"', 10)


def test_above_the_node_limit_the_index_is_not_built_and_below_it_again_it_is(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    replace_nodes(store, ["kestrel one", "kestrel two", "osprey"])
    monkeypatch.setattr(keywords, "MAX_NODES", 2)
    index = KeywordIndex()
    assert index.ranking(store, '"kestrel"', 10) is None
    assert index.ranking(store, '"kestrel"', 10) is None  # until the next write
    assert index.nodes == 0
    with store.transaction():
        store.execute("DELETE FROM nodes WHERE content = 'osprey'")
    assert_ranks_as_fts(index, store, '"kestrel"')
    assert index.nodes == 2


def test_the_index_follows_teach_and_a_rewrite_of_the_same_length(
    fresh_brain: Brain,
) -> None:
    store = fresh_brain.store
    fresh_brain.teach(NewNode("teaching", "the staging cluster is called kestrel"))
    index = index_for(store)
    assert [n for n, _ in index.ranking(store, '"kestrel"', 10) or []] != []
    taught = fresh_brain.teach(NewNode("teaching", "the kestrel cluster moved to Frankfurt"))
    assert_ranks_as_fts(index, store, '"kestrel" OR "frankfurt"')
    assert len(index.ranking(store, '"kestrel"', 10) or []) == 2
    with store.transaction():
        # Same length, same number of tokens: only the words differ.
        store.execute(
            "UPDATE nodes SET content = 'the osprey cluster moved to Frankfurt' WHERE node_id = ?",
            (taught.node_id,),
        )
    assert len(index.ranking(store, '"kestrel"', 10) or []) == 1
    assert len(index.ranking(store, '"osprey"', 10) or []) == 1
    assert_ranks_as_fts(index, store, '"kestrel" OR "osprey" OR "cluster"')


def test_the_index_follows_a_write_by_another_process(fresh_brain: Brain, db_path: Path) -> None:
    store = fresh_brain.store
    fresh_brain.teach(NewNode("teaching", "the staging cluster is called kestrel"))
    index = index_for(store)
    assert len(index.ranking(store, '"kestrel"', 10) or []) == 1
    script = (
        "import apsw, sys\n"
        "c = apsw.Connection(sys.argv[1])\n"
        "c.execute('PRAGMA busy_timeout = 5000')\n"
        "c.execute(\"UPDATE nodes SET content = 'the staging cluster is called osprey'\")\n"
    )
    subprocess.run([sys.executable, "-c", script, str(db_path)], check=True)
    assert index.ranking(store, '"kestrel"', 10) == []
    assert len(index.ranking(store, '"osprey"', 10) or []) == 1
    assert_ranks_as_fts(index, store, '"osprey" OR "staging"')


def test_the_index_follows_sync_adding_changing_and_removing_notes(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    notes = tmp_path / "workspace" / "memory"
    notes.mkdir(parents=True)
    page = notes / "notes.md"
    page.write_text("# Notes\n\n## One\n\nkestrel moved.\n\n## Two\n\nosprey stayed.\n")
    fresh_brain.sync(tmp_path / "workspace", embed=False)
    store = fresh_brain.store
    index = index_for(store)
    assert_ranks_as_fts(index, store, '"kestrel" OR "osprey"')
    assert len(index.ranking(store, '"kestrel" OR "osprey"', 10) or []) == 2
    page.write_text("# Notes\n\n## One\n\nfalcon moved.\n\n## Three\n\nheron came.\n")
    fresh_brain.sync(tmp_path / "workspace", embed=False)
    assert index.ranking(store, '"kestrel" OR "osprey"', 10) == []
    assert len(index.ranking(store, '"falcon" OR "heron"', 10) or []) == 2
    assert_ranks_as_fts(index, store, '"falcon" OR "heron" OR "moved"')


def test_the_index_follows_maintains_merge_of_two_nodes_into_one(store: Store) -> None:
    import orjson

    from brain.graph.maintain import MaintainOptions, maintain
    from tests.brain.graph.maintain.helpers import T0, G, iso_at

    g = G(store, {})
    g.node("a", vector=1)
    g.node("b", vector=2)
    g.node("lone", vector=3)
    index = index_for(store)
    assert [n for n, _ in index.ranking(store, '"b"', 10) or []] == [g.ids["b"]]
    for i in range(5):
        fired = [[g.ids["a"], 1.0], [g.ids["b"], 0.5]] + ([[g.ids["lone"], 0.2]] if i else [])
        body = {"seeds": [], "steps": [], "fired": fired, "inhibited": [], "timings": {}}
        store.execute(
            "INSERT INTO traces (trace_id, query, body, created_at) VALUES (?, 'q', ?, ?)",
            (f"tr_{i}", orjson.dumps(body).decode(), iso_at(T0)),
        )
    maintain(store, tasks=["merge"], options=MaintainOptions(cofire_traces=5), now=T0)
    assert not g.exists("b")
    # "b" is now in a's text (merged), the deleted node is gone.
    assert [n for n, _ in index.ranking(store, '"b"', 10) or []] == [g.ids["a"]]
    assert_ranks_as_fts(index, store, '"text" OR "b" OR "lone"')
