"""The NDJSON wire over real pipes: every line answered with its documented
code, stdout carrying nothing but frames, pipelined order kept (DESIGN §4)."""

from __future__ import annotations

import io
import os
import random
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from protocol import errors
from protocol.framing import encode_frame
from tests.e2e.conftest import (
    BRAIN,
    DEADLINE,
    Spawn,
    ingest_frame,
    module_argv,
    opened,
    parse_frame,
    request_frame,
    serve_argv,
    stored_client_ids,
    user_message,
)

PONG = {"pong": True}
ISSUE_INPUT = r'{"id":1,"method":"ping"}\nnot json\n'


def test_the_issue_pipeline_prints_exactly_two_lines_and_exits_zero(db_path: Path) -> None:
    pipeline = f"printf '{ISSUE_INPUT}' | {shlex.quote(str(BRAIN))} serve --db {db_path}"
    done = subprocess.run(
        ["sh", "-c", pipeline], capture_output=True, timeout=DEADLINE, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.split(b"\n")
    assert lines[-1] == b""  # every line, the last included, ends with a newline
    frames = [parse_frame(line) for line in lines[:-1]]
    assert len(frames) == 2
    assert {"id": 1, "result": PONG} in frames
    (parse_error,) = [f for f in frames if "error" in f]
    assert parse_error["id"] is None
    assert parse_error["error"]["code"] == errors.ParseError.CODE


LIMIT = 1024

BAD_LINES = [
    pytest.param(
        b'{"id":1,"method":"ping","params":{"x":"\xff\xfe"}}',
        None,
        errors.ParseError.CODE,
        "UTF-8",
        id="invalid-utf8",
    ),
    pytest.param(b"not json", None, errors.ParseError.CODE, "JSON", id="not-json"),
    pytest.param(b'{"id":1,"method":"ping"', None, errors.ParseError.CODE, "", id="truncated"),
    pytest.param(b"\x00\x00\x00", None, errors.ParseError.CODE, "", id="nul-bytes"),
    pytest.param(
        b'{"id":1,"method":"ping"}\x00', None, errors.ParseError.CODE, "", id="trailing-nul"
    ),
    pytest.param(
        b'{"id":1,"method":"ping","params":{"x":"a\x00b"}}',
        None,
        errors.ParseError.CODE,
        "",
        id="nul-in-string",
    ),
    pytest.param(
        b'[{"id":1,"method":"ping"}]', None, errors.InvalidRequest.CODE, "array", id="array"
    ),
    pytest.param(b"42", None, errors.InvalidRequest.CODE, "number", id="number"),
    pytest.param(b'{"id":3}', 3, errors.InvalidRequest.CODE, "method", id="missing-method"),
    pytest.param(
        b'{"id":4,"method":"nosuch"}', 4, errors.MethodNotFound.CODE, "nosuch", id="unknown"
    ),
    pytest.param(
        b'{"id":5,"method":"ingest","params":{"session":5,"message":'
        b'{"role":"user","content":"x"}}}',
        5,
        errors.InvalidParams.CODE,
        "params.session",
        id="wrong-type",
    ),
    pytest.param(
        b'{"id":"r","method":"ingest","params":{"session":"s","message":'
        b'{"role":"robot","content":"x"}}}',
        "r",
        errors.InvalidParams.CODE,
        "params.message.role",
        id="bad-enum",
    ),
    pytest.param(
        b'{"id":6,"method":"ping","params":{"extra":1}}',
        6,
        errors.InvalidParams.CODE,
        "params.extra",
        id="unknown-field",
    ),
    pytest.param(
        b'{"id":7,"method":"ping","params":{"pad":"' + b"a" * (2 * LIMIT) + b'"}}',
        None,
        errors.ParseError.CODE,
        str(LIMIT),
        id="over-the-line-limit",
    ),
]


@pytest.mark.parametrize(("line", "answer_id", "code", "mentions"), BAD_LINES)
def test_a_bad_line_gets_its_documented_error_and_the_daemon_keeps_answering(
    db_path: Path, spawn: Spawn, line: bytes, answer_id: object, code: int, mentions: str
) -> None:
    daemon = spawn(serve_argv(db_path, "--max-line-bytes", str(LIMIT)))
    daemon.send(line + b"\n")
    answer = daemon.frame()
    assert answer["id"] == answer_id
    assert answer["error"]["code"] == code
    assert mentions in answer["error"]["message"]
    assert "result" not in answer

    assert daemon.call("after", "ping")["result"] == PONG
    ingested = daemon.call("i", "ingest", {"session": "s", "message": user_message(0)})
    assert ingested["result"]["ingested"] == 1
    assert daemon.finish() == (0, [])


def test_a_line_of_exactly_the_limit_is_served_and_one_byte_more_is_not(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path, "--max-line-bytes", str(LIMIT)))
    empty = ingest_frame(1, "s", [{"role": "user", "content": ""}])
    at_limit = ingest_frame(1, "s", [{"role": "user", "content": "x" * (LIMIT + 1 - len(empty))}])
    over = ingest_frame(2, "s", [{"role": "user", "content": "y" * (LIMIT + 2 - len(empty))}])
    assert (len(at_limit), len(over)) == (LIMIT + 1, LIMIT + 2)  # newline included

    daemon.send(at_limit)
    assert daemon.frame()["result"]["ingested"] == 1
    daemon.send(over)
    assert daemon.frame()["error"]["code"] == errors.ParseError.CODE
    assert daemon.finish() == (0, [])
    with opened(db_path) as engine:
        assert engine.info().messages == 1


