"""Progress notifications: asked for, they arrive before the answer; not asked, none come."""

from __future__ import annotations

import subprocess
from pathlib import Path

from protocol.client import Client
from tests.e2e.conftest import BRAIN, DEADLINE, create_db


def _workspace(root: Path, files: int) -> Path:
    (root / "memory").mkdir(parents=True)
    for i in range(files):
        (root / "memory" / f"day{i:02d}.md").write_text(
            f"# Day {i}\n\nWorked on topic {i}.\n\n## Notes\n\nMore about topic {i}.\n"
        )
    return root


def test_a_sync_that_asks_for_progress_reports_each_phase_before_it_answers(
    db_path: Path, tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path / "ws", 12)
    with Client.spawn(db_path) as client:
        report = client.call("sync", {"workspace": str(workspace)}, progress=True)
        assert report["files"] == 12
        seen = []
        while not client.notifications.empty():
            seen.append(client.notifications.get())
        assert seen
        assert {n["method"] for n in seen} == {"progress"}
        params = [n["params"] for n in seen]
        assert all(p["id"] is not None for p in params)
        phases = [p["phase"] for p in params]
        assert "index" in phases
        assert "embed" in phases
        assert phases.index("index") < phases.index("embed")
        index = [p for p in params if p["phase"] == "index"]
        assert index[-1]["done"] == index[-1]["total"] == 12
        # The same request without asking: no notifications at all.
        client.call("sync", {"workspace": str(workspace)})
        assert client.notifications.empty()


def test_a_bad_progress_member_is_an_invalid_request(db_path: Path) -> None:
    with Client.spawn(db_path) as client:
        client.send_raw(b'{"id": 7, "method": "ping", "progress": "yes"}\n')
        answer = client.request("ping")
        assert "result" in answer
    unmatched = []
    while not client.unmatched.empty():
        unmatched.append(client.unmatched.get())
    assert any(u.get("id") == 7 and u["error"]["code"] == -32600 for u in unmatched)


def test_brain_call_draws_a_progress_bar_on_stderr(db_path: Path, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws", 5)
    create_db(db_path)
    done = subprocess.run(
        [
            str(BRAIN),
            "call",
            "--db",
            str(db_path),
            "--progress",
            "sync",
            f'{{"workspace": "{workspace}"}}',
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=True,
    )
    assert '"files": 5' in done.stdout
    assert "index [" in done.stderr
    assert "5/5" in done.stderr


def test_a_bootstrap_that_asks_for_progress_hears_the_scan_and_the_import(
    db_path: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "t.jsonl"
    lines = [f'{{"role": "user", "content": "line {i}"}}' for i in range(1_200)]
    transcript.write_text("\n".join(lines) + "\n")
    with Client.spawn(db_path) as client:
        report = client.call("bootstrap", {"session": "s", "path": str(transcript)}, progress=True)
        assert report["imported"] == 1_200
        params = []
        while not client.notifications.empty():
            params.append(client.notifications.get()["params"])
    phases = [p["phase"] for p in params]
    assert "scan" in phases
    assert "import" in phases
    last = [p for p in params if p["phase"] == "import"][-1]
    assert last["done"] == last["total"] == 1_200
