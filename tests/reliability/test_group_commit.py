"""Group commit survives SIGKILL: pipelined ingests on a daemon with ``group_commit``
(commits at synchronous=NORMAL, one shared WAL fsync before their answers) are all
kept once acknowledged, each session keeps a prefix of what it was sent, in order,
and the database stays consistent, trial after trial on the same files."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Spawn, ingest_frame, serve_argv, user_message
from tests.reliability.conftest import sql_rows
from tests.reliability.test_sigkill import check_consistent

SESSIONS = 4


def _stored(db: Path) -> dict[str, list[str]]:
    rows = sql_rows(
        db,
        "SELECT c.session_id, m.client_id FROM messages m "
        "JOIN conversations c ON c.id = m.conversation_id ORDER BY c.session_id, m.seq",
    )
    out: dict[str, list[str]] = {}
    for session, client_id in rows:
        out.setdefault(str(session), []).append(str(client_id))
    return out


def test_pipelined_ingests_acknowledged_under_group_commit_all_survive_sigkill(
    db_path: Path, spawn: Spawn, size: Any, figures: dict[str, Any]
) -> None:
    trials = size(3, 30)
    per_trial = size(240, 2_000)
    acked: set[tuple[str, str]] = set()
    for trial in range(trials):
        daemon = spawn(serve_argv(db_path, "--group-commit", "true"))
        plan = []
        sent: dict[str, list[str]] = {}  # this trial's client ids per session, in order
        for i in range(per_trial):
            session = f"s{i % SESSIONS}" if trial % 2 == 0 else "s0"  # spread, or one lane
            message = user_message(i, prefix=f"t{trial}-")
            plan.append((f"{trial}-{i}", session, message))
            sent.setdefault(session, []).append(message["id"])
        by_id = {rid: (session, m["id"]) for rid, session, m in plan}
        half = per_trial // 2
        # The first half is sent and every answer read; the second half is still being
        # applied when the kill lands, a few of its answers read first.
        daemon.send(b"".join(ingest_frame(rid, s, [m]) for rid, s, m in plan[:half]))
        for answer in daemon.frames(half):
            assert "result" in answer, answer
            acked.add(by_id[answer["id"]])
        daemon.send(b"".join(ingest_frame(rid, s, [m]) for rid, s, m in plan[half:]))
        for answer in daemon.frames(trial + 1):
            assert "result" in answer, answer
            acked.add(by_id[answer["id"]])
        os.kill(daemon.proc.pid, signal.SIGKILL)
        assert daemon.proc.wait() == -signal.SIGKILL
        daemon.cleanup()

        check_consistent(db_path)
        stored = _stored(db_path)
        lost = [key for key in acked if key[1] not in stored.get(key[0], [])]
        assert lost == [], f"trial {trial}: lost {len(lost)} acknowledged, e.g. {lost[:5]}"
        for session, ids in stored.items():  # each lane applied in order, without gaps
            mine = [i for i in ids if i.startswith(f"t{trial}-")]
            assert mine == sent.get(session, [])[: len(mine)]
    figures.update(trials=trials, messages_acknowledged=len(acked), lost=0)
