"""Retention through a real daemon: old vectors go in the background, the file shrinks,
every message stays, and ``brain doctor`` is clean afterwards."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from brain.clock import iso
from protocol.client import Client
from tests.e2e.conftest import BRAIN, DEADLINE


def _messages(prefix: str, n: int, *, days_ago: float) -> list[dict[str, Any]]:
    at = iso(datetime.now(UTC) - timedelta(days=days_ago))
    return [
        {
            "id": f"{prefix}-{i}",
            "role": "user",
            "content": f"{prefix} note {i} " + " ".join(f"{prefix}{i}w{k}" for k in range(12)),
            "created_at": at,
        }
        for i in range(n)
    ]


def _until(what: str, ready: Callable[[], bool]) -> None:
    """Poll ``ready`` until it holds (a behaviour wait with a deadline, no timing asserted)."""
    deadline = time.monotonic() + DEADLINE * 2
    while not ready():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def _embedded(client: Client) -> bool:
    return bool(client.call("info")["embeddings"]["pending"] == 0)


def _doctor(db: Path) -> dict[str, Any]:
    done = subprocess.run(
        [str(BRAIN), "doctor", "--db", str(db), "--json"],
        capture_output=True,
        timeout=DEADLINE * 2,
        check=False,
    )
    report: dict[str, Any] = orjson.loads(done.stdout)
    assert done.returncode == 0, report
    return report


def test_a_daemon_with_an_age_limit_drops_old_vectors_in_the_background_and_keeps_every_message(
    tmp_path: Path,
) -> None:
    db = tmp_path / "brain.db"
    args = ["--embedder", "hash", "--retention-max-age-days", "30", "--retention-every-s", "0.2"]
    with Client.spawn(db, args=args, stderr=subprocess.DEVNULL) as client:
        client.call("ingest", {"session": "s", "messages": _messages("old", 40, days_ago=90)})
        client.call("ingest", {"session": "s", "messages": _messages("new", 10, days_ago=1)})

        def settled() -> bool:
            info = client.call("info")
            return bool(
                info["embeddings"]["pending"] == 0
                and info["embeddings"]["stored"] == 10
                and info["retention"]["passes"] >= 1
            )

        _until("the old messages' vectors are gone", settled)
        info = client.call("info")
        assert info["messages"] == 50
        assert info["retention"]["messages_deleted"] == 0
        hits = client.call("grep", {"query": "old7w3", "session": "s", "rank": False})["hits"]
        assert any("old7w3" in h["snippet"] for h in hits)  # full text still finds it
        client.call("shutdown")
    report = _doctor(db)
    assert report["ok"], report


def test_over_max_bytes_a_daemon_shrinks_the_file_and_keeps_every_message(
    tmp_path: Path,
) -> None:
    db = tmp_path / "brain.db"
    with Client.spawn(db, args=["--embedder", "hash"], stderr=subprocess.DEVNULL) as client:
        first = None
        for batch in range(6):
            result = client.call(
                "ingest",
                {"session": f"s{batch % 2}", "messages": _messages(f"b{batch}", 500, days_ago=0)},
            )
            first = first or result["messages"][0]["id"]
        _until("everything is embedded", lambda: _embedded(client))
        used = client.call("info")["db_bytes"]
        client.call("shutdown")
    size_before = db.stat().st_size
    limit = used - 500_000  # about 1,400 int8 vectors must go
    args = ["--embedder", "hash", "--retention-max-bytes", str(limit)]
    with Client.spawn(db, args=args, stderr=subprocess.DEVNULL) as client:
        report = client.call("retain")
        assert report["used_bytes"] <= limit
        assert not report["over_limit"]
        assert report["messages_deleted"] == 0
        assert report["auto_vacuum"] == "incremental"
        info = client.call("info")
        assert info["messages"] == 3_000
        assert info["retention"]["vectors_dropped"] >= 1_000
        client.call("save")
        assert db.stat().st_size < size_before - 400_000
        # Every message is still there and readable.
        got = client.call("describe", {"id": first, "all": True})
        assert "b0 note 0" in orjson.dumps(got).decode()
        client.call("shutdown")
    assert _doctor(db)["ok"]
