"""A daemon configured with an OpenAI-compatible embeddings endpoint embeds through it in the
background, shows its progress in ``info``, and answers semantic grep from those vectors.
Only a daemon told explicitly which embedder to use takes a database's vectors over; a
one-shot ``brain call`` never does, and embeds what its own semantic grep needs."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from brain.vectors.embedders import HashEmbedder
from protocol import Client
from protocol.errors import Conflict
from tests.e2e.conftest import BRAIN, DEADLINE, create_db
from tests.openai_server import OpenAIServer

SECRET = "sk-embed-never-logged-0123456789"


def _embedded(client: Client) -> dict[str, Any]:
    """``info``'s embeddings once nothing is pending (polled; fails after DEADLINE).

    Nothing pending under another embedder than the daemon's own is not settled yet:
    a daemon told to switch embedders re-queues everything in its background embedder's
    first transaction, and ``info`` (a read) does not wait for that write.
    """
    give_up = time.monotonic() + DEADLINE
    while True:
        embeddings: dict[str, Any] = client.call("info")["embeddings"]
        mine = embeddings["stored_embedder"] in (None, embeddings["embedder"])
        if embeddings["pending"] == 0 and embeddings["stored"] > 0 and mine:
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


def _call(db: Path, method: str, params: dict[str, Any]) -> subprocess.CompletedProcess[bytes]:
    """``brain call METHOD PARAMS --db DB`` with the default embedder (no ``--embedder``)."""
    return subprocess.run(
        [str(BRAIN), "call", method, orjson.dumps(params).decode(), "--db", str(db)],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )


def test_brain_call_semantic_grep_with_another_embedder_refuses_and_leaves_the_daemons_index(
    tmp_path: Path,
) -> None:
    db = tmp_path / "owned.db"
    messages = [
        {"id": "u1", "role": "user", "content": "the deploy of service alpha failed"},
        {"id": "u2", "role": "user", "content": "my cat likes sleeping in the sun"},
    ]
    semantic = {"query": "alpha deploy", "mode": "semantic", "all": True}
    with Client.spawn(db, args=["--embedder", "hash"]) as daemon:
        daemon.call("ingest", {"session": "s", "messages": messages})
        before = _embedded(daemon)
        assert before["stored_embedder"] == "hash-v1-256"

        done = _call(db, "grep", semantic)
        assert done.returncode == 1
        error = orjson.loads(done.stdout)["error"]
        assert error["code"] == Conflict.CODE
        assert "hash-v1-256" in error["message"]

        assert daemon.call("info")["embeddings"] == before  # no vector deleted, none queued
        assert daemon.call("grep", semantic)["hits"][0]["id"] == "u1"
        assert daemon.close() == 0


def test_a_daemon_not_told_which_embedder_to_use_never_takes_the_index_over(
    tmp_path: Path,
) -> None:
    db = tmp_path / "owned.db"
    message = {"id": "u1", "role": "user", "content": "the deploy of service alpha failed"}
    semantic = {"query": "alpha deploy", "mode": "semantic", "all": True}
    with Client.spawn(db, args=["--embedder", "hash"]) as first:
        first.call("ingest", {"session": "s", "message": message})
        before = _embedded(first)
        with (
            (tmp_path / "second.log").open("wb") as err,
            Client.spawn(db, stderr=err) as second,  # the default embedder, not chosen
        ):
            with pytest.raises(Conflict, match="hash-v1-256"):
                second.call("grep", semantic)
            assert second.call("grep", {"query": "alpha", "all": True})["hits"]  # full text
            assert second.close() == 0
        assert first.call("info")["embeddings"] == before
        assert first.call("grep", semantic)["hits"]
        assert first.close() == 0


def test_brain_call_semantic_grep_embeds_the_queued_rows_it_needs_for_its_answer(
    tmp_path: Path,
) -> None:
    db = create_db(tmp_path / "oneshot.db")
    messages = [
        {"id": "u1", "role": "user", "content": "the deploy of service alpha failed"},
        {"id": "u2", "role": "user", "content": "my cat likes sleeping in the sun"},
    ]
    other = {"id": "o1", "role": "user", "content": "an unrelated session stays queued"}
    assert _call(db, "ingest", {"session": "s", "messages": messages}).returncode == 0
    assert _call(db, "ingest", {"session": "t", "message": other}).returncode == 0

    done = _call(db, "grep", {"query": "a kitten napping", "mode": "semantic", "session": "s"})
    assert done.returncode == 0, done.stderr.decode()
    found = orjson.loads(done.stdout)
    assert found["hits"][0]["id"] == "u2"
    assert found["pending"] == 1  # only its own session's rows were embedded
    hybrid = {"query": "kitten", "mode": "hybrid", "all": True}
    assert orjson.loads(_call(db, "grep", hybrid).stdout)["pending"] == 0
