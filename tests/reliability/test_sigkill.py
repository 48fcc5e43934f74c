"""SIGKILL at a random moment of mixed load loses no acknowledged write and
leaves a consistent database: integrity, full-text index, vectors, payload
files and info's counters all agree with the rows, and the daemon restarts on it.

A client thread drives a real daemon with ingest batches and single messages
(unique client ids, some large enough to become payload files), ``teach``
(dedup keys), ``query`` + ``learn``, ``compact`` and ``maintain``; every write
that got an answer is recorded. The test kills the process with SIGKILL after a
random delay, then checks the files with the process dead and restarts a
daemon on them for the next trial. CI: 5 trials; long mode: 100.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from brain import Brain, BrainConfig
from brain.store.migrations.counts import COUNTED
from protocol.client import Client, ClientClosed
from protocol.errors import RPCError
from tests.reliability.conftest import sql_rows

LARGE_TOKENS = 200
"""--large-payload-tokens for the daemon: a ~1 KiB block becomes a payload file."""

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
]


@dataclass
class Acked:
    """Writes the daemon answered successfully."""

    messages: dict[tuple[str, str], Any] = field(default_factory=dict)
    nodes: dict[str, tuple[str, str]] = field(default_factory=dict)  # dedup key -> (id, text)
    requests: int = 0
    errors: list[str] = field(default_factory=list)


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _load(client: Client, trial: int, rng: random.Random, acked: Acked, stop: threading.Event):
    """Mixed requests until the daemon dies (or ``stop``); record what was acknowledged."""
    n = 0
    sessions = [f"s{i}" for i in range(4)]
    while not stop.is_set():
        n += 1
        tag = f"t{trial}-{n}"
        op = rng.choices(
            ["batch", "single", "teach", "query", "compact", "maintain"],
            weights=[30, 30, 15, 15, 5, 5],
        )[0]
        session = rng.choice(sessions)
        try:
            if op in ("batch", "single"):
                count = rng.randint(2, 20) if op == "batch" else 1
                messages = []
                for j in range(count):
                    big = rng.random() < 0.05
                    content: Any = _text(rng, 400 if big else rng.randint(3, 30))
                    if rng.random() < 0.2:  # a tool result block
                        content = [
                            {"type": "tool_result", "tool_use_id": f"c{tag}", "content": content}
                        ]
                    messages.append({"id": f"{tag}-{j}", "role": "user", "content": content})
                params: dict[str, Any] = {"session": session}
                if count == 1:
                    params["message"] = messages[0]
                else:
                    params["messages"] = messages
                result = client.call("ingest", params)
                for m in messages:
                    acked.messages[(session, m["id"])] = m["content"]
                assert result["ids"] == [m["id"] for m in messages]
            elif op == "teach":
                content = f"{tag} {_text(rng, 12)}"
                result = client.call("teach", {"content": content, "dedup_key": tag})
                acked.nodes[tag] = (result["node_id"], content)
            elif op == "query":
                result = client.call("query", {"query": _text(rng, 4), "chat_id": session})
                client.call("learn", {"trace_id": result["trace_id"], "outcome": rng.random()})
            elif op == "compact":
                client.call("compact", {"session": session})
            else:
                # merge would fold near-duplicate taught nodes into one (by design):
                # every other task runs, so each taught node must survive.
                client.call("maintain", {"tasks": ["health", "decay", "prune", "connect"]})
            acked.requests += 1
        except (ClientClosed, OSError, ValueError):
            return  # the daemon was killed
        except RPCError as exc:
            if exc.code == -32001 and op == "compact":  # a session not ingested yet
                continue
            acked.errors.append(f"{op}: {exc.code} {exc.message}")


def processes_on(db: Path) -> list[int]:
    """Pids of live processes whose command line names ``db`` (a killed daemon's
    maintenance child names its database for ``ps``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone meanwhile
        if state != "Z" and str(db).encode() in argv:
            found.append(int(entry.name))
    return found


def wait_until_closed(db: Path, within_s: float = 10.0) -> None:
    """Wait for the processes a killed daemon left on ``db`` to end; fail if one stays.

    A maintenance child exits once its parent's pipe closes, but on a busy machine
    that takes a moment, and until then it may hold the file's locks.
    """
    deadline = time.monotonic() + within_s
    while (left := processes_on(db)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert left == [], f"processes still on {db} {within_s} s after their daemon died: {left}"


def check_consistent(db: Path) -> dict[str, int]:
    """Integrity, FTS, vectors, payload files and info's counters of a database no process
    has open (once the killed daemon's children are gone)."""
    wait_until_closed(db)
    assert sql_rows(db, "PRAGMA integrity_check") == [("ok",)]
    sql_rows(db, "INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
    sql_rows(db, "INSERT INTO summaries_fts(summaries_fts) VALUES ('integrity-check')")
    messages = sql_rows(db, "SELECT count(*) FROM messages")[0][0]
    assert sql_rows(db, "SELECT count(*) FROM messages_fts")[0][0] == messages
    orphan_vectors = sql_rows(
        db,
        "SELECT v.kind, v.row_id FROM vectors v "
        "LEFT JOIN messages m ON v.kind = 'message' AND m.id = v.row_id "
        "LEFT JOIN summaries s ON v.kind = 'summary' AND s.id = v.row_id "
        "LEFT JOIN nodes n ON v.kind = 'node' AND n.id = v.row_id "
        "WHERE coalesce(m.id, s.id, n.id) IS NULL",
    )
    assert orphan_vectors == []
    unembedded = sql_rows(
        db,
        "SELECT kind, id FROM ("
        " SELECT 'message' AS kind, id FROM messages UNION ALL"
        " SELECT 'summary', id FROM summaries UNION ALL"
        " SELECT 'node', id FROM nodes WHERE content IS NOT NULL) r "
        "WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.kind = r.kind AND v.row_id = r.id) "
        "AND NOT EXISTS (SELECT 1 FROM embed_queue q WHERE q.kind = r.kind AND q.row_id = r.id)",
    )
    assert unembedded == []
    # info's maintained counters rolled back or committed with the rows they count. One
    # statement, one snapshot: a maintain child of the killed daemon may still commit.
    pairs = " UNION ALL ".join(
        f"SELECT (SELECT n FROM counts WHERE name = '{t}'), (SELECT count(*) FROM {t})"
        for t in COUNTED
    )
    assert [(kept, counted) for kept, counted in sql_rows(db, pairs) if kept != counted] == []
    files_dir = db.with_name(db.name + "-files")
    rows = {r[0] for r in sql_rows(db, "SELECT file_id FROM large_files")}
    on_disk = set(os.listdir(files_dir)) if files_dir.exists() else set()
    assert rows <= on_disk, f"rows naming missing files: {sorted(rows - on_disk)}"
    return {"messages": messages, "files": len(rows)}


def test_sigkill_at_random_moments_of_mixed_load_loses_no_acknowledged_write(
    tmp_path: Path, size: Any, figures: dict[str, Any]
) -> None:
    trials = size(5, 100)
    seed = int(os.environ.get("BRAIN_RELIABILITY_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    db = tmp_path / "brain.db"
    acked = Acked()
    files_dir = db.with_name(db.name + "-files")
    swept = 0
    for trial in range(trials):
        stderr = (tmp_path / f"stderr-{trial}.log").open("wb")
        client = Client.spawn(db, args=["--large-payload-tokens", str(LARGE_TOKENS)], stderr=stderr)
        try:
            assert client.call("ping") == {"pong": True}  # restarted on the killed files
            stop = threading.Event()
            worker = threading.Thread(
                target=_load, args=(client, trial, random.Random(rng.random()), acked, stop)
            )
            worker.start()
            stop.wait(rng.uniform(0.05, 1.5))
            os.kill(client.proc.pid, signal.SIGKILL)
            client.proc.wait()
            stop.set()
            worker.join(30)
            assert not worker.is_alive()
        finally:
            client.kill()  # reaps the process and closes the pipes
            stderr.close()
        assert client.proc.returncode == -signal.SIGKILL
        assert acked.errors == [], f"seed {seed}: {acked.errors}"

        check_consistent(db)
        before = set(os.listdir(files_dir)) if files_dir.exists() else set()
        # No grace: files written by a transaction the kill cut short go at start-up.
        engine = Brain(db, BrainConfig(orphan_file_grace_s=0))
        try:
            lost = [
                key
                for key, content in acked.messages.items()
                if engine.get_message(key[0], key[1])["content"] != content
            ]
            assert lost == [], f"seed {seed}: lost {len(lost)} messages, e.g. {lost[:5]}"
        finally:
            engine.close()
        stored = set(os.listdir(files_dir)) if files_dir.exists() else set()
        rows = {r[0] for r in sql_rows(db, "SELECT file_id FROM large_files")}
        assert {f for f in stored if not f.startswith(".tmp-")} == rows
        assert not [f for f in stored if f.startswith(".tmp-")]
        swept += len(before - stored)
        nodes = {
            r[0]: (r[1], r[2])
            for r in sql_rows(
                db, "SELECT dedup_key, node_id, content FROM nodes WHERE dedup_key IS NOT NULL"
            )
        }
        lost_nodes = [k for k, v in acked.nodes.items() if nodes.get(k) != v]
        assert lost_nodes == [], f"seed {seed}: lost taught nodes {lost_nodes[:5]}"

    final = check_consistent(db)
    figures.update(
        seed=seed,
        trials=trials,
        requests_answered=acked.requests,
        messages_acknowledged=len(acked.messages),
        nodes_acknowledged=len(acked.nodes),
        payload_files=final["files"],
        stray_files_swept=swept,
        lost=0,
    )


pytestmark = pytest.mark.slow
