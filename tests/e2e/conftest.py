"""Real daemon processes on real database files, spoken to over real pipes.

``Daemon`` wraps one child process at the byte level: the test writes raw
bytes (malformed lines included) and reads stdout line by line, each read
with a deadline. Every stdout line must be a JSON object; anything else fails
the read, because stdout is the wire. The ``spawn`` fixture starts daemons and
kills any still running when the test ends, so a failing test never leaves a
process behind.
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

import apsw
import orjson
import pytest

from brain import Brain
from protocol.framing import encode_frame

DEADLINE = 30.0
"""Seconds any single wait may take before the test fails (never a timing assertion)."""

BRAIN = Path(sys.executable).parent / "brain"
"""The installed console script, next to the interpreter running the tests."""


def child_pids(pid: int, module: str) -> list[int]:
    """The process ids of ``pid``'s children (every thread's) running ``module``."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return [p for p in found if module in _cmdline(p)]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


def serve_argv(db: Path, *args: str) -> list[str]:
    """``brain serve --db DB [args]`` with the installed script."""
    return [str(BRAIN), "serve", "--db", str(db), *args]


def module_argv(db: Path, *args: str) -> list[str]:
    """``python -m daemon --db DB [args]`` with this interpreter."""
    return [sys.executable, "-m", "daemon", "--db", str(db), *args]


