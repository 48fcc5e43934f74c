"""brain.lcm.ingest: idempotent, atomic appends; FTS and payload files in the same transaction."""

from __future__ import annotations

import hashlib
import itertools
import os
from datetime import UTC, datetime
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import Conflict, InvalidInput, MessageIn, Store
from brain.lcm.ingest import MAX_SESSION_LEN, ingest
from brain.payloads.files import FILE_ID_RE
from tests.brain.strategies import conversations

_sessions = itertools.count()


class Boom(Exception):
    """Raised by tests to force a rollback."""


def _count(store: Store, table: str) -> int:
    return int(store.scalar(f"SELECT count(*) FROM {table}"))


def _fts(store: Store, query: str) -> list[int]:
    return [
        int(r[0])
        for r in store.execute(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (query,)
        )
    ]


def _user(content: str, client_id: str | None = None, **kw: str) -> MessageIn:
    return MessageIn("user", content, client_id=client_id, **kw)


def _big(word: str) -> str:
    return f"{word} " + "lorem ipsum dolor sit amet " * 40


# -- results and ids --------------------------------------------------------------------


def test_ingest_reports_new_messages_with_client_or_generated_ids_in_order(store: Store) -> None:
    first = ingest(store, "s", [_user("a", "c-1"), _user("b")])
    second = ingest(store, "s", [_user("c")])

    assert (first.session, first.ingested, first.duplicates) == ("s", 2, 0)
    assert [(m.id, m.seq, m.duplicate) for m in first.messages] == [
        ("c-1", 1, False),
        ("msg_2", 2, False),
    ]
    assert [(m.id, m.seq) for m in second.messages] == [("msg_3", 3)]
    rows = store.execute("SELECT seq, role, content, client_id FROM messages ORDER BY id")
    assert [tuple(r) for r in rows] == [
        (1, "user", "a", "c-1"),
        (2, "user", "b", None),
        (3, "user", "c", None),
    ]


def test_sessions_number_their_messages_independently(store: Store) -> None:
    ingest(store, "one", [_user("a"), _user("b")])
    result = ingest(store, "two", [_user("a")])
    assert [m.seq for m in result.messages] == [1]
    assert _count(store, "conversations") == 2


def test_replayed_client_id_is_reported_as_duplicate_and_not_stored(store: Store) -> None:
    ingest(store, "s", [_user("hello", "c-1")])
    replay = ingest(store, "s", [_user("hello", "c-1"), _user("new", "c-2")])

    assert (replay.ingested, replay.duplicates) == (1, 1)
    assert [(m.id, m.seq, m.duplicate) for m in replay.messages] == [
        ("c-1", 1, True),
        ("c-2", 2, False),
    ]
    assert _count(store, "messages") == 2


def test_a_client_id_repeated_inside_one_batch_is_stored_once(store: Store) -> None:
    result = ingest(store, "s", [_user("x", "dup"), _user("y", "other"), _user("x", "dup")])
    assert [m.duplicate for m in result.messages] == [False, False, True]
    assert result.messages[2].seq == 1
    assert _count(store, "messages") == 2


def test_a_client_id_reused_with_different_content_is_a_conflict_naming_it(
    store: Store,
) -> None:
    ingest(store, "s", [_user("hello", "c-1")])
    with pytest.raises(Conflict) as err:
        ingest(store, "s", [_user("new", "c-2"), _user("goodbye", "c-1")])
    assert err.value.data == {"id": "c-1", "seq": 1}
    assert "'c-1'" in err.value.message
    # Nothing of the call is stored, and the first message is as it was.
    assert _count(store, "messages") == 1
    assert store.scalar("SELECT content FROM messages") == "hello"


@pytest.mark.parametrize(
    "other",
    [
        MessageIn("assistant", "hello", client_id="c-1"),
        MessageIn("user", "hello", client_id="c-1", name="bob"),
        MessageIn("user", [{"type": "text", "text": "hello"}], client_id="c-1"),
    ],
)
def test_any_difference_but_the_id_is_a_conflict_even_inside_one_batch(
    store: Store, other: MessageIn
) -> None:
    with pytest.raises(Conflict):
        ingest(store, "s", [_user("hello", "c-1"), other])
    assert _count(store, "messages") == 0


def test_an_exact_replay_with_sdk_fields_is_a_duplicate(store: Store) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    msg = MessageIn(
        "assistant", None, client_id="a-1", tool_calls=[call], extra={"annotations": []}
    )
    ingest(store, "s", [msg])
    # Missing content replays content null: both mean "no content".
    again = MessageIn(
        "assistant",
        None,
        client_id="a-1",
        tool_calls=[call],
        extra={"annotations": []},
        content_absent=True,
    )
    assert ingest(store, "s", [msg, again]).duplicates == 2
    with pytest.raises(Conflict):
        ingest(store, "s", [MessageIn("assistant", None, client_id="a-1", tool_calls=[call])])


