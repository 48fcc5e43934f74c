"""brain.recall.search.files: grep inside payload files, as visible as their messages."""

from __future__ import annotations

import base64
from pathlib import Path

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain import Brain, BrainConfig, InvalidInput, MessageIn, NotFound
from brain.payloads import filetext
from brain.payloads.filetext import indexable_text, text_chunks
from brain.recall.search import GrepOptions
from brain.store.schema import MIGRATIONS
from brain.vectors.embedders import HashEmbedder


def _log(word: str, lines: int = 600) -> str:
    """A tool output well over the payload threshold with ``word`` near its end only."""
    body = [f"{i:05d} INFO worker step completed normally" for i in range(lines)]
    body.insert(lines - 3, f"{lines:05d} ERROR the {word} subsystem refused the request")
    return "\n".join(body)


def _tool_result(brain: Brain, session: str, word: str, call: str, **kw: str) -> str:
    """Ingest a tool call and its large result; return the payload's file id."""
    brain.ingest(
        session,
        [
            MessageIn(
                "assistant",
                "",
                client_id=f"{call}-call",
                tool_calls=[
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "run", "arguments": "{}"},
                    }
                ],
                **kw,
            ),
            MessageIn("tool", _log(word), client_id=f"{call}-out", tool_call_id=call, **kw),
        ],
    )
    file_id = brain.store.scalar(
        "SELECT f.file_id FROM large_files f JOIN messages m ON m.id = f.message_id "
        "WHERE m.client_id = ?",
        (f"{call}-out",),
    )
    assert isinstance(file_id, str)
    return file_id


def test_a_word_only_inside_a_payload_is_found_with_scope_files_and_not_messages(
    fresh_brain: Brain,
) -> None:
    file_id = _tool_result(fresh_brain, "s", "zanzibarite", "c1")
    assert fresh_brain.grep(GrepOptions("zanzibarite", scope="messages"), session="s") == []
    assert fresh_brain.grep(GrepOptions("zanzibarite"), session="s") == []  # both: no files
    hits = fresh_brain.grep(GrepOptions("zanzibarite", scope="files"), session="s")
    assert [(h.kind, h.id, h.session) for h in hits] == [("file", file_id, "s")]
    assert "[zanzibarite]" in hits[0].snippet
    assert "ERROR the [zanzibarite] subsystem" in hits[0].snippet


def test_a_file_hit_id_is_what_describe_takes(fresh_brain: Brain) -> None:
    _tool_result(fresh_brain, "s", "zanzibarite", "c1")
    hit = fresh_brain.grep(GrepOptions("zanzibarite", scope="files"), session="s")[0]
    described = fresh_brain.describe(hit.id, session="s")
    assert described["kind"] == "file"
    assert described["message_id"] == "c1-out"
    tail = fresh_brain.describe(hit.id, session="s", lines=(590, 601))
    assert "ERROR the zanzibarite subsystem" in tail["content"]


def test_full_text_over_files_stems_words_and_marks_them_in_the_snippet(
    fresh_brain: Brain,
) -> None:
    _tool_result(fresh_brain, "s", "refusing", "c1")
    hits = fresh_brain.grep(GrepOptions("refused request", scope="files"), session="s")
    assert len(hits) == 1
    assert "[refused]" in hits[0].snippet or "[request]" in hits[0].snippet


def test_file_search_is_scoped_to_the_session_or_session_key(fresh_brain: Brain) -> None:
    mine = _tool_result(fresh_brain, "s", "zanzibarite", "c1")
    theirs = _tool_result(fresh_brain, "t", "zanzibarite", "c2")
    fresh_brain.ingest("u", [MessageIn("user", "hello")], session_key="k")
    keyed = _tool_result(fresh_brain, "u", "zanzibarite", "c3")
    for mode in ("full_text", "regex"):
        options = GrepOptions("zanzibarite", mode=mode, scope="files")  # type: ignore[arg-type]
        assert [h.id for h in fresh_brain.grep(options, session="s")] == [mine]
        assert [h.id for h in fresh_brain.grep(options, session_key="k")] == [keyed]
        assert {h.id for h in fresh_brain.grep(options)} == {mine, theirs, keyed}
        with pytest.raises(NotFound, match="no session 'nobody'"):
            fresh_brain.grep(options, session="nobody")


