"""A daemon configured with an OpenAI-compatible embeddings endpoint embeds through it in the
background, shows its progress in ``info``, and answers semantic grep from those vectors."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from brain.embedders import HashEmbedder
from protocol import Client
from protocol.errors import Conflict
from tests.e2e.conftest import DEADLINE
from tests.openai_server import OpenAIServer

SECRET = "sk-embed-never-logged-0123456789"


def _embedded(client: Client) -> dict[str, Any]:
    """``info``'s embeddings once nothing is pending (polled; fails after DEADLINE)."""
    give_up = time.monotonic() + DEADLINE
    while True:
        embeddings: dict[str, Any] = client.call("info")["embeddings"]
        if embeddings["pending"] == 0 and embeddings["stored"] > 0:
            return embeddings
        assert time.monotonic() < give_up, f"embedding never finished: {embeddings}"
        time.sleep(0.05)


def test_a_daemon_with_embedder_openai_finds_a_message_by_semantic_grep(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    messages = [
        {"id": "u1", "role": "user", "content": "the deploy of service alpha failed"},
        {"id": "a1", "role": "assistant", "content": "database migration timed out"},
        {"id": "u2", "role": "user", "content": "my cat likes sleeping in the sun"},
        {"id": "u3", "role": "user", "content": "my cat likes sleeping in the sun"},
    ]
    with OpenAIServer(embed=HashEmbedder(96)) as server:
        args = [
            "--embedder", "openai",
            "--embed-base-url", server.base_url,
            "--embed-model", "tiny-embed",
        ]  # fmt: skip
        env = {"BRAIN_EMBED_API_KEY": SECRET, "PATH": "/usr/bin:/bin"}
        db = tmp_path / "embed.db"
        with log.open("wb") as err, Client.spawn(db, args=args, env=env, stderr=err) as client:
            client.call("ingest", {"session": "s", "messages": messages})
            embeddings = _embedded(client)
            assert embeddings == {
                "embedder": "openai:tiny-embed",
                "dim": 96,
                "stored": 4,
                "pending": 0,
                "stored_embedder": "openai:tiny-embed",
            }
            found = client.call(
                "grep", {"query": "cats sleeping", "mode": "semantic", "session": "s"}
            )
            assert found["hits"][0]["id"] in ("u2", "u3")
            assert found["pending"] == 0
            assert client.close() == 0
        embedded = [text for r in server.requests for text in r.json()["input"]]
        # One dimension probe, then each distinct text once (u3 repeats u2), then the query.
        assert embedded.count("my cat likes sleeping in the sun") == 1
        assert {r.json()["model"] for r in server.requests} == {"tiny-embed"}
        assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in server.requests)
    assert SECRET not in log.read_text()


def test_a_daemon_whose_embedder_another_daemon_replaced_answers_conflict(
    tmp_path: Path,
) -> None:
    db = tmp_path / "two.db"
    message = {"id": "u1", "role": "user", "content": "the deploy of service alpha failed"}
    semantic = {"query": "alpha deploy", "mode": "semantic", "all": True}
    with (
        Client.spawn(db, args=["--embedder", "hash"]) as first,
        (tmp_path / "second.log").open("wb") as err,
    ):
        first.call("ingest", {"session": "s", "message": message})
        assert _embedded(first)["stored_embedder"] == "hash-v1-256"
        assert first.call("grep", semantic)["hits"]
        with Client.spawn(db, args=["--embedder", "static"], stderr=err) as second:
            assert _embedded(second)["stored_embedder"] == "minilm-static-v1"
            with pytest.raises(Conflict, match="another process changed the embedder"):
                first.call("grep", semantic)
            assert first.call("info")["embeddings"]["stored_embedder"] == "minilm-static-v1"
            assert second.call("grep", semantic)["hits"]
            assert second.close() == 0
        assert first.close() == 0
