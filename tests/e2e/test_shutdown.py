"""Every way of stopping exits 0 and loses nothing: EOF, the ``shutdown``
method, SIGTERM and SIGINT (STYLE 12)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from protocol import errors
from protocol.client import Client
from tests.e2e.conftest import (
    DEADLINE,
    Daemon,
    Spawn,
    ingest_frame,
    integrity,
    request_frame,
    serve_argv,
    stored_client_ids,
    user_message,
    write_lock_held,
)
from tests.openai_server import OpenAIServer, Reply

STUCK = ("--busy-timeout-ms", "600000", "--shutdown-timeout-s", "1")
"""A write waits ten minutes for a lock, the stop only a second for in-flight work."""


def _closed_cleanly(db: Path) -> bool:
    """The last connection checkpointed and removed the WAL: nothing left to recover."""
    return not db.with_name(db.name + "-wal").exists() and integrity(db) == [("ok",)]


def test_eof_stops_the_daemon_with_exit_zero_and_keeps_every_write(db_path: Path) -> None:
    with Client.spawn(db_path) as client:
        for i in range(20):
            client.call("ingest", {"session": "s", "message": user_message(i)})
        assert client.close() == 0
    assert _closed_cleanly(db_path)
    assert stored_client_ids(db_path, "s") == [f"m{i:04d}" for i in range(20)]


def test_shutdown_is_answered_after_the_in_flight_ingest_and_the_daemon_exits_zero(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path))
    batch = [user_message(i) for i in range(20)]
    daemon.send(ingest_frame("ingest", "s", batch) + request_frame("bye", "shutdown"))

    first, second = daemon.frames(2)
    assert first["id"] == "ingest"
    assert first["result"]["ingested"] == 20
    assert second["id"] == "bye"
    assert second["result"]["ok"] is True
    assert daemon.wait() == 0  # exits without waiting for stdin to close
    assert daemon.rest() == []
    assert _closed_cleanly(db_path)
    assert stored_client_ids(db_path, "s") == [m["id"] for m in batch]


def test_requests_sent_after_shutdown_in_the_same_write_get_shutting_down(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path))
    chunk = (
        ingest_frame("before", "s", [user_message(0)])
        + request_frame("bye", "shutdown")
        + request_frame("late-ping", "ping")
        + ingest_frame("late-ingest", "t", [user_message(1)])
        + request_frame("late-shutdown", "shutdown")
        + b'{"method":"ping"}\n'
    )
    assert len(chunk) < 4096  # one atomic pipe write, so the daemon reads it in one piece
    daemon.send(chunk)

    code = daemon.wait()
    answers = {a["id"]: a for a in daemon.rest()}
    assert code == 0
    assert set(answers) == {"before", "bye", "late-ping", "late-ingest", "late-shutdown"}
    assert answers["before"]["result"]["ingested"] == 1
    assert answers["bye"]["result"]["ok"] is True
    for late in ("late-ping", "late-ingest", "late-shutdown"):
        assert answers[late]["error"]["code"] == errors.ShuttingDown.CODE
    assert stored_client_ids(db_path, "s") == ["m0000"]
    assert stored_client_ids(db_path, "t") == []


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"]
)
def test_a_signal_while_idle_exits_zero_and_keeps_every_write(
    db_path: Path, signum: signal.Signals
) -> None:
    with Client.spawn(db_path) as client:
        client.call("ingest", {"session": "s", "messages": [user_message(i) for i in range(30)]})
        client.proc.send_signal(signum)
        # stdin stays open: the signal alone must stop the daemon.
        assert client.proc.wait(DEADLINE) == 0
        client.close()
    assert _closed_cleanly(db_path)
    assert stored_client_ids(db_path, "s") == [f"m{i:04d}" for i in range(30)]


def test_sigterm_during_a_pipelined_stream_answers_every_write_it_commits(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path))
    daemon.send(b"".join(ingest_frame(i, f"s{i % 4}", [user_message(i)]) for i in range(200)))
    answers = daemon.frames(10)
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.wait() == 0
    answers += daemon.rest()

    stored = {c for s in range(4) for c in stored_client_ids(db_path, f"s{s}")}
    acknowledged = {f"m{a['id']:04d}" for a in answers if "result" in a}
    refused = [a for a in answers if "error" in a]
    assert all(a["error"]["code"] == errors.ShuttingDown.CODE for a in refused)
    assert len({a["id"] for a in answers}) == len(answers)  # nothing answered twice
    # Work already started finished and was answered; nothing was committed silently.
    assert stored == acknowledged
    assert _closed_cleanly(db_path)


def test_every_line_already_sent_after_shutdown_is_answered_even_past_one_read(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path))
    pings = b"".join(request_frame(i, "ping") for i in range(5000))
    data = request_frame("bye", "shutdown") + pings
    assert len(data) > 2 * 65536  # several reads and more than a pipe buffer holds
    writer = threading.Thread(target=daemon.send, args=(data,), daemon=True)
    writer.start()
    code = daemon.wait()
    answers = daemon.rest()
    writer.join(10)
    assert code == 0
    refused = [a for a in answers if a["id"] != "bye"]
    # The drain answers what keeps arriving without a quiet spell; on a loaded
    # machine the writer may pause longer than that before its last lines, which
    # were then not yet sent. So: the lines answered are the first ones sent, and
    # more than one pipe read (64 KiB) holds.
    one_read = 65536 // len(request_frame(0, "ping"))
    assert len(refused) > one_read
    assert sorted(a["id"] for a in refused) == list(range(len(refused)))
    assert {a["error"]["code"] for a in refused} == {errors.ShuttingDown.CODE}


def _stuck_ingest(daemon: Daemon) -> None:
    """Send an ingest that blocks inside the engine (the write lock is held elsewhere).

    The ping behind it is answered once both lines were read, so the ingest
    has been accepted and is waiting for the lock, holding the engine.
    """
    daemon.send(ingest_frame("stuck", "s", [user_message(1)]) + request_frame("p", "ping"))
    assert daemon.frame()["id"] == "p"


def test_sigterm_exits_while_a_write_is_stuck_on_a_lock_and_keeps_what_was_committed(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path, *STUCK))
    assert daemon.call("first", "ingest", {"session": "s", "message": user_message(0)})["result"]
    with write_lock_held(db_path):
        _stuck_ingest(daemon)
        daemon.proc.send_signal(signal.SIGTERM)
        # Exits while the lock is still held: the stuck thread is not waited for.
        assert daemon.wait() == 0
        answers = daemon.rest()
    assert [a["id"] for a in answers] == ["stuck"]
    assert answers[0]["error"]["code"] == errors.ShuttingDown.CODE
    assert answers[0]["error"]["data"] == {"abandoned": True}
    assert stored_client_ids(db_path, "s") == ["m0000"]
    assert integrity(db_path) == [("ok",)]


def test_shutdown_is_answered_while_a_write_is_stuck_and_reports_it_abandoned(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path, *STUCK))
    assert daemon.call("first", "ingest", {"session": "s", "message": user_message(0)})["result"]
    with write_lock_held(db_path):
        _stuck_ingest(daemon)
        daemon.send(request_frame("bye", "shutdown"))
        answers = {a["id"]: a for a in daemon.frames(2)}
        assert daemon.wait() == 0
        assert daemon.rest() == []
    assert answers["stuck"]["error"]["code"] == errors.ShuttingDown.CODE
    # The stuck thread holds the engine, so the final flush could not run: nothing is
    # lost by that, every acknowledged write is committed in the WAL.
    assert answers["bye"]["result"] == {"ok": True, "saved": None, "abandoned": 1}
    assert stored_client_ids(db_path, "s") == ["m0000"]
    assert integrity(db_path) == [("ok",)]


def test_shutdown_is_answered_while_a_compaction_waits_on_a_provider_that_never_answers(
    db_path: Path, spawn: Spawn
) -> None:
    with OpenAIServer() as provider:
        provider.enqueue(Reply.text("never delivered", delay=600))
        args = [
            "--llm-base-url", provider.base_url,
            "--llm-model", "m",
            "--llm-timeout-s", "600",
            "--auto-compact", "false",
            "--fresh-tail-count", "4",
            "--leaf-chunk-tokens", "800",
            "--shutdown-timeout-s", "1",
        ]  # fmt: skip
        daemon = spawn(serve_argv(db_path, *args))
        history = [user_message(i) | {"content": f"turn {i} " + "words " * 100} for i in range(40)]
        assert daemon.call("in", "ingest", {"session": "s", "messages": history})["result"]
        daemon.send(request_frame("compact", "compact", {"session": "s"}))
        give_up = time.monotonic() + DEADLINE
        while not provider.requests:  # the summary request is out, and hangs
            assert time.monotonic() < give_up, "the compaction never called the provider"
            time.sleep(0.01)
        daemon.send(request_frame("bye", "shutdown"))
        answers = {a["id"]: a for a in daemon.frames(2)}
        assert daemon.wait() == 0
    assert answers["compact"]["error"]["data"] == {"abandoned": True}
    bye = answers["bye"]["result"]
    assert bye["ok"] is True
    assert bye["abandoned"] == 1
    assert bye["saved"] is not None  # the compaction waits outside the engine: the flush ran
    assert stored_client_ids(db_path, "s") == [m["id"] for m in history]
