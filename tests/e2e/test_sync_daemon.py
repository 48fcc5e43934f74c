"""Workspace sync through a real daemon, and ``brain sync`` on its database while it serves."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.e2e.conftest import BRAIN, DEADLINE, Spawn, create_db, integrity, serve_argv

MEMORY = """\
# Deploys
Deploys go through the staging cluster kestrel before production.

# Coffee
The coffee machine is on the third floor.
"""


def _query(daemon: Any, request_id: int, text: str) -> dict[str, Any]:
    answer = daemon.call(request_id, "query", {"query": text, "record": False})
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


def test_a_workspace_synced_over_the_protocol_is_found_by_query_and_the_cli_syncs_beside_it(
    db_path: Path, spawn: Spawn, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text(MEMORY)
    (workspace / "SOUL.md").write_text("# Soul\nBe kind and direct.\n")
    (workspace / "memory" / "birds.md").write_text("# Birds\nA heron nests by the pond.\n")
    daemon = spawn(serve_argv(db_path))

    synced = daemon.call(1, "sync", {"workspace": str(workspace)})["result"]
    assert synced["files"] == 3
    assert synced["added"] == 4
    assert synced["embedded"] == 4
    found = _query(daemon, 2, "where is the coffee machine?")
    top = found["nodes"][0]
    assert (top["kind"], top["authority"], top["source"]) == ("chunk", "canonical", "MEMORY.md")
    assert top["lines"] == [4, 5]
    bad = daemon.call(3, "sync", {"workspace": str(workspace), "authority": {"SOUL.md": "x"}})
    assert bad["error"]["code"] == -32602

    # While the daemon serves: edit one file, delete another, sync from the CLI.
    (workspace / "MEMORY.md").write_text(
        MEMORY.replace("third floor", "fourth floor, next to the library")
    )
    (workspace / "memory" / "birds.md").unlink()
    done = subprocess.run(
        [str(BRAIN), "sync", "--db", str(db_path), "--workspace", str(workspace), "--json"],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    report = orjson.loads(done.stdout)
    assert (report["added"], report["kept"], report["removed"]) == (1, 2, 2)
    assert report["nodes"] == 3

    # The daemon's mirror and vector index follow the CLI's writes.
    after = _query(daemon, 4, "where is the coffee machine?")
    assert "fourth floor" in after["nodes"][0]["text"]
    assert all("third floor" not in n["text"] for n in after["nodes"])
    birds = _query(daemon, 5, "heron pond birds")
    assert all(n["source"] != "memory/birds.md" for n in birds["nodes"])
    info = daemon.call(6, "info")["result"]
    assert info["nodes"] == 3
    again = daemon.call(7, "sync", {"workspace": str(workspace)})["result"]
    assert (again["added"], again["kept"], again["removed"]) == (0, 3, 0)
    code, _ = daemon.finish()
    assert code == 0
    assert integrity(db_path) == [("ok",)]


def test_brain_sync_prints_a_readable_report_naming_the_refused_and_fails_on_a_missing_workspace(
    db_path: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "MEMORY.md").write_text(MEMORY)
    (workspace / "SOUL.md").symlink_to("/proc/self/environ")
    create_db(db_path)
    done = subprocess.run(
        [str(BRAIN), "sync", "--db", str(db_path), "--workspace", str(workspace)],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert "2 added" in done.stdout.decode()
    assert "1 refused" in done.stdout.decode()
    assert "refused SOUL.md: outside_workspace" in done.stdout.decode()
    missing = subprocess.run(
        [str(BRAIN), "sync", "--db", str(db_path), "--workspace", str(tmp_path / "nope")],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    assert missing.returncode == 1
    assert "not a directory" in missing.stderr.decode()


SECRET = "sk-brain-test-3c9e1f0a"


def test_a_workspace_linking_to_the_daemons_environment_never_leaks_it_to_query_or_assemble(
    db_path: Path, spawn: Spawn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRAIN_TEST_SECRET", SECRET)  # the daemon inherits it
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text(MEMORY)
    (workspace / "memory" / "env.md").symlink_to("/proc/self/environ")
    (workspace / "memory" / "shadow.md").symlink_to("/etc/shadow")
    (workspace / "memory" / "gone.md").symlink_to("deleted.md")  # dangling: vanished
    to_root = "../" * len(workspace.parts)
    daemon = spawn(serve_argv(db_path, "--recall-mode", "shadow"))

    synced = daemon.call(
        1,
        "sync",
        {
            "workspace": str(workspace),
            "paths": ["/proc/self/environ", f"{to_root}etc/shadow", f"{to_root}proc/self/environ"],
        },
    )["result"]
    asked = {"query": "BRAIN_TEST_SECRET environment key PATH", "record": False}
    found = daemon.call(2, "query", asked)
    question = {"role": "user", "content": "what is BRAIN_TEST_SECRET in the environment?"}
    daemon.call(3, "ingest", {"session": "s", "message": question})
    shown = daemon.call(4, "assemble", {"session": "s", "budget": 4_000, "recall": "on"})

    assert SECRET.encode() not in orjson.dumps(found)
    assert SECRET.encode() not in orjson.dumps(shown)
    assert shown["result"]["recall"]["injected"] is True
    assert {(r["path"], r["reason"]) for r in synced["refused"]} == {
        ("memory/env.md", "outside_workspace"),
        ("memory/shadow.md", "outside_workspace"),
        ("memory/gone.md", "vanished"),
        ("/proc/self/environ", "absolute_path"),
        (f"{to_root}etc/shadow", "outside_workspace"),
        (f"{to_root}proc/self/environ", "outside_workspace"),
    }
    assert (synced["files"], synced["nodes"]) == (1, 2)
    assert daemon.finish()[0] == 0