def test_the_same_client_id_in_another_session_is_a_new_message(store: Store) -> None:
    ingest(store, "one", [_user("x", "c-1")])
    result = ingest(store, "two", [_user("x", "c-1")])
    assert result.ingested == 1
    assert _count(store, "messages") == 2


def test_an_exact_replay_of_the_previous_message_without_id_is_a_duplicate(store: Store) -> None:
    first = ingest(store, "s", [_user("ok")])
    replay = ingest(store, "s", [_user("ok")])
    assert replay.duplicates == 1
    assert replay.messages[0].id == first.messages[0].id == "msg_1"
    assert _count(store, "messages") == 1


def test_an_exact_replay_of_a_message_that_had_an_id_reports_that_id(store: Store) -> None:
    ingest(store, "s", [_user("ok", "c-7")])
    replay = ingest(store, "s", [_user("ok")])
    assert [(m.id, m.duplicate) for m in replay.messages] == [("c-7", True)]


def test_the_same_content_with_a_different_created_at_is_not_a_replay(store: Store) -> None:
    ingest(store, "s", [_user("ok", created_at="2024-01-01T00:00:00Z")])
    again = ingest(store, "s", [_user("ok", created_at="2024-01-01T00:00:05Z")])
    assert again.ingested == 1
    assert _count(store, "messages") == 2


def test_the_same_content_from_another_role_is_not_a_replay(store: Store) -> None:
    ingest(store, "s", [_user("ok")])
    again = ingest(store, "s", [MessageIn("assistant", "ok")])
    assert again.ingested == 1


def test_a_repeat_of_an_earlier_message_that_is_not_the_previous_one_is_stored(
    store: Store,
) -> None:
    ingest(store, "s", [_user("ok"), _user("something else")])
    again = ingest(store, "s", [_user("ok")])
    assert again.ingested == 1
    assert [str(r[0]) for r in store.execute("SELECT content FROM messages ORDER BY seq")] == [
        "ok",
        "something else",
        "ok",
    ]


def test_a_repeated_message_with_a_new_client_id_is_stored(store: Store) -> None:
    ingest(store, "s", [_user("ok", "c-1")])
    again = ingest(store, "s", [_user("ok", "c-2")])
    assert again.ingested == 1


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=conversations(with_ids=True), cuts=st.lists(st.integers(0, 6), max_size=3))
def test_ingesting_any_sequence_twice_stores_nothing_the_second_time(
    store: Store, batch: list[MessageIn], cuts: list[int]
) -> None:
    session = f"s{next(_sessions)}"
    first = []
    bounds = [0, *sorted(set(cuts)), len(batch)]
    for start, end in itertools.pairwise(bounds):
        if start < end:
            first.extend(ingest(store, session, batch[start:end]).messages)
    rows_before = _count(store, "messages")
    parts_before = _count(store, "message_parts")
    files_before = sorted(os.listdir(store.files_dir))

    again = ingest(store, session, batch)

    assert again.ingested == 0
    assert again.duplicates == len(batch)
    assert [(m.id, m.seq) for m in again.messages] == [(m.id, m.seq) for m in first]
    assert _count(store, "messages") == rows_before
    assert _count(store, "message_parts") == parts_before
    assert sorted(os.listdir(store.files_dir)) == files_before


# -- sessions ---------------------------------------------------------------------------


@pytest.mark.parametrize("session", ["", "x" * (MAX_SESSION_LEN + 1)])
def test_an_empty_or_overlong_session_is_invalid_input(store: Store, session: str) -> None:
    with pytest.raises(InvalidInput) as err:
        ingest(store, session, [_user("hi")])
    assert err.value.field == "session"
    assert _count(store, "conversations") == 0


def test_an_empty_session_key_is_invalid_input(store: Store) -> None:
    with pytest.raises(InvalidInput) as err:
        ingest(store, "s", [_user("hi")], session_key="")
    assert err.value.field == "session_key"


def test_a_session_key_is_recorded_and_can_be_repeated(store: Store) -> None:
    ingest(store, "s", [_user("a")], session_key="agent:main")
    ingest(store, "s", [_user("b")], session_key="agent:main")
    ingest(store, "s", [_user("c")])  # no key given: the stored key stays
    assert store.scalar("SELECT session_key FROM conversations") == "agent:main"
    assert _count(store, "messages") == 3


