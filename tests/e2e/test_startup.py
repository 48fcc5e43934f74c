"""Start-up loads what the first answer needs and no more.

``brain call info`` and a daemon's first ``info`` answer read the database and
nothing else: the engine parts a method uses (assembler, compactor and
summarizer, search, the graph, the vector index with numpy, the embedding
model) are imported by the first request that needs them, and the daemon's
background work starts after its first answer. Each case runs in a fresh
interpreter and records ``sys.modules`` at the moment of the answer.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from daemon.handlers import HANDLERS
from protocol import errors
from tests.e2e.conftest import BRAIN, DEADLINE, create_db, user_message

NOT_FOR_INFO = frozenset(
    {
        "numpy",
        "tokenizers",
        "httpx",
        "regex",
        "brain.lcm.assemble",
        "brain.lcm.bootstrap",
        "brain.lcm.compaction",
        "brain.lcm.describe",
        "brain.payloads.explore",
        "brain.graph.nodes",
        "brain.lcm.ingest",
        "brain.graph.maintain",
        "brain.recall.expand",
        "brain.graph.retrieval",
        "brain.recall.search",
        "brain.lcm.summarize",
        "brain.lcm.suppress",
        "brain.graph.sync",
        "brain.vectors.index",
        "protocol.client",
        "protocol.methods",
    }
)
"""Modules neither path may have loaded when it answers ``info``."""

_CALL = """
import sys
from daemon.cli import main
code = main(["call", "info", "--db", sys.argv[2]])
with open(sys.argv[1], "w") as out:
    out.write("\\n".join(sorted(sys.modules)))
sys.exit(code)
"""

_CALL_ANY = """
import sys
from daemon.cli import main
code = main(["call", sys.argv[2], sys.argv[3], "--db", sys.argv[4]])
with open(sys.argv[1], "w") as out:
    out.write("\\n".join(sorted(sys.modules)))
sys.exit(code)
"""

LOOP_FREE_CALLS: dict[str, dict[str, Any]] = {
    "ping": {},
    "info": {},
    "ingest": {"session": "s", "message": {"role": "user", "content": "one more"}},
    "describe": {"id": "m0000", "session": "s"},
    "expand": {"id": "sum_missing", "session": "s"},
    "suppress": {"ids": ["m0001"], "session": "s"},
    "unsuppress": {"ids": ["m0001"], "session": "s"},
    "grant": {"sessions": ["s"], "methods": ["grep"], "token_cap": 100, "ttl_s": 60},
    "revoke": {"grant_id": "g" * 20},
    "learn": {"outcome": 1.0},
    "trace": {},
    "health": {},
    "save": {},
    "reload": {},
    "entities": {"name": "m", "all": True},
    "entity": {"name": "nobody", "session": "s"},
    "recent": {"session": "s", "period": "day"},
}
"""Params for each loop-free method (some answer not-found: the handler ran all the same)."""

_SERVE = """
import sys
import daemon.stdio
from daemon.cli import main

send = daemon.stdio.StdoutSink.send
first = [True]

async def send_first_recording_modules(self, frame):
    if first[0]:
        first[0] = False
        with open(sys.argv[1], "w") as out:
            out.write("\\n".join(sorted(sys.modules)))
    await send(self, frame)

daemon.stdio.StdoutSink.send = send_first_recording_modules
sys.exit(main(["serve", "--db", sys.argv[2]]))
"""
"""``brain serve`` with its stdout sink recording ``sys.modules`` as the first answer goes out."""


def _db_with_pending_embeddings(tmp_path: Path) -> Path:
    """A database with a session of messages queued for embedding (``brain call`` has no
    background embedder, so all of them stay queued)."""
    db = create_db(tmp_path / "startup.db")
    params = {"session": "s", "messages": [user_message(i) for i in range(20)]}
    done = subprocess.run(
        [str(BRAIN), "call", "ingest", orjson.dumps(params).decode(), "--db", str(db)],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert orjson.loads(done.stdout)["ingested"] == 20
    return db


def _loaded(path: Path) -> set[str]:
    return set(path.read_text().split())


def test_brain_call_info_answers_without_loading_the_engine_parts_it_does_not_use(
    tmp_path: Path,
) -> None:
    db = _db_with_pending_embeddings(tmp_path)
    modules = tmp_path / "modules.txt"
    done = subprocess.run(
        [sys.executable, "-c", _CALL, str(modules), str(db)],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    info = orjson.loads(done.stdout)
    assert info["messages"] == 20
    assert info["embeddings"]["pending"] == 20
    loaded = _loaded(modules)
    assert "brain.engine" in loaded
    assert loaded.isdisjoint(NOT_FOR_INFO), sorted(loaded & NOT_FOR_INFO)
    # Nothing was logged, so the logging library stays unloaded.
    assert "structlog" not in loaded


def test_a_daemons_first_info_answer_comes_before_its_background_work_loads_anything(
    tmp_path: Path,
) -> None:
    db = _db_with_pending_embeddings(tmp_path)
    modules = tmp_path / "modules.txt"
    daemon = subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(modules), str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        out, _ = daemon.communicate(b'{"id": 1, "method": "info"}\n', timeout=DEADLINE)
    finally:
        daemon.kill()
    assert daemon.returncode == 0
    info = orjson.loads(out.splitlines()[0])["result"]
    assert info["messages"] == 20
    assert info["embeddings"]["pending"] == 20
    loaded = _loaded(modules)
    assert "brain.engine" in loaded
    assert loaded.isdisjoint(NOT_FOR_INFO), sorted(loaded & NOT_FOR_INFO)
    # The "serving" line is logged without structlog (daemon.logs renders plain events).
    assert "structlog" not in loaded


def test_every_loop_free_method_has_a_brain_call_case() -> None:
    assert {name for name, h in HANDLERS.items() if h.loop_free} == set(LOOP_FREE_CALLS)


@pytest.mark.parametrize("method", sorted(LOOP_FREE_CALLS))
def test_brain_call_runs_a_loop_free_method_without_loading_asyncio(
    tmp_path: Path, method: str
) -> None:
    db = _db_with_pending_embeddings(tmp_path)
    modules = tmp_path / "modules.txt"
    params = orjson.dumps(LOOP_FREE_CALLS[method]).decode()
    done = subprocess.run(
        [sys.executable, "-c", _CALL_ANY, str(modules), method, params, str(db)],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    answer = orjson.loads(done.stdout)
    if done.returncode != 0:
        # Answered by the engine (nothing by that id), not an internal error.
        assert answer["error"]["code"] == errors.NotFound.CODE, answer
    assert "asyncio" not in _loaded(modules)