def test_suppressing_the_owning_message_hides_its_file(fresh_brain: Brain) -> None:
    _tool_result(fresh_brain, "s", "zanzibarite", "c1")
    fresh_brain.suppress(["c1-out"], session="s")
    for mode in ("full_text", "regex"):
        options = GrepOptions("zanzibarite", mode=mode, scope="files")  # type: ignore[arg-type]
        assert fresh_brain.grep(options, session="s") == []
    fresh_brain.suppress(["c1-out"], session="s", suppressed=False)
    assert fresh_brain.grep(GrepOptions("zanzibarite", scope="files"), session="s")


def test_since_and_before_bound_files_by_when_their_message_was_written(
    fresh_brain: Brain,
) -> None:
    old = _tool_result(fresh_brain, "s", "zanzibarite", "c1", created_at="2026-01-01T10:00:00Z")
    new = _tool_result(fresh_brain, "s", "zanzibarite", "c2", created_at="2026-03-01T10:00:00Z")
    for mode in ("full_text", "regex"):
        base = GrepOptions("zanzibarite", mode=mode, scope="files")  # type: ignore[arg-type]
        since = GrepOptions(base.query, base.mode, base.scope, since="2026-02-01T00:00:00Z")
        before = GrepOptions(base.query, base.mode, base.scope, before="2026-02-01T00:00:00Z")
        assert [h.id for h in fresh_brain.grep(since, session="s")] == [new]
        assert [h.id for h in fresh_brain.grep(before, session="s")] == [old]
        assert fresh_brain.grep(before, session="s")[0].created_at.startswith("2026-01-01")


def test_regex_over_files_finds_the_newest_first_with_a_marked_snippet(
    fresh_brain: Brain,
) -> None:
    first = _tool_result(fresh_brain, "s", "zanzibarite", "c1")
    second = _tool_result(fresh_brain, "s", "zanzibarium", "c2")
    hits = fresh_brain.grep(GrepOptions(r"zanzibar\w+", mode="regex", scope="files"))
    assert [h.id for h in hits] == [second, first]
    assert "[zanzibarium]" in hits[0].snippet


def test_a_pathological_regex_over_files_is_an_error_not_a_hang(fresh_brain: Brain) -> None:
    fresh_brain.ingest("s", [MessageIn("tool", "out: " + "a" * 20_000 + "b", tool_call_id="c1")])
    with pytest.raises(InvalidInput, match="too long"):
        fresh_brain.grep(GrepOptions(r"(a|aa)+$", mode="regex", scope="files"), session="s")


def test_a_word_past_the_indexed_head_is_found_by_regex_not_full_text(
    fresh_brain: Brain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filetext, "INDEX_BYTES", 1024)
    file_id = _tool_result(fresh_brain, "s", "zanzibarite", "c1")
    assert fresh_brain.grep(GrepOptions("zanzibarite", scope="files")) == []
    hits = fresh_brain.grep(GrepOptions("zanzibarite", mode="regex", scope="files"))
    assert [h.id for h in hits] == [file_id]


def test_a_json_payload_is_searchable_across_its_escaped_newlines(fresh_brain: Brain) -> None:
    blocks = [{"type": "text", "text": f"row {i}\nvalue ok"} for i in range(400)]
    blocks.append({"type": "text", "text": "summary\nzanzibarite found"})
    fresh_brain.ingest(
        "s",
        [
            MessageIn(
                "user",
                [{"type": "tool_result", "tool_use_id": "t1", "content": blocks}],
                client_id="u1",
            )
        ],
    )
    encoding = fresh_brain.store.scalar("SELECT encoding FROM large_files")
    assert encoding == "json"
    hits = fresh_brain.grep(GrepOptions("zanzibarite", scope="files"), session="s")
    assert len(hits) == 1
    assert "[zanzibarite]" in hits[0].snippet


