"""brain.payloads.files: payload files by generated id only, durable writes, stray detection."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from brain import NotFound, PayloadMissing, StorageError
from brain.lcm.content import new_file_id
from brain.payloads.files import (
    file_path,
    read_file,
    read_stored_file,
    remove_file,
    stray_files,
    write_file,
)

HOUR = 3600.0

NOT_GENERATED_IDS = [
    "../secret",
    "../../etc/passwd",
    "/etc/passwd",
    "file_XYZ",
    "file_0123456789ABCDEF",  # upper case is not what new_file_id makes
    "file_0123456789abcde",  # 15 hex
    "file_0123456789abcdef0",  # 17 hex
    "file_0123456789abcdef/../../secret",
    "file_0123456789abcdef\n",
    " file_0123456789abcdef",
    "",
    ".",
    "..",
]


@pytest.fixture
def files_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "brain.db-files"
    directory.mkdir()
    return directory


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def _age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_a_written_file_reads_back_byte_for_byte(files_dir: Path) -> None:
    file_id = new_file_id()
    data = bytes(range(256)) * 100
    path = write_file(files_dir, file_id, data)
    assert path == files_dir / file_id
    assert read_file(files_dir, file_id) == data
    assert sorted(os.listdir(files_dir)) == [file_id]  # no temporary file left behind


def test_rewriting_a_file_replaces_it_whole(files_dir: Path) -> None:
    file_id = new_file_id()
    write_file(files_dir, file_id, b"a much longer first version")
    write_file(files_dir, file_id, b"short")
    assert read_file(files_dir, file_id) == b"short"


def test_payload_files_are_private_to_the_owner(files_dir: Path) -> None:
    path = write_file(files_dir, new_file_id(), b"secret")
    assert path.stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("bad_id", NOT_GENERATED_IDS)
def test_ids_that_were_not_generated_are_refused_without_touching_the_filesystem(
    tmp_path: Path, files_dir: Path, bad_id: str
) -> None:
    (tmp_path / "secret").write_bytes(b"top secret")
    before = _snapshot(tmp_path)

    with pytest.raises(NotFound):
        file_path(files_dir, bad_id)
    with pytest.raises(NotFound):
        read_file(files_dir, bad_id)
    with pytest.raises(NotFound):
        write_file(files_dir, bad_id, b"overwrite attempt")
    with pytest.raises(NotFound):
        remove_file(files_dir, bad_id)

    assert _snapshot(tmp_path) == before


def test_refused_ids_are_reported_in_the_error(files_dir: Path) -> None:
    with pytest.raises(NotFound) as err:
        read_file(files_dir, "../etc/passwd")
    assert err.value.data == {"file_id": "../etc/passwd"}


def test_reading_a_generated_id_with_no_file_is_not_found(files_dir: Path) -> None:
    file_id = new_file_id()
    with pytest.raises(NotFound) as err:
        read_file(files_dir, file_id)
    assert err.value.data == {"file_id": file_id}


def test_removing_a_file_deletes_it_and_removing_again_is_harmless(files_dir: Path) -> None:
    file_id = new_file_id()
    write_file(files_dir, file_id, b"x")
    remove_file(files_dir, file_id)
    remove_file(files_dir, file_id)
    assert os.listdir(files_dir) == []


def test_stray_files_are_unknown_payload_files_and_temp_files_older_than_the_grace(
    files_dir: Path,
) -> None:
    old_stray = write_file(files_dir, new_file_id(), b"no row names me")
    young_stray = write_file(files_dir, new_file_id(), b"row may be committing")
    known = write_file(files_dir, new_file_id(), b"a row names me")
    old_temp = files_dir / f".tmp-{new_file_id()}"
    old_temp.write_bytes(b"half written")
    unrelated = files_dir / "notes.txt"
    unrelated.write_bytes(b"not ours")
    for path in (old_stray, known, old_temp, unrelated):
        _age(path, 2 * HOUR)

    strays = stray_files(files_dir, {known.name}, older_than_s=HOUR)

    assert sorted(strays) == sorted([old_stray, old_temp])
    assert young_stray.exists()  # listing never deletes


def test_stray_files_of_a_missing_directory_is_empty(tmp_path: Path) -> None:
    assert stray_files(tmp_path / "absent", set(), older_than_s=0) == []


def test_a_write_after_the_directory_was_removed_makes_it_again(files_dir: Path) -> None:
    files_dir.rmdir()
    file_id = new_file_id()
    write_file(files_dir, file_id, b"back")
    assert read_file(files_dir, file_id) == b"back"


def test_a_write_whose_database_directory_is_gone_fails_without_making_it(tmp_path: Path) -> None:
    files_dir = tmp_path / "gone" / "brain.db-files"
    with pytest.raises(StorageError):
        write_file(files_dir, new_file_id(), b"x")
    assert not (tmp_path / "gone").exists()


def test_a_stored_file_that_is_gone_is_payload_missing_naming_it(files_dir: Path) -> None:
    file_id = new_file_id()
    with pytest.raises(PayloadMissing) as err:
        read_stored_file(files_dir, file_id)
    assert err.value.data == {"file_id": file_id, "missing_files": [file_id]}
    assert "run brain doctor" in err.value.message
