"""Opening files a request names: regular files only, inside the root, checked on the descriptor."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from brain.store import fileguard
from brain.store.fileguard import Refused, open_regular


def test_a_regular_file_inside_the_root_is_opened_and_read(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("hello")
    with open_regular(tmp_path / "a.md", tmp_path) as handle:
        assert handle.read() == b"hello"


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("/proc/self/environ", "system_path"),
        ("/dev/zero", "system_path"),
        ("/sys/kernel/mm", "system_path"),
    ],
)
def test_pseudo_filesystems_are_refused_even_through_a_symlink(
    tmp_path: Path, target: str, reason: str
) -> None:
    link = tmp_path / "link"
    link.symlink_to(target)
    for path in (Path(target), link):
        with pytest.raises(Refused) as refused:
            open_regular(path)
        assert refused.value.reason == reason


def test_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    # Opening a FIFO for reading with no writer would block: a refusal proves it was not.
    with pytest.raises(Refused) as refused:
        open_regular(tmp_path / "pipe", tmp_path)
    assert refused.value.reason == "not_regular"


def test_a_directory_swapped_for_a_link_after_the_check_is_caught_on_the_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ws"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "a.md").write_text("inside")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.md").write_text("secret")
    # The race: resolution saw notes/ as a directory; by the open it is a link out.
    monkeypatch.setattr(fileguard, "resolve", lambda path: path)
    (root / "notes" / "a.md").unlink()
    (root / "notes").rmdir()
    (root / "notes").symlink_to(outside)
    with pytest.raises(Refused) as refused:
        open_regular(root / "notes" / "a.md", root)
    assert refused.value.reason == "outside_workspace"
