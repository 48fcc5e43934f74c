"""A daemon whose LLM and embeddings providers hang keeps doing database work, and no
request waits on a provider past ``provider_deadline_s``.

The providers are real HTTP servers on loopback that hold every request until the
test releases them; the daemon is a real subprocess spoken to over its pipes.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from brain.vectors.embedders import HashEmbedder
from tests.e2e.conftest import (
    BRAIN,
    DEADLINE,
    Daemon,
    Spawn,
    module_argv,
    request_frame,
    serve_argv,
)
from tests.openai_server import OpenAIServer, Reply

DIM = 32
HISTORY = [
    {"id": "u1", "role": "user", "content": "the deploy of service alpha failed on friday"},
    {"id": "a1", "role": "assistant", "content": "the database migration timed out at 9pm"},
    {"id": "u2", "role": "user", "content": "my cat likes sleeping in the sun"},
]


@pytest.fixture
def llm() -> Iterator[OpenAIServer]:
    """A chat-completions endpoint (replies queued by the test)."""
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def embeddings() -> Iterator[OpenAIServer]:
    """An embeddings endpoint answering with hash vectors whenever it is not held."""
    with OpenAIServer(embed=HashEmbedder(DIM)) as server:
        yield server


def _provider_args(llm: OpenAIServer, embeddings: OpenAIServer, *extra: str) -> list[str]:
    return [
        "--llm-base-url", llm.base_url,
        "--llm-model", "tiny-model",
        "--embedder", "openai",
        "--embed-base-url", embeddings.base_url,
        "--embed-model", "tiny-embed",
        "--embed-dim", str(DIM),
        "--auto-compact", "false",
        *extra,
    ]  # fmt: skip


def _start(spawn: Spawn, db: Path, args: list[str]) -> Daemon:
    """A daemon with HISTORY stored and embedded (so the background embedder is idle)."""
    daemon = spawn(module_argv(db, *args))
    ingested = daemon.call("h", "ingest", {"session": "s", "messages": HISTORY})
    assert "result" in ingested, ingested
    give_up = time.monotonic() + DEADLINE
    while daemon.call("i", "info")["result"]["embeddings"]["pending"]:
        assert time.monotonic() < give_up, "the history was never embedded"
        time.sleep(0.05)
    return daemon


def _by_id(frames: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {frame["id"]: frame for frame in frames}


def test_ingest_and_info_are_answered_while_eight_provider_calls_hang(
    spawn: Spawn, tmp_path: Path, llm: OpenAIServer, embeddings: OpenAIServer
) -> None:
    # A deadline far beyond the test: nothing may be answered by giving up.
    daemon = _start(spawn, tmp_path / "stall.db", _provider_args(llm, embeddings))
    llm.enqueue(*[Reply.text("Alpha's deploy failed [u1].") for _ in range(4)])
    llm.hold()
    embeddings.hold()
    for n in range(4):
        expand = {"prompt": "why did the deploy fail?", "query": "deploy alpha", "session": "s"}
        daemon.send(request_frame(f"x{n}", "expand_query", expand))
        grep = {"query": "cats sleeping", "mode": "semantic", "session": "s"}
        daemon.send(request_frame(f"g{n}", "grep", grep))
    # All eight provider calls are hanging (twice what the old 4 database threads
    # could hold) before the database work is sent. Waiting for only some of them
    # raced: an expand_query whose draft had run but whose model call was still on
    # its way to the provider made ``llm.held`` 3 when checked below, under load.
    give_up = time.monotonic() + DEADLINE
    while llm.held < 4 or embeddings.held < 4:
        assert time.monotonic() < give_up, "the provider calls never reached the providers"
        time.sleep(0.02)

    message = {"id": "o1", "role": "user", "content": "an unrelated turn"}
    daemon.send(request_frame("ingest", "ingest", {"session": "other", "message": message}))
    # info is independent of that ingest, so sent beside it, it may be answered
    # first (answers come out of order): ask once the ingest is answered.
    first = _by_id(daemon.frames(1))
    daemon.send(request_frame("info", "info"))
    first.update(_by_id(daemon.frames(1)))

    assert first["ingest"]["result"]["ingested"] == 1
    assert first["info"]["result"]["messages"] == len(HISTORY) + 1
    # All eight hang at once, and still did when those were answered.
    assert llm.held == 4
    assert embeddings.held >= 4
    llm.release()
    embeddings.release()
    rest = _by_id(daemon.frames(8))
    for n in range(4):
        answer = rest[f"x{n}"]["result"]
        assert answer["mode"] == "llm:tiny-model", answer
        assert answer["answer"] == "Alpha's deploy failed [u1]."
        assert rest[f"g{n}"]["result"]["hits"][0]["id"] == "u2"


def test_graph_calls_hanging_on_the_embedder_leave_ingest_answered(
    spawn: Spawn, tmp_path: Path, llm: OpenAIServer, embeddings: OpenAIServer
) -> None:
    daemon = _start(spawn, tmp_path / "graph.db", _provider_args(llm, embeddings))
    embeddings.hold()
    calls: list[tuple[str, dict[str, Any]]] = [
        ("query", {"query": "deploy failures"}),
        ("teach", {"content": "deploys run on fridays", "kind": "teaching"}),
        ("correction", {"content": "deploys never run on fridays"}),
        ("assemble", {"session": "s", "budget": 1000, "recall": "on"}),
    ]
    for method, params in calls:
        daemon.send(request_frame(method, method, params))
    embeddings.wait_held(len(calls))

    message = {"id": "o1", "role": "user", "content": "an unrelated turn"}
    daemon.send(request_frame("ingest", "ingest", {"session": "other", "message": message}))
    answered = daemon.frame()

    assert answered["id"] == "ingest"
    assert answered["result"]["ingested"] == 1
    embeddings.release()
    rest = _by_id(daemon.frames(len(calls)))
    failed = [frame for frame in rest.values() if "error" in frame]
    assert not failed, failed
    assert rest["assemble"]["result"]["recall"]["mode"] == "on"


def test_a_request_past_the_provider_deadline_gets_its_fallback_or_error(
    spawn: Spawn, tmp_path: Path, llm: OpenAIServer, embeddings: OpenAIServer
) -> None:
    args = _provider_args(llm, embeddings, "--provider-deadline-s", "1")
    daemon = _start(spawn, tmp_path / "deadline.db", args)
    llm.hold()
    embeddings.hold()
    try:
        expand = {"prompt": "why did the deploy fail?", "query": "deploy alpha", "session": "s"}
        daemon.send(request_frame("x", "expand_query", expand))
        grep = {"query": "cats sleeping", "mode": "hybrid", "session": "s"}
        daemon.send(request_frame("g", "grep", grep))
        # Read while both providers still hang: the answers come from the deadline.
        answers = _by_id(daemon.frames(2, timeout=15))
        assert llm.held
        assert embeddings.held
    finally:
        llm.release()
        embeddings.release()

    answer = answers["x"]["result"]
    assert answer["fallback"] is True
    assert answer["mode"] == "extractive"
    assert "[u1]" in answer["answer"]
    error = answers["g"]["error"]
    assert error["code"] == -32007
    # Either deadline may fire first, the daemon's or the HTTP client's own (the
    # same 1 s): both name it, and both are the same error to the caller.
    assert "within 1s" in error["message"] or "within its 1s deadline" in error["message"]
    assert error["data"]["deadline_s"] == 1


def test_a_one_shot_call_waits_on_a_hung_embedder_no_longer_than_the_deadline(
    tmp_path: Path, llm: OpenAIServer, embeddings: OpenAIServer
) -> None:
    db = tmp_path / "oneshot.db"
    args = _provider_args(llm, embeddings, "--provider-deadline-s", "1")
    params = orjson.dumps({"query": "cats", "mode": "semantic", "all": True}).decode()
    # Only brain serve creates a database: a first one with no input makes it and exits.
    created = subprocess.run(
        serve_argv(db, *args), input=b"", capture_output=True, timeout=DEADLINE, check=False
    )
    assert created.returncode == 0, created.stderr.decode()
    embeddings.hold()
    try:
        done = subprocess.run(
            [str(BRAIN), "call", "--db", str(db), *args, "grep", params],
            capture_output=True,
            timeout=DEADLINE,
            check=False,
        )
    finally:
        embeddings.release()

    assert done.returncode == 1, done.stderr.decode()
    error = orjson.loads(done.stdout)["error"]
    assert error["code"] == -32007
    assert error["data"]["deadline_s"] == 1


def test_a_sync_past_the_deadline_leaves_its_new_nodes_pending(
    spawn: Spawn, tmp_path: Path, llm: OpenAIServer, embeddings: OpenAIServer
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "MEMORY.md").write_text("# Deploys\nDeploys run on fridays.\n")
    args = _provider_args(llm, embeddings, "--provider-deadline-s", "1")
    daemon = _start(spawn, tmp_path / "sync.db", args)
    embeddings.hold()
    try:
        daemon.send(request_frame("sync", "sync", {"workspace": str(workspace)}))
        synced = daemon.frame(timeout=15)
        assert embeddings.held  # answered while the embedder still hangs
    finally:
        embeddings.release()

    report = synced["result"]
    assert report["added"] >= 1
    assert report["embedded"] == 0
    assert report["pending"] == report["added"]
