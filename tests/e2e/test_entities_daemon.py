"""The entity methods through a real daemon and through ``brain call``: named things are
found by name across sessions, their mentions come in time order, suppression hides them,
and bad params are refused with stable errors."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import apsw
import orjson
import pytest

from protocol.client import Client
from protocol.errors import InvalidParams, NotFound

BRAIN = Path(sys.executable).parent / "brain"


def _msg(i: str, text: str, when: str) -> dict[str, Any]:
    return {"id": i, "role": "user", "content": text, "created_at": when}


def _seed(client: Client) -> None:
    client.call(
        "ingest",
        {
            "session": "s1",
            "session_key": "agent",
            "messages": [
                _msg(
                    "a", "Today Caroline went to the LGBTQ support group.", "2023-05-01T10:00:00Z"
                ),
                _msg("b", "Melanie ran 5 km with Caroline.", "2023-05-08T10:00:00Z"),
            ],
        },
    )
    client.call(
        "ingest",
        {
            "session": "s2",
            "messages": [_msg("c", "Caroline moved to Sweden in 2023.", "2023-06-01T10:00:00Z")],
        },
    )


def test_entities_are_found_by_prefix_and_an_entitys_mentions_come_in_time_order(
    tmp_path: Path,
) -> None:
    with Client.spawn(tmp_path / "e.db") as client:
        _seed(client)
        found = client.call("entities", {"name": "caro", "all": True})["entities"]
        assert [(e["name"], e["kind"], e["messages"], e["sessions"]) for e in found] == [
            ("Caroline", "name", 3, 2)
        ]
        assert found[0]["first_seen"].startswith("2023-05-01")
        assert found[0]["last_seen"].startswith("2023-06-01")
        scoped = client.call("entities", {"name": "Caroline", "session_key": "agent"})
        assert scoped["entities"][0]["messages"] == 2
        km = client.call("entities", {"name": "km", "session": "s1"})["entities"]
        assert [(e["key"], e["match"]) for e in km] == [("5 km", "word")]
        assert client.call("entities", {"name": "sweden", "session": "s1"})["entities"] == []
        five = client.call("entities", {"name": "5 km", "session": "s1", "kind": "quantity"})
        assert [e["key"] for e in five["entities"]] == ["5 km"]
        one = client.call("entity", {"name": "CAROLINE", "all": True})
        assert one["total"] == 3
        assert [(m["session"], m["id"]) for m in one["mentions"]] == [
            ("s1", "a"),
            ("s1", "b"),
            ("s2", "c"),
        ]
        assert "Caroline moved to Sweden" in one["mentions"][2]["snippet"]


def test_a_suppressed_messages_mentions_are_hidden_from_both_methods(tmp_path: Path) -> None:
    with Client.spawn(tmp_path / "e.db") as client:
        _seed(client)
        client.call("suppress", {"ids": ["c"], "session": "s2"})
        assert client.call("entity", {"name": "caroline", "all": True})["total"] == 2
        assert client.call("entities", {"name": "sweden", "all": True})["entities"] == []
        with pytest.raises(NotFound):
            client.call("entity", {"name": "sweden", "all": True})


def test_bad_entity_params_are_refused_with_invalid_params(tmp_path: Path) -> None:
    with Client.spawn(tmp_path / "e.db") as client:
        for params in (
            {"name": "x"},  # no scope
            {"name": "x", "all": True, "session": "s"},
            {"name": "   ", "all": True},
            {"name": "x", "all": True, "kind": "planet"},
            {"name": "x", "all": True, "limit": 0},
            {"name": "x", "all": True, "nmae": 1},
        ):
            with pytest.raises(InvalidParams):
                client.call("entities", params)
            with pytest.raises(InvalidParams):
                client.call("entity", params)
        assert client.call("ping") is not None


def test_brain_call_answers_entities_on_a_database(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    with Client.spawn(db) as client:
        _seed(client)
    done = subprocess.run(
        [str(BRAIN), "call", "entities", '{"name": "mel", "all": true}', "--db", str(db)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert [e["name"] for e in orjson.loads(done.stdout)["entities"]] == ["Melanie"]


def test_the_daemon_indexes_ingested_messages_in_the_background(tmp_path: Path) -> None:
    db = tmp_path / "bg.db"
    with Client.spawn(db) as client:
        _seed(client)
        # No entity read is made: the background worker alone drains the queue.
        deadline = time.monotonic() + 60
        while True:
            reader = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
            try:
                waiting = reader.execute("SELECT count(*) FROM entity_backlog").fetchone()
                mentions = reader.execute("SELECT count(*) FROM entity_mentions").fetchone()
            finally:
                reader.close()
            if waiting == (0,) and mentions is not None and mentions[0] > 0:
                break
            assert time.monotonic() < deadline, "the queue was never drained"
            time.sleep(0.1)
        assert client.call("ping") is not None


def test_info_shows_the_entity_backlog_the_background_worker_drains(tmp_path: Path) -> None:
    with Client.spawn(tmp_path / "b.db") as client:
        _seed(client)
        deadline = time.monotonic() + 30
        pending = client.call("info")["entities_pending"]
        while pending and time.monotonic() < deadline:
            time.sleep(0.1)
            pending = client.call("info")["entities_pending"]
        assert pending == 0  # nothing read entities: the worker indexed them
        found = client.call("grep", {"query": "Caroline support group", "all": True})
        assert found["hits"][0]["id"] == "a"
