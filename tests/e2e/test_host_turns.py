"""``ingest``'s ``turn`` mark and ``info.hosts``, through a real daemon.

A host integration marks each turn it commits through brain; ``info`` reports, per
host, the last such turn (when, which session, the host's key) and how many there
were, durably: a host that silently stopped going through brain (an upgrade that
dropped the plugin) shows as a last turn that no longer moves.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from protocol.client import Client
from protocol.errors import InvalidParams


def _turn(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"k{n}:0", "role": "user", "content": f"question {n}"},
        {"id": f"k{n}:1", "role": "assistant", "content": f"answer {n}"},
    ]


def test_info_reports_each_hosts_last_committed_turn_and_keeps_it_across_restarts(
    tmp_path: Path,
) -> None:
    db = tmp_path / "b.db"
    with Client.spawn(db) as client:
        assert client.call("info")["hosts"] == {}
        before = datetime.now(UTC) - timedelta(seconds=1)
        for n in (1, 2):
            client.call(
                "ingest",
                {
                    "session": "a",
                    "messages": _turn(n),
                    "turn": {"host": "openclaw", "key": f"k{n}"},
                },
            )
        # A batch without the mark (an import, another writer) is not a turn of the host.
        client.call("ingest", {"session": "b", "message": {"role": "user", "content": "plain"}})
        client.call(
            "ingest",
            {"session": "b", "messages": _turn(3), "turn": {"host": "my-agent.v2"}},
        )
        hosts = client.call("info")["hosts"]
    assert set(hosts) == {"openclaw", "my-agent.v2"}
    openclaw = hosts["openclaw"]
    assert openclaw["session"] == "a"
    assert openclaw["key"] == "k2"
    assert openclaw["turns"] == 2
    at = datetime.fromisoformat(openclaw["last_turn_at"].replace("Z", "+00:00"))
    assert before <= at <= datetime.now(UTC)
    assert hosts["my-agent.v2"] == {
        "last_turn_at": hosts["my-agent.v2"]["last_turn_at"],
        "session": "b",
        "key": None,
        "turns": 1,
    }
    # Durable: a new daemon on the file reads the same record.
    with Client.spawn(db) as client:
        assert client.call("info")["hosts"] == hosts


def test_a_retried_turn_all_duplicates_is_not_counted_again(tmp_path: Path) -> None:
    with Client.spawn(tmp_path / "b.db") as client:
        params = {"session": "a", "messages": _turn(1), "turn": {"host": "openclaw", "key": "k1"}}
        client.call("ingest", params)
        first = client.call("info")["hosts"]["openclaw"]
        again = client.call("ingest", params)
        assert again["duplicates"] == 2
        assert client.call("info")["hosts"]["openclaw"] == first


@pytest.mark.parametrize(
    ("turn", "error"),
    [
        ({}, "params.turn.host: required"),
        ({"host": "open claw"}, "params.turn.host: letters, digits"),
        ({"host": "openclaw", "when": 1}, "params.turn.when: unknown field"),
        ("openclaw", "params.turn: must be an object"),
    ],
)
def test_a_bad_turn_mark_is_refused_and_stores_nothing(
    tmp_path: Path, turn: Any, error: str
) -> None:
    with Client.spawn(tmp_path / "b.db") as client:
        with pytest.raises(InvalidParams, match=error):
            client.call("ingest", {"session": "a", "messages": _turn(1), "turn": turn})
        info = client.call("info")
        assert info["messages"] == 0
        assert info["hosts"] == {}