def test_a_session_key_is_attached_to_a_session_that_had_none(store: Store) -> None:
    ingest(store, "s", [_user("a")])
    ingest(store, "s", [_user("b")], session_key="agent:main")
    assert store.scalar("SELECT session_key FROM conversations") == "agent:main"


def test_a_different_session_key_for_an_existing_session_is_a_conflict(store: Store) -> None:
    ingest(store, "s", [_user("a")], session_key="agent:one")
    with pytest.raises(Conflict) as err:
        ingest(store, "s", [_user("b")], session_key="agent:two")
    assert err.value.data == {"session": "s", "session_key": "agent:one"}
    assert _count(store, "messages") == 1
    assert store.scalar("SELECT session_key FROM conversations") == "agent:one"


# -- atomicity ------------------------------------------------------------------------------


def test_a_batch_with_one_invalid_message_stores_nothing_and_names_it(store: Store) -> None:
    batch = [
        _user("zero"),
        _user(_big("one")),
        _user("two"),
        MessageIn("user", [{"type": "text", "text": "ok"}, {"type": "tool_use", "name": "f"}]),
        _user("four"),
    ]
    with pytest.raises(InvalidInput) as err:
        ingest(store, "s", batch)
    assert err.value.field == "messages[3].content[1].id"
    assert str(err.value).startswith("messages[3].content[1].id: ")
    for table in ("conversations", "messages", "message_parts", "large_files"):
        assert _count(store, table) == 0
    assert os.listdir(store.files_dir) == []


def test_a_single_message_error_names_the_field_without_an_index(store: Store) -> None:
    with pytest.raises(InvalidInput) as err:
        ingest(store, "s", [MessageIn("robot", "hi")], field="message", batch=False)
    assert err.value.field == "message.role"


def test_a_failure_at_insert_time_rolls_back_rows_fts_and_payload_files(store: Store) -> None:
    # Every message validates; the third fails inside the transaction, after the
    # first two (with payload files) were written.
    store.execute(
        "CREATE TEMP TRIGGER fail_third BEFORE INSERT ON messages WHEN new.seq = 3 "
        "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
    )
    batch = [_user(_big("alphaword")), _user(_big("betaword")), _user("gammaword")]
    with pytest.raises(apsw.ConstraintError, match="injected failure"):
        ingest(store, "s", batch)
    for table in ("conversations", "messages", "message_parts", "large_files"):
        assert _count(store, table) == 0
    assert _fts(store, "alphaword") == []
    assert os.listdir(store.files_dir) == []


def test_an_enclosing_rollback_undoes_an_ingest_and_removes_its_payload_files(
    store: Store,
) -> None:
    def body() -> None:
        with store.transaction():
            ingest(store, "s", [_user(_big("zetaword"))])
            [file_id] = os.listdir(store.files_dir)
            assert store.one("SELECT 1 FROM large_files WHERE file_id = ?", (file_id,)) == (1,)
            raise Boom

    with pytest.raises(Boom):
        body()
    assert os.listdir(store.files_dir) == []
    assert _count(store, "messages") == 0
    assert _fts(store, "zetaword") == []


def test_a_message_is_full_text_searchable_inside_the_ingest_transaction(store: Store) -> None:
    def body() -> None:
        with store.transaction():
            result = ingest(store, "s", [_user("the quokka smiles")])
            row_id = int(store.scalar("SELECT id FROM messages WHERE seq = 1"))
            assert result.messages[0].id == f"msg_{row_id}"
            assert _fts(store, "quokka") == [row_id]
            raise Boom

    with pytest.raises(Boom):
        body()
    assert _fts(store, "quokka") == []
    assert _count(store, "messages") == 0


def test_a_committed_message_is_full_text_searchable_right_after_ingest(store: Store) -> None:
    ingest(store, "s", [_user("the quokka smiles"), _user("nothing here")])
    assert _fts(store, "quokka") == [int(store.scalar("SELECT id FROM messages WHERE seq = 1"))]
    assert _fts(store, "smile") != []  # porter stemming


# -- statements issued -----------------------------------------------------------------------


def test_a_single_message_ingest_issues_a_small_fixed_number_of_statements(store: Store) -> None:
    seen: list[str] = []
    store.set_tracer(lambda sql, _bindings: seen.append(sql))
    ingest(store, "s", [_user("hello", "c-1")])
    assert seen[0] == "BEGIN IMMEDIATE"
    assert seen[-1] == "COMMIT"
    assert len(seen) <= 11  # 10, plus one statement queueing the batch for embedding


def test_statements_per_message_in_a_batch_stay_constant(store: Store) -> None:
    seen: list[str] = []
    store.set_tracer(lambda sql, _bindings: seen.append(sql))
    ingest(store, "s", [_user("warm up", "w")])
    seen.clear()
    ingest(store, "s", [_user("one", "a")])
    one = len(seen)
    seen.clear()
    ingest(store, "s", [_user(f"m{i}", f"b{i}") for i in range(20)])
    assert len(seen) - one <= 4 * 19  # lookup, row, FTS entry, context item per extra message


