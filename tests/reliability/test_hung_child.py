"""A helper child that stops answering (SIGSTOP, as a wedged process looks) never stalls
the daemon's work for good nor holds its shutdown past the bound.

Real daemon, real child, real SIGSTOP: the child is killed at its answer deadline
(``brain.lcm.summary_child.ANSWER_DEADLINE_S``, 60 s) and the summary made in the
daemon, as when a child dies. Today ``compact`` got no answer in 150 s.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from protocol.client import Client
from tests.e2e.conftest import child_pids

SHUTDOWN_BOUND_S = 10.0


def _turns(n: int) -> list[dict[str, str]]:
    return [
        {
            "role": ("user", "assistant")[i % 2],
            "content": f"Turn {i}: the deploy of service {i % 9} moved to Friday after the "
            f"review of ticket {4000 + i}; Dana asked about the cache budget again.",
        }
        for i in range(n)
    ]


def test_a_stopped_summary_child_is_replaced_and_compaction_and_shutdown_still_finish(
    tmp_path: Path,
) -> None:
    client = Client.spawn(tmp_path / "b.db", args=["--auto-compact", "false"])
    stopped: list[int] = []
    try:
        client.call("ingest", {"session": "a", "messages": _turns(200)})
        client.call("compact", {"session": "a"})
        stopped = child_pids(client.proc.pid, "brain.lcm.summary_child")
        assert len(stopped) == 1
        os.kill(stopped[0], signal.SIGSTOP)

        client.call("ingest", {"session": "b", "messages": _turns(200)})
        # Answered after the child's 60 s deadline (one summary waits on it; the
        # rest go to a new child): a bound, not a timing measurement.
        report = client.call("compact", {"session": "b"}, timeout=120)
        assert report["tokens_after"] < report["tokens_before"]
        assert stopped[0] not in child_pids(client.proc.pid, "brain.lcm.summary_child")

        # Stop a child again and shut down: the bound holds with a stopped child.
        again = child_pids(client.proc.pid, "brain.lcm.summary_child")
        for pid in again:
            os.kill(pid, signal.SIGSTOP)
        stopped += again
        start = time.monotonic()
        client.close(timeout=30)
        assert time.monotonic() - start < SHUTDOWN_BOUND_S
    finally:
        for pid in stopped:  # never leave a stopped process behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if client.proc.poll() is None:
            client.kill()


def _notes(start: int, n: int) -> list[dict[str, str]]:
    return [
        {"id": f"m{i}", "role": "user", "content": f"Note {i}: release {i * 7} waits on {i}."}
        for i in range(start, start + n)
    ]


def _pending(client: Client) -> int:
    pending: int = client.call("info")["embeddings"]["pending"]
    return pending


def test_a_stopped_embedding_child_is_replaced_and_the_backlog_still_embedded(
    tmp_path: Path,
) -> None:
    client = Client.spawn(tmp_path / "e.db", args=["--auto-compact", "false"])
    stopped: list[int] = []
    try:
        client.call("ingest", {"session": "s", "messages": _notes(0, 300)})
        give_up = time.monotonic() + 60
        while _pending(client):
            assert time.monotonic() < give_up, "the first backlog was never embedded"
            time.sleep(0.1)
        stopped = child_pids(client.proc.pid, "brain.vectors.embed_child")
        assert len(stopped) == 1
        os.kill(stopped[0], signal.SIGSTOP)

        client.call("ingest", {"session": "s", "messages": _notes(300, 600)})
        # The batch waits out the child's deadline (30 s + 10 ms a text), then is
        # embedded in the daemon: a bound, not a timing measurement. Today: never.
        give_up = time.monotonic() + 120
        while _pending(client):
            assert time.monotonic() < give_up, "600 rows stayed unembedded"
            time.sleep(0.2)
        start = time.monotonic()
        client.close(timeout=30)
        assert time.monotonic() - start < SHUTDOWN_BOUND_S
    finally:
        for pid in stopped:  # never leave a stopped process behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if client.proc.poll() is None:
            client.kill()
