"""Several processes share one database: the daemon sees other processes'
commits on its next request, and they see the daemon's (DESIGN §3)."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import orjson

from brain import MessageIn
from protocol.client import Client
from tests.e2e.conftest import BRAIN, DEADLINE, opened, stored_client_ids, user_message


def test_the_daemons_next_info_sees_messages_another_process_wrote(db_path: Path) -> None:
    with Client.spawn(db_path) as client:
        assert client.call("info")["messages"] == 0
        with opened(db_path) as engine:
            engine.ingest("other", [MessageIn("user", f"from elsewhere {i}") for i in range(3)])
        info = client.call("info")
        assert (info["conversations"], info["messages"]) == (1, 3)
        assert client.close() == 0


def test_another_process_sees_the_daemons_writes_while_it_serves(db_path: Path) -> None:
    with opened(db_path) as engine, Client.spawn(db_path) as client:
        assert engine.info().messages == 0
        client.call("ingest", {"session": "s", "messages": [user_message(i) for i in range(5)]})
        assert engine.info().messages == 5
        assert engine.get_message("s", "m0004")["content"] == "message number 4"
        assert client.close() == 0


def test_a_one_shot_brain_call_ingest_is_seen_by_the_serving_daemon(db_path: Path) -> None:
    with Client.spawn(db_path) as client:
        first = client.call("ingest", {"session": "s", "message": user_message(0)})
        done = subprocess.run(
            [
                str(BRAIN),
                "call",
                "ingest",
                orjson.dumps({"session": "s", "message": user_message(1)}).decode(),
                "--db",
                str(db_path),
            ],
            capture_output=True,
            timeout=DEADLINE,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
        assert orjson.loads(done.stdout)["messages"][0]["seq"] == 2
        # The daemon's own next write continues after the other process's seq.
        third = client.call("ingest", {"session": "s", "message": user_message(2)})
        info = client.call("info")
        assert client.close() == 0
    assert first["messages"][0]["seq"] == 1
    assert third["messages"][0]["seq"] == 3
    assert info["messages"] == 3
    assert stored_client_ids(db_path, "s") == ["m0000", "m0001", "m0002"]


def test_two_processes_writing_one_session_at_once_lose_nothing_and_share_one_seq(
    db_path: Path,
) -> None:
    per_writer = 100
    failures: list[BaseException] = []

    def other_process_writes() -> None:
        try:
            with opened(db_path) as engine:
                for i in range(per_writer):
                    engine.ingest(
                        "shared", [MessageIn("user", f"engine {i}", client_id=f"e{i:04d}")]
                    )
        except BaseException as exc:
            failures.append(exc)

    with Client.spawn(db_path) as client:
        client.call("ping")
        writer = threading.Thread(target=other_process_writes)
        writer.start()
        for i in range(per_writer):
            client.call("ingest", {"session": "shared", "message": user_message(i, prefix="d")})
        writer.join(DEADLINE)
        assert not writer.is_alive()
        info = client.call("info")
        assert client.close() == 0

    assert failures == []
    assert info["messages"] == 2 * per_writer
    stored = stored_client_ids(db_path, "shared")
    assert len(stored) == 2 * per_writer
    # Each writer's messages keep their own order within the shared sequence.
    assert [c for c in stored if c.startswith("d")] == [f"d{i:04d}" for i in range(per_writer)]
    assert [c for c in stored if c.startswith("e")] == [f"e{i:04d}" for i in range(per_writer)]