def test_images_and_base64_data_are_not_indexed_as_words() -> None:
    data = base64.b64encode(bytes(range(256)) * 64)
    assert indexable_text(data, "utf8", "image") is None
    assert indexable_text(data, "utf8", "file") is None
    assert indexable_text(b"\x89PNG\r\n\x1a\n\x00\x00" * 100, "utf8", "file") is None
    assert indexable_text(b"plain words here", "utf8", "file") == "plain words here"


def test_json_escapes_become_separators_and_characters() -> None:
    raw = rb'["a\nb", "caf\u00e9", "smile \ud83d\ude00 ok"]'
    text = indexable_text(raw, "json", "tool_result")
    assert text is not None
    assert "a b" in text
    assert "café" in text
    assert "smile" in text
    text.encode()  # no lone surrogate reaches SQLite


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=600), chunk=st.integers(1, 64))
def test_chunks_of_a_file_concatenate_to_its_decoded_text(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, chunk: int
) -> None:
    files_dir = tmp_path_factory.mktemp("files")
    (files_dir / "file_0123456789abcdef").write_bytes(data)
    pieces = list(text_chunks(files_dir, "file_0123456789abcdef", chunk))
    assert "".join(pieces) == data.decode("utf-8", errors="replace")
    assert all(pieces)


def test_semantic_and_hybrid_over_files_rank_by_the_owning_message(db_path: Path) -> None:
    brain = Brain(db_path, BrainConfig(large_payload_tokens=1_000))
    brain.embedder = HashEmbedder(64)
    file_id = _tool_result(brain, "s", "zanzibarite", "c1")
    brain.ingest("s", [MessageIn("user", "short note about lunch", client_id="u1")])
    while brain.embed_pending(batch=8) > 0:
        pass
    semantic = brain.grep(
        GrepOptions("worker step completed", mode="semantic", scope="files"), session="s"
    )
    assert [(h.kind, h.id) for h in semantic] == [("file", file_id)]
    hybrid = brain.grep(GrepOptions("zanzibarite", mode="hybrid", scope="files"), session="s")
    assert [(h.kind, h.id) for h in hybrid] == [("file", file_id)]
    assert "[zanzibarite]" in hybrid[0].snippet
    brain.close()


def test_payloads_stored_before_the_file_index_are_found_after_upgrading(
    db_path: Path,
) -> None:
    brain = Brain(db_path, BrainConfig(large_payload_tokens=1_000))
    file_id = _tool_result(brain, "s", "zanzibarite", "c1")
    image = "data:image/png;base64," + base64.b64encode(bytes(range(256)) * 64).decode()
    brain.ingest("s", [MessageIn("user", [{"type": "image_url", "image_url": {"url": image}}])])
    brain.close()
    # As if from version 7: what V8 adds is dropped, then V8 runs as an upgrade runs it.
    conn = apsw.Connection(str(db_path))
    conn.execute("DROP TRIGGER large_files_index_delete")
    conn.execute("DROP TABLE files_fts")
    conn.execute("DROP TABLE files_index")
    conn.execute(MIGRATIONS[7])
    conn.close()
    again = Brain(db_path, BrainConfig(large_payload_tokens=1_000))
    states = dict(again.store.execute("SELECT state, count(*) FROM files_index GROUP BY state"))
    assert states == {"text": 1, "skipped": 1}
    hits = again.grep(GrepOptions("zanzibarite", scope="files"), session="s")
    assert [h.id for h in hits] == [file_id]
    again.close()


def test_a_payload_file_missing_on_disk_is_marked_skipped_at_upgrade(db_path: Path) -> None:
    brain = Brain(db_path, BrainConfig(large_payload_tokens=1_000))
    file_id = _tool_result(brain, "s", "zanzibarite", "c1")
    brain.store.execute("UPDATE files_index SET state = 'pending'")
    brain.close()
    (db_path.with_name(db_path.name + "-files") / file_id).unlink()
    again = Brain(db_path, BrainConfig(large_payload_tokens=1_000))
    assert again.store.scalar("SELECT state FROM files_index") == "skipped"
    assert again.grep(GrepOptions("zanzibarite", mode="regex", scope="files")) == []
    again.close()
