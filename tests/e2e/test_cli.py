"""``brain call`` runs one request through the daemon's dispatcher and prints
JSON; the package layering holds in a fresh interpreter (STYLE 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from brain import __version__
from protocol import errors
from protocol.methods import METHODS
from tests.e2e.conftest import BRAIN, DEADLINE, create_db, stored_client_ids


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """An existing database (``brain call`` never creates one)."""
    return create_db(tmp_path / "brain.db")


def _brain(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(BRAIN), *args], input=stdin, capture_output=True, timeout=DEADLINE, check=False
    )


def _json(done: subprocess.CompletedProcess[bytes]) -> Any:
    return orjson.loads(done.stdout)


def test_brain_call_info_prints_the_version_and_counts(db_path: Path) -> None:
    done = _brain("call", "info", "--db", str(db_path))
    assert done.returncode == 0, done.stderr.decode()
    info = _json(done)
    assert info["version"] == __version__
    for count in ("conversations", "messages", "summaries", "nodes", "edges"):
        assert info[count] == 0


def test_brain_call_ingest_stores_a_message_that_info_then_counts(db_path: Path) -> None:
    params = '{"session":"s","message":{"role":"user","content":"hi"}}'
    done = _brain("call", "ingest", params, "--db", str(db_path))
    assert done.returncode == 0, done.stderr.decode()
    result = _json(done)
    assert (result["session"], result["ingested"], result["duplicates"]) == ("s", 1, 0)
    assert len(result["ids"]) == 1

    info = _json(_brain("call", "info", "--db", str(db_path)))
    assert (info["conversations"], info["messages"]) == (1, 1)


def test_brain_call_takes_params_after_the_flags_too(db_path: Path) -> None:
    params = '{"session":"s","message":{"id":"late","role":"user","content":"hi"}}'
    done = _brain("call", "ingest", "--db", str(db_path), params)
    assert done.returncode == 0, done.stderr.decode()
    assert stored_client_ids(db_path, "s") == ["late"]
    extra = _brain("call", "info", "--db", str(db_path), "{}", "surplus")
    assert extra.returncode == 2
    assert b"unrecognized arguments" in extra.stderr


def test_brain_call_reads_params_from_stdin_when_given_a_dash(db_path: Path) -> None:
    params = b'{"session":"s","message":{"id":"piped","role":"user","content":"hi"}}'
    done = _brain("call", "ingest", "-", "--db", str(db_path), stdin=params)
    assert done.returncode == 0, done.stderr.decode()
    assert _json(done)["ids"] == ["piped"]
    assert stored_client_ids(db_path, "s") == ["piped"]


def test_brain_call_of_an_unknown_method_exits_nonzero_with_an_error_object(
    db_path: Path,
) -> None:
    done = _brain("call", "nosuch", "--db", str(db_path))
    assert done.returncode != 0
    assert _json(done) == {
        "error": {"code": errors.MethodNotFound.CODE, "message": "unknown method 'nosuch'"}
    }


def test_brain_call_with_bad_params_exits_nonzero_naming_the_field(db_path: Path) -> None:
    done = _brain(
        "call", "ingest", '{"session":"s","message":{"role":"robot"}}', "--db", str(db_path)
    )
    assert done.returncode != 0
    error = _json(done)["error"]
    assert error["code"] == errors.InvalidParams.CODE
    assert error["message"].startswith("params.message.")


def test_brain_call_with_a_misspelt_field_names_it_rather_than_the_field_it_hides(
    db_path: Path,
) -> None:
    done = _brain("call", "grep", '{"query":"x","sesion":"s"}', "--db", str(db_path))
    assert done.returncode != 0
    assert _json(done)["error"] == {
        "code": errors.InvalidParams.CODE,
        "message": "params.sesion: unknown field (did you mean session?)",
        "data": {"unknown": ["sesion"]},
    }


def test_brain_call_with_params_that_are_not_json_exits_nonzero_and_prints_nothing(
    db_path: Path,
) -> None:
    done = _brain("call", "ingest", "{not json", "--db", str(db_path))
    assert done.returncode != 0
    assert done.stdout == b""
    assert b"not JSON" in done.stderr


def _loaded_after(statement: str) -> set[str]:
    """Top-level packages a fresh interpreter has loaded after running ``statement``."""
    report = "import sys; print(' '.join({m.split('.')[0] for m in sys.modules}))"
    code = f"{statement}\n{report}"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=DEADLINE, check=True
    )
    return set(done.stdout.decode().split())


def test_importing_brain_loads_neither_anyio_nor_daemon_nor_protocol() -> None:
    loaded = _loaded_after("import brain")
    assert "brain" in loaded
    assert loaded.isdisjoint({"anyio", "daemon", "protocol", "structlog"})


def test_importing_every_protocol_module_does_not_load_brain_or_daemon() -> None:
    loaded = _loaded_after(
        "import protocol, protocol.client, protocol.errors, protocol.fields, "
        "protocol.framing, protocol.methods, protocol.wire"
    )
    assert "protocol" in loaded
    assert loaded.isdisjoint({"brain", "daemon"})


def test_brain_call_on_a_missing_database_is_a_storage_failure_and_creates_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "nowhere" / "brain.db"
    params = '{"session":"s","message":{"role":"user","content":"hi"}}'
    done = _brain("call", "ingest", params, "--db", str(db))
    assert done.returncode == 1
    error = _json(done)["error"]
    assert error["code"] == errors.StorageFailure.CODE
    assert "does not exist" in error["message"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ["maintain"],
        ["sync", "--workspace", "."],
        ["bootstrap", "--session", "s", "transcript.jsonl"],
        ["doctor"],
    ],
    ids=lambda command: command[0],
)
def test_the_offline_commands_refuse_a_missing_database_and_create_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    db = tmp_path / "nowhere" / "brain.db"
    done = _brain(*command, "--db", str(db))
    assert done.returncode != 0
    assert b"does not exist" in done.stderr or b"no database" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_brain_version_prints_the_package_version() -> None:
    done = _brain("--version")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == f"brain {__version__}\n"


def test_each_subcommand_help_lists_only_the_options_it_takes() -> None:
    doctor = _brain("doctor", "--help").stdout.decode()
    for own in ("--repair", "--deep", "--json", "--db", "--config", "--busy-timeout-ms"):
        assert own in doctor
    for other in ("--max-inflight", "--embedder", "--llm-model", "--fresh-tail-count"):
        assert other not in doctor
    call = _brain("call", "--help").stdout.decode()
    assert "--embedder" in call
    assert "--max-inflight" not in call
    assert "--max-inflight" in _brain("serve", "--help").stdout.decode()


def test_a_flag_of_another_command_is_refused_by_name(db_path: Path) -> None:
    done = _brain("doctor", "--db", str(db_path), "--max-inflight", "4")
    assert done.returncode == 2
    assert b"unrecognized arguments: --max-inflight" in done.stderr


def test_serve_help_shows_the_choices_of_enumerated_options() -> None:
    done = _brain("serve", "--help")
    assert done.returncode == 0
    text = done.stdout.decode()
    assert "--embedder {static,onnx,openai,hash}" in text
    assert "--log-level {debug,info,warning,error}" in text


def test_call_help_lists_every_method_with_its_summary() -> None:
    text = _brain("call", "--help").stdout.decode()
    listed = dict(
        line.strip().split(maxsplit=1)
        for line in text.split("methods (", 1)[1].splitlines()[1:]
        if line.strip()
    )
    assert listed == {name: spec.summary for name, spec in METHODS.items()}


def test_brain_call_info_loads_neither_numpy_nor_tokenizers_nor_httpx(db_path: Path) -> None:
    # info reads counts; the vector machinery, the embedding model and the HTTP
    # client load when a command needs them (start-up cost of every `brain call`).
    code = (
        "import sys\n"
        "from daemon.cli import main\n"
        f"code = main(['call', 'info', '--db', {str(db_path)!r}])\n"
        "print(' '.join({m.split('.')[0] for m in sys.modules}), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=DEADLINE, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    assert orjson.loads(done.stdout)["messages"] == 0
    loaded = set(done.stderr.decode().split())
    assert {"brain", "apsw"} <= loaded
    assert loaded.isdisjoint({"numpy", "tokenizers", "httpx", "onnxruntime"})