def test_jsonrpc_2_0_is_echoed_on_results_and_errors(db_path: Path, spawn: Spawn) -> None:
    daemon = spawn(serve_argv(db_path))
    ok = daemon.call("a", "ping") | {}
    daemon.send(b'{"jsonrpc":"2.0","id":"b","method":"ping"}\n')
    echoed = daemon.frame()
    daemon.send(b'{"jsonrpc":"2.0","id":"c","method":"nosuch"}\n')
    failed = daemon.frame()

    assert "jsonrpc" not in ok
    assert echoed == {"jsonrpc": "2.0", "id": "b", "result": PONG}
    assert failed["jsonrpc"] == "2.0"
    assert failed["id"] == "c"
    assert failed["error"]["code"] == errors.MethodNotFound.CODE
    assert daemon.finish() == (0, [])


def test_notifications_get_no_answer_even_when_they_fail(db_path: Path, spawn: Spawn) -> None:
    daemon = spawn(serve_argv(db_path))
    daemon.send(
        b'{"method":"ping"}\n'
        b'{"method":"nosuch"}\n'
        b'{"method":"ingest","params":{"session":5}}\n'
        + encode_frame({"method": "ingest", "params": {"session": "n", "message": user_message(0)}})
    )
    assert daemon.call(1, "ping") == {"id": 1, "result": PONG}
    assert daemon.finish() == (0, [])
    # A notification is still carried out, only not answered.
    assert stored_client_ids(db_path, "n") == ["m0000"]


def test_random_bytes_get_one_error_per_line_and_never_kill_the_daemon(
    db_path: Path, spawn: Spawn
) -> None:
    noise = random.Random(20240601).randbytes(40_000)
    expected = sum(1 for line in noise.split(b"\n") if line.strip())
    daemon = spawn(serve_argv(db_path))
    daemon.send(noise + b"\n")
    answers = daemon.frames(expected)
    assert all("error" in a and a["id"] is None for a in answers)
    assert daemon.call("alive", "ping")["result"] == PONG
    assert daemon.finish() == (0, [])


NOISY_WRAPPER = """
import os, sys
import brain.engine
from daemon.cli import main

def noisy(real):
    def info(self):
        out = real(self)
        if out is not None:  # info_now's None: info answers instead
            print("stray junk from print")
            os.write(1, b"stray junk written to fd 1\\n")
        return out
    return info

# info_now on the event loop, info in a worker thread (before a read connection is idle)
brain.engine.Brain.info = noisy(brain.engine.Brain.info)
brain.engine.Brain.info_now = noisy(brain.engine.Brain.info_now)
sys.exit(main(["serve", "--db", sys.argv[1]]))
"""


