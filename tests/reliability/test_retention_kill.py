"""SIGKILL during retention passes loses no acknowledged message and leaves a database
that opens and that ``doctor`` finds clean.

Each trial first stores and embeds a few thousand 90-day-old messages through a
daemon without limits (so the next pass has vectors to drop and pages to hand
back), then starts a daemon with an age limit, a size limit and a pass every
0.2 s while a client keeps ingesting, and kills it at a random moment once the
pass has committed its first batch. With the
process dead it checks the files (integrity, doctor, every acknowledged message)
before the next trial. CI: 3 trials; long mode: 30.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from brain import Brain, BrainConfig
from brain.clock import iso
from brain.ops.doctor import doctor
from protocol.client import Client, ClientClosed
from tests.reliability.conftest import sql_rows

PREFILL = 4_000
"""Old messages each trial stores and embeds before the daemon with limits starts."""
ARGS = [
    "--embedder",
    "hash",
    "--retention-max-age-days",
    "30",
    "--retention-max-bytes",
    "1000000",
    "--retention-every-s",
    "0.2",
]


def _batch(tag: str, n: int) -> list[dict[str, Any]]:
    at = iso(datetime.now(UTC) - timedelta(days=90))
    return [
        {
            "id": f"{tag}-{j}",
            "role": "user",
            "content": f"{tag} line {j} " + " ".join(f"{tag}w{j}x{k}" for k in range(20)),
            "created_at": at,
        }
        for j in range(n)
    ]


def _prefill(db: Path, trial: int, acked: dict[tuple[str, str], str]) -> None:
    """Old messages stored and embedded by a daemon with no retention limit."""
    with Client.spawn(db, args=["--embedder", "hash"], stderr=subprocess.DEVNULL) as client:
        for n in range(PREFILL // 500):
            batch = _batch(f"p{trial}-{n}", 500)
            client.call("ingest", {"session": f"s{n % 3}", "messages": batch})
            acked.update({(f"s{n % 3}", m["id"]): m["content"] for m in batch})
        deadline = time.monotonic() + 120
        while client.call("info")["embeddings"]["pending"]:
            assert time.monotonic() < deadline, "the prefill was never embedded"
            time.sleep(0.1)
        client.call("shutdown")


def _load(client: Client, trial: int, acked: dict[tuple[str, str], str], stop: threading.Event):
    """Small batches of old messages, with pauses (so the background worker's turns come),
    until the daemon dies; record what was answered."""
    n = 0
    while not stop.is_set():
        n += 1
        session = f"s{n % 3}"
        batch = _batch(f"t{trial}-{n}", 20)
        try:
            client.call("ingest", {"session": session, "messages": batch})
        except (ClientClosed, OSError, ValueError):
            return
        for m in batch:
            acked[(session, m["id"])] = m["content"]
        stop.wait(0.3)


def test_sigkill_during_retention_passes_loses_no_message_and_doctor_is_clean(
    tmp_path: Path, size: Any, figures: dict[str, Any]
) -> None:
    trials = size(3, 30)
    seed = int(os.environ.get("BRAIN_RELIABILITY_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    db = tmp_path / "brain.db"
    acked: dict[tuple[str, str], str] = {}
    dropped = 0
    for trial in range(trials):
        _prefill(db, trial, acked)
        client = Client.spawn(db, args=ARGS, stderr=subprocess.DEVNULL)
        try:
            assert client.call("ping") == {"pong": True}
            stop = threading.Event()
            worker = threading.Thread(target=_load, args=(client, trial, acked, stop))
            worker.start()
            # Kill once the pass is under way (its first batch committed), at a random
            # moment of what follows: later batches, the vacuum steps, the checkpoint.
            deadline = time.monotonic() + 120
            while client.call("info")["retention"]["vectors_dropped"] == dropped:
                assert time.monotonic() < deadline, "no retention pass started"
                time.sleep(0.02)
            stop.wait(rng.uniform(0.0, 0.4))
            os.kill(client.proc.pid, signal.SIGKILL)
            client.proc.wait()
            stop.set()
            worker.join(30)
            assert not worker.is_alive()
        finally:
            client.kill()
        assert client.proc.returncode == -signal.SIGKILL

        assert sql_rows(db, "PRAGMA integrity_check") == [("ok",)]
        report = doctor(db, BrainConfig())
        assert report.ok, f"seed {seed}: {report.to_dict()}"
        engine = Brain(db, BrainConfig())
        try:
            lost = [
                key
                for key, content in acked.items()
                if engine.get_message(key[0], key[1])["content"] != content
            ]
            assert lost == [], f"seed {seed}: lost {len(lost)} messages, e.g. {lost[:5]}"
            dropped = engine.info().retention.vectors_dropped
        finally:
            engine.close()
    figures.update(seed=seed, trials=trials, messages_acknowledged=len(acked), lost=0)


pytestmark = pytest.mark.slow