# -- payload files ------------------------------------------------------------------------------


def test_a_large_payload_goes_to_a_file_with_a_row_and_a_compact_reference(
    store: Store, db_path: Path
) -> None:
    text = _big("omegaword")
    ingest(store, "s", [MessageIn("tool", text, client_id="r1", tool_call_id="call_1")])

    [name] = os.listdir(store.files_dir)
    assert FILE_ID_RE.fullmatch(name)
    path = db_path.with_name(db_path.name + "-files") / name
    assert path.read_bytes() == text.encode()

    row = store.one(
        "SELECT part_kind, encoding, byte_size, sha256, m.client_id FROM large_files f "
        "JOIN messages m ON m.id = f.message_id WHERE file_id = ?",
        (name,),
    )
    assert row == (
        "tool_result",
        "utf8",
        len(text.encode()),
        hashlib.sha256(text.encode()).hexdigest(),
        "r1",
    )
    content = str(store.scalar("SELECT content FROM messages"))
    assert content.startswith(f"[Large payload {name} | tool_result |")
    assert len(content) < len(text)
    assert _fts(store, "omegaword") != []  # the reference keeps a searchable preview
    parts = store.execute("SELECT kind, origin, tool_call_id, file_id FROM message_parts")
    assert [tuple(p) for p in parts] == [("tool_result", "message", "call_1", name)]


def test_a_large_non_ascii_payload_keeps_its_exact_bytes(store: Store) -> None:
    text = "記憶の断片🧠 " * 200
    ingest(store, "s", [_user(text)])
    [name] = os.listdir(store.files_dir)
    assert (store.files_dir / name).read_bytes() == text.encode("utf-8")
    assert store.scalar("SELECT byte_size FROM large_files") == len(text.encode("utf-8"))


def test_a_payload_file_is_written_for_each_large_block(store: Store) -> None:
    blocks = [
        {"type": "text", "text": _big("first")},
        {"type": "text", "text": "small"},
        {"type": "tool_use", "id": "t", "name": "write", "input": {"body": _big("second")}},
    ]
    ingest(store, "s", [MessageIn("assistant", blocks)])
    assert _count(store, "large_files") == 2
    assert len(os.listdir(store.files_dir)) == 2
    files = [
        tuple(r)
        for r in store.execute("SELECT ordinal, file_id FROM message_parts ORDER BY ordinal")
    ]
    assert [f[0] for f in files] == [0, 1, 2]
    assert files[1][1] is None
    assert files[0][1] != files[2][1]


# -- timestamps ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_at", "stored"),
    [
        ("2024-03-01T12:00:00Z", "2024-03-01T12:00:00.000Z"),
        ("2024-03-01T13:00:00+01:00", "2024-03-01T12:00:00.000Z"),
        ("2024-03-01T12:00:00.5", "2024-03-01T12:00:00.500Z"),
    ],
)
def test_created_at_is_stored_normalised_to_utc(store: Store, given_at: str, stored: str) -> None:
    ingest(store, "s", [_user("hi", created_at=given_at)])
    assert store.scalar("SELECT created_at FROM messages") == stored


def test_a_missing_created_at_is_the_ingest_time(store: Store) -> None:
    moment = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    ingest(store, "s", [_user("hi")], now=moment)
    assert store.one("SELECT created_at FROM messages") == ("2030-01-02T03:04:05.000Z",)
    assert store.one("SELECT created_at, updated_at FROM conversations") == (
        "2030-01-02T03:04:05.000Z",
        "2030-01-02T03:04:05.000Z",
    )


def test_an_invalid_created_at_is_invalid_input_naming_the_message(store: Store) -> None:
    with pytest.raises(InvalidInput) as err:
        ingest(store, "s", [_user("ok"), _user("hi", created_at="last tuesday")])
    assert err.value.field == "messages[1].created_at"
    assert _count(store, "messages") == 0


def test_a_client_id_shaped_like_a_generated_id_is_refused(store: Store) -> None:
    ingest(store, "s", [MessageIn("user", "first")])  # stored as msg_1
    with pytest.raises(InvalidInput) as caught:
        ingest(store, "s", [MessageIn("user", "ok"), MessageIn("user", "x", client_id="msg_1")])
    assert caught.value.field == "messages[1].id"
    assert store.scalar("SELECT count(*) FROM messages") == 1
    assert ingest(store, "s", [MessageIn("user", "x", client_id="msg_one")]).ingested == 1
