"""A write is acknowledged only after it commits, so SIGKILL loses no
acknowledged write and leaves an intact database (DESIGN §3); replayed
ingests store nothing twice, across restarts too."""

from __future__ import annotations

from pathlib import Path

from protocol.client import Client
from tests.e2e.conftest import (
    Spawn,
    ingest_frame,
    integrity,
    opened,
    serve_argv,
    stored_client_ids,
    user_message,
)

N = 200


def _wal(db: Path) -> Path:
    return db.with_name(db.name + "-wal")


def test_every_acknowledged_single_message_ingest_survives_sigkill(db_path: Path) -> None:
    with Client.spawn(db_path) as client:
        for i in range(N):
            result = client.call("ingest", {"session": "s", "message": user_message(i)})
            assert result["ingested"] == 1
        client.kill()
    # The kill left committed pages in the WAL for the next opener to recover.
    assert _wal(db_path).stat().st_size > 0
    assert integrity(db_path) == [("ok",)]
    with opened(db_path) as engine:
        info = engine.info()
        assert (info.conversations, info.messages) == (1, N)
        for i in (0, 1, 57, N // 2, N - 2, N - 1):
            message = engine.get_message("s", f"m{i:04d}")
            assert message["content"] == f"message number {i}"
    assert stored_client_ids(db_path, "s") == [f"m{i:04d}" for i in range(N)]


def test_every_acknowledged_batch_ingest_survives_sigkill(db_path: Path) -> None:
    batches = [[user_message(b * 50 + i) for i in range(50)] for b in range(4)]
    with Client.spawn(db_path) as client:
        for b, batch in enumerate(batches):
            result = client.call("ingest", {"session": f"s{b}", "messages": batch})
            assert (result["ingested"], result["duplicates"]) == (50, 0)
        client.kill()
    assert integrity(db_path) == [("ok",)]
    with opened(db_path) as engine:
        info = engine.info()
        assert (info.conversations, info.messages) == (4, 200)
        for b, batch in enumerate(batches):
            for message in (batch[0], batch[25], batch[-1]):
                stored = engine.get_message(f"s{b}", message["id"])
                assert stored["content"] == message["content"]


def test_sigkill_in_the_middle_of_a_pipelined_stream_keeps_every_acknowledged_write(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path))
    sessions = ("a", "b", "c")
    daemon.send(b"".join(ingest_frame(i, sessions[i % 3], [user_message(i)]) for i in range(300)))
    acknowledged: list[int] = []
    while len(acknowledged) < 100:
        frame = daemon.frame()
        assert frame["result"]["ingested"] == 1, frame
        acknowledged.append(frame["id"])
    daemon.kill()

    assert integrity(db_path) == [("ok",)]
    with opened(db_path) as engine:
        assert engine.info().messages >= len(acknowledged)
        for i in acknowledged:
            assert engine.get_message(sessions[i % 3], f"m{i:04d}")["content"] == (
                f"message number {i}"
            )


def test_a_batch_cut_short_by_sigkill_is_stored_entirely_or_not_at_all(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path))
    daemon.send(
        b"".join(
            ingest_frame(b, f"s{b}", [user_message(i, prefix=f"b{b}-") for i in range(40)])
            for b in range(30)
        )
    )
    acknowledged = {daemon.frame()["id"] for _ in range(3)}
    daemon.kill()

    assert integrity(db_path) == [("ok",)]
    for b in range(30):
        stored = len(stored_client_ids(db_path, f"s{b}"))
        assert stored in (0, 40), f"batch {b} stored {stored} of 40 messages"
        if b in acknowledged:
            assert stored == 40


def test_replaying_a_batch_after_a_restart_stores_nothing_twice(db_path: Path) -> None:
    batch = [user_message(i) for i in range(N)]
    with Client.spawn(db_path) as client:
        first = client.call("ingest", {"session": "s", "messages": batch})
        before = client.call("info")
        assert client.close() == 0
    with Client.spawn(db_path) as client:
        replay = client.call("ingest", {"session": "s", "messages": batch})
        after = client.call("info")
        assert client.close() == 0

    assert (first["ingested"], first["duplicates"]) == (N, 0)
    assert (replay["ingested"], replay["duplicates"]) == (0, N)
    assert replay["ids"] == first["ids"] == [m["id"] for m in batch]
    assert [m["seq"] for m in replay["messages"]] == [m["seq"] for m in first["messages"]]
    assert before["messages"] == after["messages"] == N
    assert before["conversations"] == after["conversations"] == 1


def test_a_replay_overlapping_new_messages_after_a_restart_stores_only_the_new_ones(
    db_path: Path,
) -> None:
    with Client.spawn(db_path) as client:
        client.call("ingest", {"session": "s", "messages": [user_message(i) for i in range(10)]})
        assert client.close() == 0
    with Client.spawn(db_path) as client:
        overlap = client.call(
            "ingest", {"session": "s", "messages": [user_message(i) for i in range(5, 15)]}
        )
        info = client.call("info")
        assert client.close() == 0

    assert (overlap["ingested"], overlap["duplicates"]) == (5, 5)
    assert [m["seq"] for m in overlap["messages"]] == list(range(6, 16))
    assert info["messages"] == 15
    assert stored_client_ids(db_path, "s") == [f"m{i:04d}" for i in range(15)]


def test_a_resent_last_message_without_an_id_is_a_duplicate_after_a_restart(
    db_path: Path,
) -> None:
    turn = {"role": "assistant", "content": "the last turn before the crash"}
    with Client.spawn(db_path) as client:
        first = client.call("ingest", {"session": "s", "message": turn})
        client.kill()
    with Client.spawn(db_path) as client:
        again = client.call("ingest", {"session": "s", "message": turn})
        info = client.call("info")
        assert client.close() == 0

    assert (first["ingested"], again["ingested"], again["duplicates"]) == (1, 0, 1)
    assert again["ids"] == first["ids"]
    assert info["messages"] == 1
