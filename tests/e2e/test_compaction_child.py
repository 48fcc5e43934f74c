"""A daemon's compaction summarises in a child process, off the daemon's interpreter lock.

The offline summarizer is pure Python: on a daemon thread it took the interpreter
lock from every reader while a compaction ran (issue 17: semantic grep 18 -> 73 ms
during an 86 s compaction). The daemon hands each summary request to one child
(``brain.lcm.summary_child``) that lives as long as the daemon.
"""

from __future__ import annotations

from pathlib import Path

from protocol.client import Client
from tests.e2e.conftest import child_pids


def test_a_compaction_through_the_daemon_summarises_in_one_child_process(tmp_path: Path) -> None:
    turns = [
        {
            "role": ("user", "assistant")[i % 2],
            "content": f"Turn {i}: the deploy of service {i % 9} moved to Friday after the "
            f"review of ticket {4000 + i}; Dana asked about the cache budget again.",
        }
        for i in range(400)
    ]
    with Client.spawn(tmp_path / "b.db", args=["--auto-compact", "false"]) as client:
        assert not child_pids(client.proc.pid, "summary_child")
        for session in ("a", "b"):
            client.call("ingest", {"session": session, "messages": turns})
            report = client.call("compact", {"session": session})
            assert report["tokens_after"] < report["tokens_before"]
            summarizers = child_pids(client.proc.pid, "brain.lcm.summary_child")
            assert len(summarizers) == 1  # the same child serves the second session
        assembled = client.call("assemble", {"session": "a", "budget": 100_000, "detail": False})
        assert assembled["included"]["summaries"] >= 1
