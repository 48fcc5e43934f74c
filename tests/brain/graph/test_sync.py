"""Workspace sync: heading-aware chunks with line ranges, incremental by content hash."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain import Brain
from brain.errors import InvalidInput
from brain.graph import sync as sync_module
from brain.graph.nodes import EdgeWrite, bump_epoch, write_edges
from brain.graph.sync import SEQUENCE_WEIGHT, SyncReport, chunk_markdown, split_lines

MEMORY = """\
Notes kept by the agent.

# Deploys
Deploys go through the staging cluster kestrel before production.

## Rollback
Roll back with the previous image tag.

# Coffee
The coffee machine is on the third floor.
"""


def _workspace(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _chunks(brain: Brain, source: str | None = None) -> list[tuple[str, str, int, int, str]]:
    """(node id, text, line start, line end, authority) of chunk nodes, in line order."""
    rows = brain.store.execute(
        "SELECT node_id, content, line_start, line_end, authority, source FROM nodes "
        "WHERE kind = 'chunk' ORDER BY source, line_start"
    )
    return [
        (str(r[0]), str(r[1]), int(r[2]), int(r[3]), str(r[4]))
        for r in rows
        if source is None or r[5] == source
    ]


# -- chunking --------------------------------------------------------------------


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


# -- syncing ---------------------------------------------------------------------


def test_authority_follows_the_file_name_and_can_be_overridden(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = _workspace(
        tmp_path / "ws",
        {
            "SOUL.md": "# Soul\nBe kind.\n",
            "AGENTS.md": "# Agents\nAsk first.\n",
            "USER.md": "# User\nLikes tea.\n",
            "TOOLS.md": "# Tools\nUse rg.\n",
            "MEMORY.md": "# Memory\nKestrel.\n",
            "memory/2024-05-01.md": "# Day\nSaw a heron.\n",
            "notes/extra.md": "# Extra\nLoose note.\n",
            "ignored.md": "# Not read\n",
        },
    )
    report = fresh_brain.sync(root, ["notes"])
    levels = {
        str(r[0]): str(r[1])
        for r in fresh_brain.store.execute("SELECT source, authority FROM nodes WHERE kind='chunk'")
    }
    assert levels == {
        "SOUL.md": "constitutional",
        "AGENTS.md": "constitutional",
        "USER.md": "canonical",
        "TOOLS.md": "canonical",
        "MEMORY.md": "canonical",
        "memory/2024-05-01.md": "overlay",
        "notes/extra.md": "overlay",
    }
    assert (report.files, report.added, report.nodes) == (7, 7, 7)
    again = fresh_brain.sync(root, ["notes"], {"USER.md": "constitutional"})
    assert (again.added, again.moved, again.kept) == (0, 1, 6)
    user = fresh_brain.store.scalar("SELECT authority FROM nodes WHERE source = 'USER.md'")
    assert user == "constitutional"


def test_an_unknown_authority_or_a_missing_path_is_refused(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": "# M\nx\n"})
    with pytest.raises(InvalidInput):
        fresh_brain.sync(root, authority={"MEMORY.md": "sacred"})
    with pytest.raises(InvalidInput):
        fresh_brain.sync(root, ["nope.md"])
    with pytest.raises(InvalidInput):
        fresh_brain.sync(tmp_path / "missing")


def test_a_second_sync_of_unchanged_files_changes_nothing(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": MEMORY, "SOUL.md": "# Soul\nBe kind.\n"})
    first = fresh_brain.sync(root)
    assert (first.added, first.embedded, first.pending) == (5, 5, 0)
    before = _chunks(fresh_brain)
    edges = list(fresh_brain.store.execute("SELECT source, target, weight FROM edges"))
    epoch = fresh_brain.store.scalar("SELECT value FROM meta WHERE key = 'graph_epoch'")
    again = fresh_brain.sync(root)
    assert (again.added, again.kept, again.moved, again.removed, again.edges) == (0, 5, 0, 0, 0)
    assert _chunks(fresh_brain) == before
    assert list(fresh_brain.store.execute("SELECT source, target, weight FROM edges")) == edges
    assert fresh_brain.store.scalar("SELECT value FROM meta WHERE key = 'graph_epoch'") == epoch


def test_editing_one_section_replaces_only_that_chunks_node(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    fresh_brain.sync(root)
    before = _chunks(fresh_brain)
    (root / "MEMORY.md").write_text(MEMORY.replace("previous image tag", "last good image tag"))
    report = fresh_brain.sync(root)
    after = _chunks(fresh_brain)
    assert (report.added, report.kept, report.removed) == (1, 3, 1)
    assert [a[0] == b[0] for a, b in zip(before, after, strict=True)] == [True, True, False, True]
    assert "last good image tag" in after[2][1]
    queued_or_stored = fresh_brain.store.scalar(
        "SELECT count(*) FROM vectors v JOIN nodes n ON n.id = v.row_id "
        "WHERE v.kind = 'node' AND n.node_id = ?",
        (after[2][0],),
    )
    assert queued_or_stored == 1


def test_a_chunk_that_moves_keeps_its_node_with_the_new_lines(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    fresh_brain.sync(root)
    coffee = _chunks(fresh_brain)[-1]
    (root / "MEMORY.md").write_text(MEMORY.replace("# Coffee", "# Tea\nGreen tea.\n\n# Coffee"))
    report = fresh_brain.sync(root)
    assert (report.added, report.kept, report.moved, report.removed) == (1, 3, 1, 0)
    moved = [c for c in _chunks(fresh_brain) if c[0] == coffee[0]]
    assert [(c[2], c[3]) for c in moved] == [(coffee[2] + 3, coffee[3] + 3)]


def test_deleting_a_file_removes_its_nodes_edges_and_vectors(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = _workspace(
        tmp_path / "ws",
        {"MEMORY.md": MEMORY, "memory/day.md": "# Day\nSaw a heron.\n\n# Night\nOwl."},
    )
    fresh_brain.sync(root)
    store = fresh_brain.store
    day_rows = [
        int(r[0]) for r in store.execute("SELECT id FROM nodes WHERE source = 'memory/day.md'")
    ]
    assert len(day_rows) == 2
    (root / "memory" / "day.md").unlink()
    report = fresh_brain.sync(root)
    assert (report.removed, report.nodes) == (2, 4)
    assert store.scalar("SELECT count(*) FROM nodes WHERE source = 'memory/day.md'") == 0
    for table, column in (("vectors", "row_id"), ("embed_queue", "row_id")):
        ghosts = store.scalar(
            f"SELECT count(*) FROM {table} WHERE kind = 'node' AND {column} IN (?, ?)",
            tuple(day_rows),
        )
        assert ghosts == 0
    assert (
        store.scalar(
            "SELECT count(*) FROM edges WHERE source IN (?, ?) OR target IN (?, ?)",
            (*day_rows, *day_rows),
        )
        == 0
    )
    # The graph's mirror and vector index follow: a query never returns a deleted node.
    result = fresh_brain.query("heron owl night", record=False)
    assert all(f.source != "memory/day.md" for f in result.fired)


def test_consecutive_chunks_of_a_file_are_linked_by_weak_sequence_edges(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    fresh_brain.sync(root)

    def sequence() -> set[tuple[int, int]]:
        lines = {
            int(r[0]): int(r[1])
            for r in fresh_brain.store.execute(
                "SELECT id, line_start FROM nodes WHERE kind='chunk'"
            )
        }
        pairs = set()
        for source, target, weight in fresh_brain.store.execute(
            "SELECT source, target, weight FROM edges WHERE kind = 'sequence'"
        ):
            assert weight == pytest.approx(SEQUENCE_WEIGHT)
            pairs.add((lines[source], lines[target]))
        return pairs

    assert sequence() == {(1, 3), (3, 1), (3, 6), (6, 3), (6, 9), (9, 6)}
    # Removing the middle sections joins their neighbours.
    (root / "MEMORY.md").write_text(
        "Notes kept by the agent.\n\n# Coffee\nThe coffee machine is on the third floor.\n"
    )
    fresh_brain.sync(root)
    assert sequence() == {(1, 3), (3, 1)}


def test_a_learned_edge_between_neighbours_survives_a_resync(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    fresh_brain.sync(root)
    store = fresh_brain.store
    a, b = (int(r[0]) for r in store.execute("SELECT id FROM nodes ORDER BY line_start LIMIT 2"))
    with store.transaction():
        write_edges(store, [EdgeWrite(a, b, 0.9, "sequence")])
        bump_epoch(store)
    (root / "MEMORY.md").write_text(MEMORY + "\n# More\nAnother section.\n")
    fresh_brain.sync(root)
    weight = store.scalar("SELECT weight FROM edges WHERE source = ? AND target = ?", (a, b))
    assert weight == pytest.approx(0.9)


def test_a_synced_chunk_is_found_by_a_query(fresh_brain: Brain, tmp_path: Path) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    fresh_brain.sync(root)
    result = fresh_brain.query("where is the coffee machine?", record=False)
    assert result.fired[0].source == "MEMORY.md"
    assert result.fired[0].lines == (9, 10)
    assert "third floor" in result.context


def test_two_workspaces_with_the_same_file_names_keep_their_own_chunks(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    one = _workspace(tmp_path / "one", {"MEMORY.md": MEMORY})
    two = _workspace(tmp_path / "two", {"MEMORY.md": MEMORY})
    fresh_brain.sync(one)
    report = fresh_brain.sync(two)
    assert (report.added, report.removed) == (4, 0)
    (one / "MEMORY.md").unlink()
    assert fresh_brain.sync(one).removed == 4
    assert fresh_brain.sync(two).kept == 4


# -- which files are read ------------------------------------------------------------

SECRET = "sk-never-index-this-4f1c"


def _refused(report: SyncReport) -> set[tuple[str, str]]:
    return {(r.path, r.reason) for r in report.refused}


def _stored_text(brain: Brain) -> str:
    return "\n".join(str(r[0]) for r in brain.store.execute("SELECT content FROM nodes"))


def test_files_and_paths_leading_out_of_the_workspace_are_refused_and_never_read(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": MEMORY, "memory/ok.md": "# Ok\nfine\n"})
    outside = _workspace(tmp_path / "outside", {"secret.md": f"# Keys\n{SECRET}\n"})
    (root / "memory" / "leak.md").symlink_to(outside / "secret.md")
    (root / "memory" / "env.md").symlink_to("/proc/self/environ")
    (root / "linked").symlink_to(outside)
    report = fresh_brain.sync(
        root,
        [
            "../outside/secret.md",
            str(outside / "secret.md"),
            "~/secret.md",
            "linked",
            "memory/../../outside",
            "../../../../../../etc/shadow",
        ],
    )
    assert SECRET not in _stored_text(fresh_brain)
    assert "PATH=" not in _stored_text(fresh_brain)
    assert _refused(report) == {
        ("memory/leak.md", "outside_workspace"),
        ("memory/env.md", "outside_workspace"),
        ("../outside/secret.md", "outside_workspace"),
        (str(outside / "secret.md"), "absolute_path"),
        ("~/secret.md", "absolute_path"),
        ("linked", "outside_workspace"),
        ("memory/../../outside", "outside_workspace"),
        ("../../../../../../etc/shadow", "outside_workspace"),
    }
    assert {str(r[0]) for r in fresh_brain.store.execute("SELECT DISTINCT source FROM nodes")} == {
        "MEMORY.md",
        "memory/ok.md",
    }
    assert report.files == 2


def test_a_memory_directory_linked_out_of_the_workspace_is_refused_whole(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    outside = _workspace(tmp_path / "outside", {"secret.md": f"# Keys\n{SECRET}\n"})
    (root / "memory").symlink_to(outside)
    report = fresh_brain.sync(root)
    assert _refused(report) == {("memory", "outside_workspace")}
    assert SECRET not in _stored_text(fresh_brain)


def test_symlinks_and_dotdot_paths_that_stay_inside_are_read_once_under_the_real_name(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = _workspace(
        tmp_path / "ws",
        {"MEMORY.md": MEMORY, "notes/a.md": "# A\nalpha\n", "notes/sub/b.md": "# B\n"},
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    # Through a link that lives outside, yet ends inside the workspace: allowed.
    (outside / "hop").symlink_to(root / "MEMORY.md")
    (root / "memory").mkdir()
    (root / "memory" / "via.md").symlink_to(outside / "hop")
    (root / "memory" / "alias.md").symlink_to("../notes/a.md")
    # A symlinked directory is not entered by the walk of an extra directory.
    (root / "notes" / "loop").symlink_to(root / "notes")
    report = fresh_brain.sync(root, ["memory/../notes", "notes/../notes/a.md"])
    assert report.refused == ()
    sources = sorted(str(r[0]) for r in fresh_brain.store.execute("SELECT source FROM nodes"))
    assert sorted(set(sources)) == ["MEMORY.md", "notes/a.md", "notes/sub/b.md"]
    assert report.files == 3


def test_a_fifo_a_directory_and_a_dangling_link_named_like_markdown_are_refused(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": MEMORY, "memory/ok.md": "# Ok\n"})
    os.mkfifo(root / "memory" / "pipe.md")
    os.mkfifo(root / "TOOLS.md")
    (root / "memory" / "dir.md").mkdir()
    (root / "memory" / "gone.md").symlink_to("missing.md")
    os.mkfifo(root / "extra-pipe")
    report = fresh_brain.sync(root, ["extra-pipe"])
    assert _refused(report) == {
        ("TOOLS.md", "not_regular"),
        ("memory/dir.md", "not_regular"),
        ("memory/gone.md", "vanished"),
        ("memory/pipe.md", "not_regular"),
        ("extra-pipe", "not_regular"),
    }
    assert report.files == 2


def test_a_symlink_loop_is_refused_as_unreadable(fresh_brain: Brain, tmp_path: Path) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": MEMORY, "memory/ok.md": "# Ok\n"})
    (root / "memory" / "loop.md").symlink_to("loop.md")
    report = fresh_brain.sync(root)
    assert _refused(report) == {("memory/loop.md", "unreadable")}
    assert report.files == 2


def test_a_file_that_vanishes_after_it_was_listed_is_skipped_and_reported(
    fresh_brain: Brain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": MEMORY, "memory/day.md": "# Day\nheron\n"})
    listing = sync_module.workspace_paths

    def list_then_delete(*args: Any, **kwargs: Any) -> Any:
        listed = listing(*args, **kwargs)
        (root / "memory" / "day.md").unlink()
        return listed

    monkeypatch.setattr(sync_module, "workspace_paths", list_then_delete)
    report = fresh_brain.sync(root)
    assert _refused(report) == {("memory/day.md", "vanished")}
    assert (report.files, report.nodes) == (1, 4)


def test_a_file_swapped_for_a_link_out_after_it_was_listed_is_not_read(
    fresh_brain: Brain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": MEMORY, "memory/day.md": "# Day\nheron\n"})
    outside = _workspace(tmp_path / "outside", {"secret.md": f"# Keys\n{SECRET}\n"})
    fresh_brain.sync(root)
    listing = sync_module.workspace_paths

    def list_then_swap(*args: Any, **kwargs: Any) -> Any:
        listed = listing(*args, **kwargs)
        (root / "memory" / "day.md").unlink()
        (root / "memory" / "day.md").symlink_to(outside / "secret.md")
        return listed

    monkeypatch.setattr(sync_module, "workspace_paths", list_then_swap)
    report = fresh_brain.sync(root)
    assert _refused(report) == {("memory/day.md", "outside_workspace")}
    assert SECRET not in _stored_text(fresh_brain)
    # The file's old chunks went with it: the workspace holds what this sync read.
    assert report.removed == 1


def test_a_workspace_under_proc_is_refused(fresh_brain: Brain) -> None:
    with pytest.raises(InvalidInput, match="/proc"):
        fresh_brain.sync("/proc/self")


def test_an_extra_path_with_a_nul_character_is_invalid_input(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = _workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    with pytest.raises(InvalidInput, match="NUL") as bad:
        fresh_brain.sync(root, ["notes\0.md"])
    assert bad.value.field == "paths"


def test_a_file_that_is_not_utf8_is_read_with_replacement_characters(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "MEMORY.md").write_bytes(b"# Bytes\ncaf\xe9 \xff\n")
    report = fresh_brain.sync(root)
    assert (report.files, report.refused) == (1, ())
    assert "caf\ufffd" in _stored_text(fresh_brain)
