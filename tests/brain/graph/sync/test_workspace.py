"""Reading a workspace: authority by file name, and every path leading out refused unread."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from brain import Brain
from brain.errors import InvalidInput
from brain.graph.sync import workspace as sync_module
from tests.brain.graph.sync.helpers import MEMORY, make_workspace, refused, stored_text

SECRET = "sk-never-index-this-4f1c"


def test_authority_follows_the_file_name_and_can_be_overridden(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = make_workspace(
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
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\nx\n"})
    with pytest.raises(InvalidInput):
        fresh_brain.sync(root, authority={"MEMORY.md": "sacred"})
    with pytest.raises(InvalidInput):
        fresh_brain.sync(root, ["nope.md"])
    with pytest.raises(InvalidInput):
        fresh_brain.sync(tmp_path / "missing")


def test_files_and_paths_leading_out_of_the_workspace_are_refused_and_never_read(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY, "memory/ok.md": "# Ok\nfine\n"})
    outside = make_workspace(tmp_path / "outside", {"secret.md": f"# Keys\n{SECRET}\n"})
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
    assert SECRET not in stored_text(fresh_brain)
    assert "PATH=" not in stored_text(fresh_brain)
    assert refused(report) == {
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
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    outside = make_workspace(tmp_path / "outside", {"secret.md": f"# Keys\n{SECRET}\n"})
    (root / "memory").symlink_to(outside)
    report = fresh_brain.sync(root)
    assert refused(report) == {("memory", "outside_workspace")}
    assert SECRET not in stored_text(fresh_brain)


def test_symlinks_and_dotdot_paths_that_stay_inside_are_read_once_under_the_real_name(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = make_workspace(
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
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY, "memory/ok.md": "# Ok\n"})
    os.mkfifo(root / "memory" / "pipe.md")
    os.mkfifo(root / "TOOLS.md")
    (root / "memory" / "dir.md").mkdir()
    (root / "memory" / "gone.md").symlink_to("missing.md")
    os.mkfifo(root / "extra-pipe")
    report = fresh_brain.sync(root, ["extra-pipe"])
    assert refused(report) == {
        ("TOOLS.md", "not_regular"),
        ("memory/dir.md", "not_regular"),
        ("memory/gone.md", "vanished"),
        ("memory/pipe.md", "not_regular"),
        ("extra-pipe", "not_regular"),
    }
    assert report.files == 2


def test_a_symlink_loop_is_refused_as_unreadable(fresh_brain: Brain, tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY, "memory/ok.md": "# Ok\n"})
    (root / "memory" / "loop.md").symlink_to("loop.md")
    report = fresh_brain.sync(root)
    assert refused(report) == {("memory/loop.md", "unreadable")}
    assert report.files == 2


def test_a_file_that_vanishes_after_it_was_listed_is_skipped_and_reported(
    fresh_brain: Brain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY, "memory/day.md": "# Day\nheron\n"})
    listing = sync_module.workspace_paths

    def list_then_delete(*args: Any, **kwargs: Any) -> Any:
        listed = listing(*args, **kwargs)
        (root / "memory" / "day.md").unlink()
        return listed

    monkeypatch.setattr(sync_module, "workspace_paths", list_then_delete)
    report = fresh_brain.sync(root)
    assert refused(report) == {("memory/day.md", "vanished")}
    assert (report.files, report.nodes) == (1, 4)


def test_a_file_swapped_for_a_link_out_after_it_was_listed_is_not_read(
    fresh_brain: Brain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY, "memory/day.md": "# Day\nheron\n"})
    outside = make_workspace(tmp_path / "outside", {"secret.md": f"# Keys\n{SECRET}\n"})
    fresh_brain.sync(root)
    listing = sync_module.workspace_paths

    def list_then_swap(*args: Any, **kwargs: Any) -> Any:
        listed = listing(*args, **kwargs)
        (root / "memory" / "day.md").unlink()
        (root / "memory" / "day.md").symlink_to(outside / "secret.md")
        return listed

    monkeypatch.setattr(sync_module, "workspace_paths", list_then_swap)
    report = fresh_brain.sync(root)
    assert refused(report) == {("memory/day.md", "outside_workspace")}
    assert SECRET not in stored_text(fresh_brain)
    # The file's old chunks went with it: the workspace holds what this sync read.
    assert report.removed == 1


def test_a_workspace_under_proc_is_refused(fresh_brain: Brain) -> None:
    with pytest.raises(InvalidInput, match="/proc"):
        fresh_brain.sync("/proc/self")


def test_an_extra_path_with_a_nul_character_is_invalid_input(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
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
    assert "caf\ufffd" in stored_text(fresh_brain)
