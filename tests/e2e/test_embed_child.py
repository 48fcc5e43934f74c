"""A daemon's background worker embeds a backlog in a child process, off the daemon's
interpreter lock.

The static embedder is Python and small numpy calls; on the worker thread a backlog
of thousands of rows held the lock the event loop answers ``ping`` and ``info`` with,
and shared one core with ingest. The daemon hands batches of ``MIN_BATCH`` rows or
more to one child (``brain.vectors.embed_child``) that lives as long as the daemon;
the vectors are the ones the worker would have made (``tests/brain/vectors/
test_embed_child.py`` checks them equal).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from protocol.client import Client
from tests.e2e.conftest import DEADLINE, child_pids


def _embedders(pid: int) -> list[int]:
    return child_pids(pid, "brain.vectors.embed_child")


def _embedded(client: Client) -> dict[str, Any]:
    give_up = time.monotonic() + DEADLINE
    while True:
        embeddings: dict[str, Any] = client.call("info")["embeddings"]
        if embeddings["pending"] == 0 and embeddings["stored"] > 0:
            return embeddings
        assert time.monotonic() < give_up, f"embedding never finished: {embeddings}"
        time.sleep(0.05)


def test_a_backlog_is_embedded_by_one_child_process_and_found_by_semantic_grep(
    tmp_path: Path,
) -> None:
    count = 300  # one batch of the worker's, over brain.vectors.embed_child.MIN_BATCH (256)
    turns = [
        {
            "id": f"m{i}",
            "role": ("user", "assistant")[i % 2],
            "content": f"Note {i}: {('alpha', 'kestrel', 'quartz', 'meadow')[i % 4]} "
            f"release {i * 7} of project {('orion', 'basalt', 'tundra')[i % 3]} "
            f"waits on ticket {9000 + i}.",
        }
        for i in range(count)
    ]
    with Client.spawn(tmp_path / "b.db") as client:
        assert _embedders(client.proc.pid) == []  # nothing started before a backlog
        client.call("ingest", {"session": "s", "messages": turns})
        embeddings = _embedded(client)
        assert embeddings["stored"] == count
        assert embeddings["embedder"] == embeddings["stored_embedder"] == "minilm-static-v1"
        children = _embedders(client.proc.pid)
        assert len(children) == 1
        for i in (0, 5, 123, count - 1):
            found = client.call(
                "grep", {"query": turns[i]["content"], "mode": "semantic", "session": "s"}
            )
            assert found["hits"][0]["id"] == f"m{i}"
        assert client.close() == 0
    assert not Path(f"/proc/{children[0]}").exists()  # it ended with the daemon
