"""``recent`` through a real daemon and through ``brain call``: a week's rollups and leaf
summaries in time order, rollup ids that describe, expand and grep, and bad params
refused with the stable invalid-params code."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from protocol.client import Client
from protocol.errors import InvalidParams

BRAIN = Path(sys.executable).parent / "brain"
FILLER = "Okay, thanks, that sounds good to me and I will keep reading the notes as we go along."


def _day(date: str, fact: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{date}-{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": fact if i == 3 else FILLER,
            "created_at": f"{date}T09:{i * 5:02d}:00Z",
        }
        for i in range(8)
    ]


def _seed(client: Client) -> None:
    for date, fact in (
        ("2026-11-16", "Priya decided the deploy moves to Friday at 17:00."),
        ("2026-11-17", "The cache server moved to host db-7 after the outage."),
    ):
        client.call(
            "ingest", {"session": "s1", "session_key": "agent", "messages": _day(date, fact)}
        )
        client.call("compact", {"session": "s1"})


def _spawn(path: Path) -> Client:
    return Client.spawn(path, args=["--fresh-tail-count", "1"])


def test_recent_lists_a_weeks_rollups_and_summaries_in_time_order(tmp_path: Path) -> None:
    with _spawn(tmp_path / "r.db") as client:
        _seed(client)
        week = client.call(
            "recent", {"session_key": "agent", "period": "week", "before": "2026-11-20T00:00:00Z"}
        )
        items = week["items"]
        assert [(i["kind"], i.get("period")) for i in items[:2]] == [
            ("rollup", "week"),
            ("rollup", "day"),
        ]
        assert {i["kind"] for i in items} == {"rollup", "summary"}
        starts = [i["start"] if i["kind"] == "rollup" else i["earliest_at"] for i in items]
        assert starts == sorted(starts)
        rollup = items[0]
        assert "Priya" in rollup["content"]
        tuesday = [i for i in items if i.get("period") == "day" and "11-17" in i["start"]]
        assert "db-7" in tuesday[0]["content"]
        assert client.call("describe", {"id": rollup["id"], "session": "s1"})["kind"] == "rollup"
        leaves = client.call("expand", {"id": rollup["id"], "session": "s1"})["items"]
        assert leaves
        assert {i["kind"] for i in leaves} == {"summary"}
        hits = client.call("grep", {"query": "Priya deploy", "all": True, "scope": "summaries"})
        assert rollup["id"] in [h["id"] for h in hits["hits"] if h["kind"] == "rollup"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"session": "s1", "period": "month"}, "params.period"),
        ({"session": "s1", "before": "soon"}, "params.before"),
        ({"session": "s1", "since": "last tuesday"}, "params.since"),
        (
            {"session": "s1", "since": "2026-11-20T00:00:00Z", "before": "2026-11-19"},
            "params.since",
        ),
        ({"period": "day"}, "params.session"),
        (  # two starts: a caller's mistake, not one to guess at
            {"session": "s1", "since": "2026-11-16T00:00:00Z", "period": "day"},
            "params.since: give since or period, not both",
        ),
        ({"session": "s1", "max_tokens": 0}, "params.max_tokens"),
        ({"session": "s1", "periods": "day"}, "periods"),
    ],
)
def test_bad_recent_params_get_the_invalid_params_code(
    tmp_path: Path, params: dict[str, Any], field: str
) -> None:
    with _spawn(tmp_path / "r.db") as client:
        with pytest.raises(InvalidParams) as refused:
            client.call("recent", params)
        assert refused.value.code == -32602
        assert field in refused.value.message


WINDOW = '{"session": "s1", "since": "2026-11-16T00:00:00Z", "before": "2026-11-18T00:00:00Z"}'


def test_brain_call_runs_recent(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with _spawn(db) as client:
        _seed(client)
    done = subprocess.run(
        [str(BRAIN), "call", "recent", WINDOW, "--db", str(db)],
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    result = orjson.loads(done.stdout)
    assert [i["period"] for i in result["items"] if i["kind"] == "rollup"] == [
        "week",
        "day",
        "day",
    ]


def test_the_daemon_refreshes_rollups_in_the_background_so_grep_finds_them(
    tmp_path: Path,
) -> None:
    with _spawn(tmp_path / "r.db") as client:
        _seed(client)  # no recent: only the background worker refreshes
        deadline = time.monotonic() + 60
        kinds: set[str] = set()
        while time.monotonic() < deadline:
            hits = client.call("grep", {"query": "Priya", "all": True, "scope": "summaries"})
            kinds = {h["kind"] for h in hits["hits"]}
            if "rollup" in kinds:
                break
            time.sleep(0.2)
        assert "rollup" in kinds


def test_hybrid_grep_finds_a_rollup_through_its_full_text_side(tmp_path: Path) -> None:
    # Rollups are not embedded (their lines are their leaves', which are): exact
    # words still find them in hybrid grep, not only in full_text.
    with _spawn(tmp_path / "r.db") as client:
        _seed(client)
        client.call("recent", {"session": "s1"})  # refreshes the rollups first
        hits = client.call(
            "grep", {"query": "Priya", "all": True, "scope": "summaries", "mode": "hybrid"}
        )
        assert "rollup" in {h["kind"] for h in hits["hits"]}