def create_db(db: Path) -> Path:
    """Create the database at ``db`` as an operator does: a first ``brain serve`` on the
    path, with no input (it creates the file and exits). Only ``brain serve`` creates one;
    ``brain call`` and the offline commands refuse a missing file."""
    done = subprocess.run(
        serve_argv(db), input=b"", capture_output=True, timeout=DEADLINE, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    return db


def user_message(i: int, *, prefix: str = "m") -> dict[str, Any]:
    """A small user message with the client id ``{prefix}{i:04d}``."""
    return {"id": f"{prefix}{i:04d}", "role": "user", "content": f"message number {i}"}


def ingest_frame(request_id: Any, session: str, messages: Sequence[dict[str, Any]]) -> bytes:
    """One ``ingest`` request line (single-message form when given one message)."""
    params: dict[str, Any] = {"session": session}
    if len(messages) == 1:
        params["message"] = messages[0]
    else:
        params["messages"] = list(messages)
    return encode_frame({"id": request_id, "method": "ingest", "params": params})


def request_frame(request_id: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    """One request line."""
    frame: dict[str, Any] = {"id": request_id, "method": method}
    if params is not None:
        frame["params"] = params
    return encode_frame(frame)


class Daemon:
    """A daemon child process driven with raw bytes; every read has a deadline."""

    def __init__(self, argv: Sequence[str], stderr_path: Path) -> None:
        self.argv = list(argv)
        self.stderr_path = stderr_path
        self._stderr: IO[bytes] = stderr_path.open("wb")
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            bufsize=0,
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self._stdin = self.proc.stdin
        self._stdout = self.proc.stdout
        self._lines: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._eof = False
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()

    # -- writing ------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Write ``data`` as given; stdin is unbuffered, so a small write is one pipe write."""
        view = memoryview(data)
        while view:
            written = self._stdin.write(view)
            view = view[written or 0 :]

    def close_stdin(self) -> None:
        """Close stdin: the daemon sees EOF."""
        with contextlib.suppress(BrokenPipeError):
            self._stdin.close()

    # -- reading ------------------------------------------------------------

    def line(self, timeout: float = DEADLINE) -> bytes | None:
        """The next raw stdout line (without ``\\n``), or None at EOF."""
        if self._eof:
            return None
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no output within {timeout}s from {self.argv}\n{self.stderr()}")
        if line is None:
            self._eof = True
        return line

    def frame(self, timeout: float = DEADLINE) -> dict[str, Any]:
        """The next frame; fails on EOF, a timeout or a line that is not a JSON object."""
        line = self.line(timeout)
        if line is None:
            pytest.fail(f"the daemon closed stdout (exit {self.proc.poll()})\n{self.stderr()}")
        return parse_frame(line)

    def frames(self, n: int, timeout: float = DEADLINE) -> list[dict[str, Any]]:
        """The next ``n`` frames."""
        return [self.frame(timeout) for _ in range(n)]

    def call(
        self, request_id: Any, method: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Send one request and return the next frame (use when nothing else is pending)."""
        self.send(request_frame(request_id, method, params))
        frame = self.frame()
        assert frame.get("id") == request_id, frame
        return frame

    def rest(self, timeout: float = DEADLINE) -> list[dict[str, Any]]:
        """Every frame until the daemon closes stdout."""
        out = []
        while (line := self.line(timeout)) is not None:
            out.append(parse_frame(line))
        return out

    def wait(self, timeout: float = DEADLINE) -> int:
        """Wait for the process to exit and return its exit code."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the daemon did not exit within {timeout}s\n{self.stderr()}")

    def finish(self, timeout: float = DEADLINE) -> tuple[int, list[dict[str, Any]]]:
        """Close stdin, read every remaining frame, wait for exit: (exit code, frames)."""
        self.close_stdin()
        frames = self.rest(timeout)
        return self.wait(timeout), frames

    def kill(self) -> None:
        """SIGKILL the daemon and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(DEADLINE)

    def stderr(self) -> str:
        """Everything the daemon wrote to stderr so far."""
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def cleanup(self) -> None:
        """Kill the process if it still runs and release its pipes and files."""
        self.kill()
        self.close_stdin()
        self._reader.join(DEADLINE)
        if not self._reader.is_alive():  # never close a pipe under a blocked read
            self._stdout.close()
        self._stderr.close()

    def _read_stdout(self) -> None:
        try:
            for line in self._stdout:
                self._lines.put(line.rstrip(b"\n"))
        finally:
            self._lines.put(None)


def parse_frame(line: bytes) -> dict[str, Any]:
    """Decode one stdout line; fail the test if it is not a JSON object."""
    try:
        frame = orjson.loads(line)
    except orjson.JSONDecodeError:
        pytest.fail(f"stdout carried a line that is not JSON: {line[:200]!r}")
    if not isinstance(frame, dict):
        pytest.fail(f"stdout carried JSON that is not an object: {line[:200]!r}")
    return frame


class Spawn(Protocol):
    """The ``spawn`` fixture: start a daemon from an argv."""

    def __call__(self, argv: Sequence[str]) -> Daemon: ...


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """Start daemons (``spawn(serve_argv(db))``); any still running are killed at teardown."""
    started: list[Daemon] = []

    def start(argv: Sequence[str]) -> Daemon:
        daemon = Daemon(argv, tmp_path / f"stderr-{len(started)}.log")
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.cleanup()


def sql_rows(db: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows from a plain apsw connection (no engine set-up)."""
    conn = apsw.Connection(str(db))
    try:
        return [tuple(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


def integrity(db: Path) -> list[tuple[Any, ...]]:
    """``PRAGMA integrity_check`` rows from a plain apsw connection (no engine setup)."""
    return sql_rows(db, "PRAGMA integrity_check")


def stored_client_ids(db: Path, session: str) -> list[str]:
    """Client message ids of a session in stored ``seq`` order, read with plain SQL."""
    rows = sql_rows(
        db,
        "SELECT m.client_id FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        "WHERE c.session_id = ? ORDER BY m.seq",
        (session,),
    )
    return [str(row[0]) for row in rows]


@contextlib.contextmanager
def opened(db: Path) -> Iterator[Brain]:
    """The engine on ``db`` in this process, closed afterwards."""
    engine = Brain(db)
    try:
        yield engine
    finally:
        engine.close()


@contextlib.contextmanager
def write_lock_held(db: Path) -> Iterator[None]:
    """Another process holds SQLite's write lock on ``db`` until the block ends.

    The test process is that other process (as ``brain maintain`` or a second
    daemon would be): a daemon's write then waits in SQLite's busy handler,
    inside the engine, for as long as its ``busy_timeout_ms`` allows.
    """
    conn = apsw.Connection(str(db))
    conn.set_busy_timeout(int(DEADLINE * 1000))  # the daemon may be mid-write (start-up)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()
