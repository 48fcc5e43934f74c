"""``brain doctor`` as a real process: exit 0 when healthy, 1 while problems remain, a JSON
report, and ``--repair`` beside a serving daemon."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import apsw
import orjson

from brain import Brain
from tests.brain.lcm.helpers import SMALL_BRAIN, chat
from tests.e2e.conftest import (
    BRAIN,
    DEADLINE,
    Spawn,
    ingest_frame,
    serve_argv,
    user_message,
)


def _doctor(db: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(BRAIN), "doctor", "--db", str(db), *args],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )


def _report(done: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    report: dict[str, Any] = orjson.loads(done.stdout)
    return report


def _populated(db: Path) -> None:
    brain = Brain(db, SMALL_BRAIN)
    try:
        brain.ingest("s", chat(30))
        brain.compact("s")
    finally:
        brain.close()


def test_brain_doctor_exits_0_on_a_healthy_database_and_prints_a_table(db_path: Path) -> None:
    _populated(db_path)
    done = _doctor(db_path)
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    for name in ("integrity", "schema", "fts", "vectors", "files", "context", "graph"):
        assert any(line.split()[:2] == [name, "ok"] for line in lines), lines


def test_brain_doctor_exits_1_naming_the_problem_and_0_after_repair(db_path: Path) -> None:
    _populated(db_path)
    conn = apsw.Connection(str(db_path))
    try:
        conn.execute("UPDATE conversations SET raw_tokens = raw_tokens + 5")
    finally:
        conn.close()

    found = _doctor(db_path, "--json")
    assert found.returncode == 1
    report = _report(found)
    assert not report["ok"]
    bad = {c["name"]: c["problems"] for c in report["checks"] if c["status"] != "ok"}
    assert bad == {"context": ["wrong_totals"]}

    repaired = _doctor(db_path, "--repair", "--json")
    assert repaired.returncode == 0, repaired.stdout.decode()
    context = next(c for c in _report(repaired)["checks"] if c["name"] == "context")
    assert context["repaired"] == ["recomputed context_tokens and raw_tokens of 1 conversations"]
    assert _doctor(db_path).returncode == 0


def test_brain_doctor_on_a_missing_database_fails_without_creating_it(tmp_path: Path) -> None:
    done = _doctor(tmp_path / "absent.db")
    assert done.returncode == 2
    assert b"no database" in done.stderr
    assert not (tmp_path / "absent.db").exists()


def test_brain_doctor_repairs_beside_a_serving_daemon_that_keeps_every_write(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path))
    for i in range(20):
        daemon.send(ingest_frame(i, "s", [user_message(i)]))
        assert daemon.frame()["id"] == i
    conn = apsw.Connection(str(db_path))
    conn.set_busy_timeout(int(DEADLINE * 1000))
    try:
        conn.execute("UPDATE conversations SET context_tokens = 0")
    finally:
        conn.close()

    repair = subprocess.Popen(
        [str(BRAIN), "doctor", "--db", str(db_path), "--repair", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    for i in range(20, 40):  # the daemon keeps answering while the repair runs
        daemon.send(ingest_frame(i, "s", [user_message(i)]))
        assert daemon.frame()["id"] == i
    out, err = repair.communicate(timeout=DEADLINE)
    assert repair.returncode == 0, (out + err).decode()

    assert _doctor(db_path).returncode == 0
    code, _frames = daemon.finish()
    assert code == 0
    conn = apsw.Connection(str(db_path))
    try:
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 40  # type: ignore[index]
    finally:
        conn.close()


def test_brain_doctor_repair_beside_a_daemon_writing_in_a_loop_reports_no_false_corruption(
    db_path: Path, spawn: Spawn
) -> None:
    # Every write adds FTS5 segments and merges drop old ones: a doctor that checks
    # against an index structure cached before those writes reads blobs that are gone.
    # Payload files make each doctor run long enough for many writes to land in it,
    # and commits without fsync make those writes many.
    args = ["--large-payload-tokens", "100", "--synchronous", "NORMAL"]
    daemon = spawn(serve_argv(db_path, *args))
    daemon.call(0, "ingest", {"session": "s", "message": user_message(0)})
    stop = threading.Event()
    written: list[int] = []
    payload = "a payload line\n" * 3_000

    def write() -> None:
        i = 1
        while not stop.is_set():
            reply = {"role": "assistant", "content": payload if i % 5 == 0 else f"reply {i}"}
            daemon.send(ingest_frame(i, f"s{i % 3}", [user_message(i), reply]))
            assert daemon.frame()["id"] == i
            written.append(i)
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        deadline = time.monotonic() + DEADLINE
        while len(written) < 300 and writer.is_alive():  # a database with some history
            assert time.monotonic() < deadline
            time.sleep(0.01)
        before = len(written)
        reports = [_doctor(db_path, "--repair", "--json") for _ in range(4)]
        during = len(written) - before
    finally:
        stop.set()
        writer.join(DEADLINE)
    assert during > 0, "the daemon wrote nothing while the doctor ran"
    for done in reports:
        bad = {c["name"]: c["message"] for c in _report(done)["checks"] if c["status"] != "ok"}
        assert bad == {}, bad
        assert done.returncode == 0
    code, _frames = daemon.finish()
    assert code == 0