def test_stray_writes_to_stdout_go_to_stderr_and_frames_stay_clean(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn([sys.executable, "-c", NOISY_WRAPPER, str(db_path)])
    for i in range(5):
        assert daemon.call(f"info{i}", "info")["result"]["messages"] == i
        daemon.send(ingest_frame(f"ingest{i}", "s", [user_message(i)]))
        assert daemon.frame()["id"] == f"ingest{i}"
    # finish() fails the test on any stdout line that is not a JSON object.
    assert daemon.finish() == (0, [])
    stderr = daemon.stderr()
    assert stderr.count("stray junk from print") == 5
    assert stderr.count("stray junk written to fd 1") == 5


def test_pipelined_requests_for_one_session_are_stored_in_arrival_order(
    db_path: Path, spawn: Spawn
) -> None:
    count = 200
    order = random.Random(7).sample(range(count), count)  # ids deliberately not sorted
    lines = [ingest_frame(n, "s", [user_message(i)]) for n, i in enumerate(order)]
    lines.insert(count // 2, request_frame("ping", "ping"))
    daemon = spawn(serve_argv(db_path))
    daemon.send(b"".join(lines))  # one write, nothing awaited in between

    answers = {a["id"]: a for a in daemon.frames(count + 1)}
    assert answers["ping"]["result"] == PONG
    for n in range(count):
        assert answers[n]["result"]["messages"][0]["seq"] == n + 1
    assert daemon.finish() == (0, [])
    assert stored_client_ids(db_path, "s") == [f"m{i:04d}" for i in order]


def test_python_dash_m_daemon_answers_like_brain_serve(tmp_path: Path, spawn: Spawn) -> None:
    script = (
        b'{"id":1,"method":"ping"}\nnot json\n'
        + ingest_frame(2, "s", [user_message(0), user_message(1)])
        + b'{"id":3,"method":"nosuch"}\n'
    )
    outputs = []
    for argv in (serve_argv(tmp_path / "a.db"), module_argv(tmp_path / "b.db")):
        daemon = spawn(argv)
        daemon.send(script)
        code, frames = daemon.finish()
        assert code == 0
        outputs.append(sorted(frames, key=repr))
    assert outputs[0] == outputs[1]
    assert len(outputs[0]) == 4
    for name in ("a.db", "b.db"):
        with opened(tmp_path / name) as engine:
            assert engine.info().messages == 2


def test_crlf_endings_blank_lines_and_a_missing_final_newline_are_harmless(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path))
    daemon.send(b'{"id":1,"method":"ping"}\r\n\r\n   \n\n{"id":2,"method":"ping"}')
    code, frames = daemon.finish()
    assert code == 0
    assert sorted(frames, key=repr) == [{"id": 1, "result": PONG}, {"id": 2, "result": PONG}]


def test_a_client_that_stops_reading_does_not_stop_writes_or_the_clean_exit(
    db_path: Path,
) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # every answer now hits a broken pipe
    proc = subprocess.Popen(
        serve_argv(db_path), stdin=subprocess.PIPE, stdout=write_end, stderr=subprocess.DEVNULL
    )
    os.close(write_end)
    try:
        requests = b"".join(ingest_frame(i, "s", [user_message(i)]) for i in range(50))
        proc.communicate(requests, timeout=DEADLINE)
    finally:
        proc.kill()
        proc.wait(DEADLINE)
    assert proc.returncode == 0
    assert stored_client_ids(db_path, "s") == [f"m{i:04d}" for i in range(50)]


def test_a_database_that_cannot_be_opened_exits_nonzero_with_nothing_on_stdout(
    tmp_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(tmp_path))  # a directory is not a database file
    daemon.send(request_frame(1, "ping"))
    code, frames = daemon.finish()
    assert code != 0
    assert frames == []
    assert "cannot open database" in daemon.stderr()


def _rss_mb(pid: int) -> float:
    """Resident memory of a process, from ``/proc``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_client_that_does_not_read_keeps_the_daemon_small_and_gets_every_answer_later(
    db_path: Path, tmp_path: Path
) -> None:
    requests = 2000
    bound_mb = 150  # idle the daemon is ~50 MB; unbounded, these answers alone are 180 MB
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            serve_argv(db_path, "--embedder", "hash", "--log-level", "debug"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            bufsize=0,
        )
    assert proc.stdin is not None
    assert proc.stdout is not None
    answers = io.BufferedReader(proc.stdout, 1 << 20)  # the raw pipe would read byte by byte
    try:
        words = "word " * 600
        history = [{"id": f"h{i}", "role": "user", "content": f"{i} {words}"} for i in range(30)]
        proc.stdin.write(ingest_frame("seed", "s", history))
        assert parse_frame(answers.readline())["id"] == "seed"
        assemble = {"session": "s", "budget": 100_000}  # ~90 kB an answer
        data = b"".join(request_frame(i, "assemble", assemble) for i in range(requests))
        writer = threading.Thread(target=proc.stdin.write, args=(data,), daemon=True)
        writer.start()

        peak = 0.0
        give_up = time.monotonic() + DEADLINE
        while "reading paused" not in stderr_path.read_text(errors="replace"):
            assert time.monotonic() < give_up, "the daemon never stopped reading"
            peak = max(peak, _rss_mb(proc.pid))
            assert peak < bound_mb, f"RSS {peak:.0f} MB with nobody reading"
            time.sleep(0.1)
        for _ in range(10):  # requests accepted before the pause finish meanwhile
            peak = max(peak, _rss_mb(proc.pid))
            time.sleep(0.1)
        assert peak < bound_mb, f"RSS {peak:.0f} MB with nobody reading"

        answered = {parse_frame(answers.readline())["id"] for _ in range(requests)}
        assert answered == set(range(requests))
        writer.join(DEADLINE)
        proc.stdin.close()
        assert proc.wait(DEADLINE) == 0
    finally:
        proc.kill()
        proc.wait(DEADLINE)
        answers.close()
        proc.stdin.close()


def test_requests_read_from_a_regular_file_are_all_answered(tmp_path: Path) -> None:
    # A file cannot be polled by the loop: stdin falls back to a reader thread.
    requests = tmp_path / "requests.ndjson"
    requests.write_bytes(
        b'{"id":1,"method":"info"}\n'
        + ingest_frame(2, "s", [user_message(0)])
        + b'{"id":3,"method":"ping"}\n'
    )
    with requests.open("rb") as stdin:
        done = subprocess.run(
            serve_argv(tmp_path / "file.db"),
            stdin=stdin,
            capture_output=True,
            timeout=DEADLINE,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    frames = {f["id"]: f for f in map(parse_frame, done.stdout.splitlines())}
    assert set(frames) == {1, 2, 3}
    assert frames[1]["result"]["messages"] == 0
    assert frames[2]["result"]["ingested"] == 1
    assert frames[3]["result"] == PONG
