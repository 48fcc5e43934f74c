"""Many processes on one database at once: a serving daemon under ingest and
query load, ``brain maintain --db`` runs, one-shot ``brain serve`` fed by a
shell pipe and ``brain call`` invocations. No request fails (no -32005 Busy, no
-32008, no "database is locked"), no acknowledged write is lost, and every
process sees the commits the others acknowledged before it started.
CI: ~10 s; long mode: 60 s.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from brain import Brain
from protocol.client import Client
from protocol.errors import RPCError
from tests.reliability.conftest import sql_rows

BRAIN = Path(sys.executable).parent / "brain"
DEADLINE = 60.0

pytestmark = pytest.mark.slow


class Ledger:
    """Acknowledged writes and every failure, shared by the actors."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[tuple[str, str], str] = {}
        self.failures: list[str] = []
        self.runs: dict[str, int] = {}

    def ack(self, session: str, message_id: str, content: str) -> None:
        with self.lock:
            self.acked[(session, message_id)] = content

    def latest(self) -> tuple[tuple[str, str], str] | None:
        with self.lock:
            return next(reversed(self.acked.items()), None)

    def fail(self, what: str) -> None:
        with self.lock:
            self.failures.append(what)

    def ran(self, actor: str) -> None:
        with self.lock:
            self.runs[actor] = self.runs.get(actor, 0) + 1


def _message(actor: str, n: int) -> dict[str, str]:
    return {"id": f"{actor}-{n}", "role": "user", "content": f"{actor} wrote note {n} about kiwi"}


def _daemon_load(client: Client, ledger: Ledger, stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        batch = [_message("daemon", n * 10 + j) for j in range(n % 5 + 1)]
        try:
            client.call("ingest", {"session": "d", "messages": batch})
            for m in batch:
                ledger.ack("d", m["id"], m["content"])
            client.call("grep", {"query": "kiwi", "all": True, "limit": 5})
            client.call("query", {"query": "kiwi note", "chat_id": "d"})
            if n % 10 == 0:
                client.call("teach", {"content": f"kiwi fact {n}", "dedup_key": f"daemon-{n}"})
            seen = ledger.latest()
            if seen is not None:  # another process's acknowledged write is visible here
                (session, mid), content = seen
                got = client.call("describe", {"id": mid, "session": session})
                if got["message"]["content"] != content:
                    ledger.fail(f"daemon describe {mid}: {got}")
        except RPCError as exc:
            ledger.fail(f"daemon: {exc.code} {exc.message}")
        ledger.ran("daemon requests")


def _run(argv: list[str] | str, ledger: Ledger, what: str, **kw: Any) -> bytes | None:
    proc = subprocess.run(argv, capture_output=True, timeout=DEADLINE, check=False, **kw)
    if proc.returncode != 0:
        ledger.fail(
            f"{what}: exit {proc.returncode}: {proc.stdout[-500:]!r} {proc.stderr[-500:]!r}"
        )
        return None
    return proc.stdout


def _maintain(db: Path, ledger: Ledger, stop: threading.Event) -> None:
    while not stop.is_set():
        _run([str(BRAIN), "maintain", "--db", str(db), "--json"], ledger, "brain maintain")
        ledger.ran("brain maintain")


def _piped_serve(db: Path, ledger: Ledger, stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        seen = ledger.latest()
        message = _message("pipe", n)
        lines = [
            {"id": 1, "method": "ingest", "params": {"session": "p", "message": message}},
            {"id": 2, "method": "grep", "params": {"query": "kiwi", "all": True}},
        ]
        if seen is not None:
            (session, mid), _ = seen
            lines.append({"id": 3, "method": "describe", "params": {"id": mid, "session": session}})
        script = "printf '%s\\n' " + " ".join(shlex.quote(orjson.dumps(x).decode()) for x in lines)
        script += f" | {shlex.quote(str(BRAIN))} serve --db {shlex.quote(str(db))}"
        out = _run(script, ledger, "printf | brain serve", shell=True)
        ledger.ran("piped brain serve")
        if out is None:
            continue
        frames = {f["id"]: f for f in map(orjson.loads, out.splitlines())}
        if sorted(frames) != [x["id"] for x in lines]:
            ledger.fail(f"piped serve answered {sorted(frames)}: {out[-500:]!r}")
            continue
        errors = [f for f in frames.values() if "error" in f]
        if errors:
            ledger.fail(f"piped serve: {errors}")
            continue
        ledger.ack("p", message["id"], message["content"])
        if seen is not None and frames[3]["result"]["message"]["content"] != seen[1]:
            ledger.fail(f"piped serve did not see {seen}: {frames[3]}")


def _brain_call(db: Path, ledger: Ledger, stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        seen = ledger.latest()
        message = _message("call", n)
        params = orjson.dumps({"session": "c", "message": message}).decode()
        out = _run([str(BRAIN), "call", "ingest", params, "--db", str(db)], ledger, "call ingest")
        ledger.ran("brain call")
        if out is not None:
            ledger.ack("c", message["id"], message["content"])
        if seen is not None:
            (session, mid), content = seen
            params = orjson.dumps({"id": mid, "session": session}).decode()
            out = _run([str(BRAIN), "call", "describe", params, "--db", str(db)], ledger, "call")
            if out is not None and orjson.loads(out)["message"]["content"] != content:
                ledger.fail(f"brain call did not see {seen}")


def test_a_daemon_maintain_piped_serve_and_call_share_one_database_without_errors_or_loss(
    tmp_path: Path, size: Callable[[float, float], float], figures: dict[str, Any]
) -> None:
    db = tmp_path / "brain.db"
    seconds = size(10.0, 60.0)
    ledger = Ledger()
    stop = threading.Event()
    with (tmp_path / "daemon.log").open("wb") as stderr, Client.spawn(db, stderr=stderr) as client:
        client.call("ingest", {"session": "d", "message": _message("daemon", 0)})
        ledger.ack("d", "daemon-0", _message("daemon", 0)["content"])
        actors = [
            threading.Thread(target=_daemon_load, args=(client, ledger, stop)),
            threading.Thread(target=_maintain, args=(db, ledger, stop)),
            threading.Thread(target=_piped_serve, args=(db, ledger, stop)),
            threading.Thread(target=_brain_call, args=(db, ledger, stop)),
        ]
        for actor in actors:
            actor.start()
        time.sleep(seconds)  # the run's length, not an assertion
        stop.set()
        for actor in actors:
            actor.join(DEADLINE * 2)
        assert not any(a.is_alive() for a in actors)
        # The serving daemon sees every write the other processes acknowledged.
        missing = [
            key
            for key, content in ledger.acked.items()
            if client.call("describe", {"id": key[1], "session": key[0]})["message"]["content"]
            != content
        ]
        assert client.close() == 0

    assert ledger.failures == [], ledger.failures[:10]
    assert missing == []
    assert sql_rows(db, "PRAGMA integrity_check") == [("ok",)]
    engine = Brain(db)
    try:
        lost = [k for k, c in ledger.acked.items() if engine.get_message(*k)["content"] != c]
    finally:
        engine.close()
    assert lost == []
    for actor in ("daemon requests", "brain maintain", "piped brain serve", "brain call"):
        assert ledger.runs.get(actor, 0) > 0, ledger.runs
    figures.update(
        seconds=seconds,
        **ledger.runs,
        writes_acknowledged=len(ledger.acked),
        errors=len(ledger.failures),
        lost=len(lost),
    )
