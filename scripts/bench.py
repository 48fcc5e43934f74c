#!/usr/bin/env python3
"""Throughput and latency benchmarks of the brain engine and daemon (DESIGN §7).

Usage::

    python scripts/bench.py --json [--only NAME[,NAME]] [--runs N] [--size F]

With ``--json`` exactly one JSON object goes to stdout; progress and the
human-readable table always go to stderr (without ``--json`` the table goes to
stdout instead). Each benchmark runs ``--runs`` times (default 5) and reports
the median of every metric at the top of its entry plus all run values under
``runs``; units are in the key names (``msgs_per_s``, ``p50_ms``, ...).
``--size`` scales every workload (``--size 0.1`` is a quick smoke run).

``assemble`` and ``sweep`` (the lossless context layer) report nested
figures, e.g. ``{"assemble": {"raw_5000": {"p50_ms": ...}}}``; their keys name
the nominal size and each group's ``messages`` the count actually built. The
default run builds their 1,000- and 5,000-message conversations; the
100,000-message variants (``raw_100000``, ``summarized_100000``,
``messages_100000`` and the 100k/5k per-message ratio) are built only when the
benchmark is named in ``--only``: each run then takes about a minute for
``assemble`` and half a minute for ``sweep`` (``--runs 1`` keeps it short;
``--size 0.05 --runs 1`` is a smoke run of a few seconds).

``grep`` times ``Brain.grep`` per mode (full_text and regex scoped to one
conversation, full_text, semantic and hybrid scoped and unscoped) on a database
of ``--grep-messages`` messages (default 10,000; e.g. ``10000,100000,1000000``:
1M takes about 6 minutes per run), every message embedded first. ``vectors``
times top-10 over StaticEmbedder vectors exact vs IVF (``brain.vectors.ann``) at
``--vector-rows`` (default 100,000 and 1,000,000), with IVF build time and
recall@10 against exact.

``graph`` times the learned retrieval graph through ``Brain`` at ``--graph-nodes``
(default 1,000 and 5,000; 50,000 takes about 1.5 minutes per run): the build (a
generated workspace of daily notes synced as chunk nodes, plus a tenth of the nodes
taught one by one), ``query`` p50/p95 with default and wide options split into
embedding, traversal and the rest, ``teach``, ``learn`` and correction p50,
``maintain`` (dry and full), ``save`` and the database bytes.

``maintain_reads`` builds a graph with SQL (10,000 nodes, or 100,000 when named
in ``--only``; 10 edges each, of random weight and age) and a 200-message
session, then times ``info`` and ``assemble`` through one daemon, idle and
while a ``maintain`` of every task runs on the same daemon (p50/p95/max, and
how long maintain took). Run it against older code with ``PYTHONPATH`` set to
that checkout, from a directory outside both (``python -m daemon`` puts the
working directory first on ``sys.path``).

``graph_scale`` builds maintain_reads' graph with node texts, every node embedded
(10,000 nodes, or 100,000 when named in ``--only``: a ~30 s build, once per
invocation), then through one daemon times the first answer after spawn, the first
query right after it, query and teach p50/p95 and a full ``maintain``.

``stop`` and ``unread`` run only when named in ``--only``: ``stop`` times
SIGTERM and ``shutdown`` to exit while a write is stuck on another process's
write lock (the daemon's ``shutdown_timeout_s`` is 2 s); ``unread`` is the
peak RSS of a daemon whose client sends 3,000 and 30,000 ``assemble``
requests (~90 kB answers) and reads nothing until the memory stops growing.

``peers`` runs only when named in ``--only``, once: brain and openclawbrain
12.2.6 (installed from PyPI into a virtualenv cached under ``~/.cache/brain-bench``)
on the same generated graph at ``--peer-nodes`` (default 1,000 and 5,000; about
1.5 minutes on 2 shared cores, mostly the peer), both through their stdio daemons,
each request sent to one then the other. Figures are ``{"ours", "peer",
"speedup"}`` (peer / ours) under ``peers.openclawbrain.nodes_N``; when the peer
cannot be installed the entry has ``skipped`` with the reason and the run succeeds.

``graph_daemon`` runs only when named in ``--only``, once: the peers benchmark's
graph in brain alone at ``--graph-daemon-nodes`` (default 1,000, 5,000 and
100,000; the 100k build takes about 2 minutes), one daemon per size: query round
trip p50/p95 (3 rounds of 40 queries, traces recorded), the daemon's own
``traverse_ms``, learn and teach p50, startup and the first query.

Everything happens in a temporary directory with fresh databases; daemons are
started with ``python -m daemon`` from this interpreter and are always reaped,
even when a benchmark fails. A failing benchmark is reported as
``{"error": ...}`` in its entry and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import io
import itertools
import math
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import IO, Any, Final

import apsw
import orjson

from brain import AssembleOptions, Brain, BrainConfig, CompactionConfig, MessageIn, __version__
from protocol.client import Client, daemon_command

SEED: Final = 20240501
BATCH_SIZE: Final = 500
INGEST_SESSIONS: Final = 10
PIPELINE_SESSIONS: Final = 8
CALL_TIMEOUT_S: Final = 300.0

Metrics = dict[str, float]
Message = dict[str, Any]

# -- deterministic, English-ish content ------------------------------------------------

_WORD_TEXT: Final = (
    "the of and to in is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no will "
    "more can about what up said out them into time some could only other new like then than now "
    "over also after first two may any way these our well should because each just those people "
    "how too little state good very make world still see own men work long here get both between "
    "life being under never day same another know while last might us great old year off come "
    "since against go came right used take three memory agent session message context summary "
    "token budget query search index graph node edge learn file payload daemon request answer "
    "database commit checkpoint latency throughput retry error config deploy branch review test "
    "failure fix patch release user assistant tool function result output input schema table "
    "column migration version cache buffer stream pipe thread process signal timeout window "
    "prompt model embedding vector score rank recall precision batch queue worker lock wait "
    "write read disk network server client customer invoice meeting calendar project deadline "
    "budget report draft email note task plan idea question problem solution reason example "
    "detail change update issue ticket"
)
_WORDS: Final = tuple(_WORD_TEXT.split())
_NAMES: Final = ("Alice", "Bob", "Carol", "Dmitri", "Eve", "Farah", "Goran", "Hana", "Ivan")
_IDENTS: Final = (
    "parse_request()",
    "Store.execute",
    "brain.db",
    "/var/log/app.log",
    "PR #4312",
    "HTTP 503",
    "v2.14.1",
    "--max-inflight",
    "user_id=8841",
    "SELECT count(*)",
)
_ENDINGS: Final = (".", ".", ".", "?", "!", ".")


def make_content(rng: random.Random, low: int = 200, high: int = 800) -> str:
    """One chat message of ``low``-``high`` characters: sentences of common and technical words."""
    target = rng.randint(low, high)
    sentences: list[str] = []
    length = 0
    while length < target:
        words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 18))]
        roll = rng.random()
        if roll < 0.25:
            words.insert(rng.randrange(len(words)), rng.choice(_IDENTS))
        elif roll < 0.4:
            words.insert(rng.randrange(len(words)), rng.choice(_NAMES))
        elif roll < 0.5:
            words.insert(rng.randrange(len(words)), str(rng.randint(2, 99_999)))
        sentence = " ".join(words)
        sentence = sentence[0].upper() + sentence[1:] + rng.choice(_ENDINGS)
        sentences.append(sentence)
        length += len(sentence) + 1
    text = " ".join(sentences)
    if len(text) > target:
        cut = text.rfind(" ", 0, target)
        text = text[: cut if cut >= low else target].rstrip(" ,") + "."
    return text


def make_messages(count: int, sessions: int, seed: int) -> list[tuple[str, Message]]:
    """``count`` wire messages as (session, message), spread round-robin over sessions."""
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    out: list[tuple[str, Message]] = []
    for n in range(count):
        session = f"bench-{n % sessions}"
        turn = n // sessions
        message: Message = {
            "role": "user" if turn % 2 == 0 else "assistant",
            "content": make_content(rng),
            "id": f"{session}-m{turn}",
            "created_at": (start + timedelta(seconds=n)).isoformat().replace("+00:00", "Z"),
        }
        out.append((session, message))
    return out


def batches(messages: Sequence[tuple[str, Message]], size: int) -> list[tuple[str, list[Message]]]:
    """Group messages into per-session batches of at most ``size``, in a round-robin order."""
    per_session: dict[str, list[Message]] = {}
    for session, message in messages:
        per_session.setdefault(session, []).append(message)
    chunked = {
        s: [ms[i : i + size] for i in range(0, len(ms), size)] for s, ms in per_session.items()
    }
    out: list[tuple[str, list[Message]]] = []
    rounds = max((len(c) for c in chunked.values()), default=0)
    for r in range(rounds):
        for session, chunks in chunked.items():
            if r < len(chunks):
                out.append((session, chunks[r]))
    return out


def message_in(m: Message) -> MessageIn:
    """The engine's input type for a wire message."""
    return MessageIn(
        role=m["role"], content=m["content"], client_id=m["id"], created_at=m["created_at"]
    )


# -- statistics -------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending sequence."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def latency_metrics(ns: list[int], prefix: str = "") -> Metrics:
    """p50/p95/p99/mean in milliseconds of nanosecond samples."""
    ms = sorted(v / 1e6 for v in ns)
    return {
        f"{prefix}p50_ms": percentile(ms, 50),
        f"{prefix}p95_ms": percentile(ms, 95),
        f"{prefix}p99_ms": percentile(ms, 99),
        f"{prefix}mean_ms": statistics.fmean(ms) if ms else math.nan,
    }


def dir_bytes(path: Path) -> int:
    """Total size of the regular files under ``path`` (0 when absent)."""
    if not path.exists():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def file_bytes(path: Path) -> int:
    """Size of a file, 0 when absent."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


# -- child processes --------------------------------------------------------------------

_CHILDREN: list[subprocess.Popen[bytes]] = []
_CHILDREN_LOCK = threading.Lock()


def _track(proc: subprocess.Popen[bytes]) -> None:
    with _CHILDREN_LOCK:
        _CHILDREN.append(proc)


def _untrack(proc: subprocess.Popen[bytes]) -> None:
    with _CHILDREN_LOCK, contextlib.suppress(ValueError):
        _CHILDREN.remove(proc)


def reap_children() -> None:
    """Kill and reap every daemon this script started that is still running."""
    with _CHILDREN_LOCK:
        children = list(_CHILDREN)
        _CHILDREN.clear()
    for proc in children:
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Close stdin (EOF asks the daemon to stop), wait, kill if it does not exit."""
    try:
        if proc.stdin is not None and not proc.stdin.closed:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    finally:
        if proc.stdout is not None:
            with contextlib.suppress(OSError):
                proc.stdout.close()
        _untrack(proc)


def child_env() -> dict[str, str]:
    """This environment minus ``BRAIN_*`` settings, so daemons run on their defaults."""
    return {k: v for k, v in os.environ.items() if not k.startswith("BRAIN_")}


def log_tail(log: Path, lines: int = 20) -> str:
    """The last lines of a daemon's stderr log, for error reports."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@contextlib.contextmanager
def client_daemon(db: Path, log: Path, args: Sequence[str] = ()) -> Iterator[Client]:
    """A ``protocol.client.Client`` over a fresh daemon, answering pings before it is yielded."""
    with log.open("ab") as err:
        client = Client.spawn(db, args=args, stderr=err, env=child_env())
    _track(client.proc)
    try:
        client.call("ping", timeout=CALL_TIMEOUT_S)
        yield client
    except BaseException as exc:
        tail = log_tail(log)
        if tail and not isinstance(exc, KeyboardInterrupt):
            print(f"  daemon log tail ({log}):\n{tail}", file=sys.stderr)
        raise
    finally:
        try:
            client.close(timeout=60)
        except subprocess.TimeoutExpired:
            client.kill()
        finally:
            _untrack(client.proc)


@contextlib.contextmanager
def raw_daemon(db: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A daemon on buffered pipes, for benchmarks that bypass the client."""
    with raw_daemon_args(db, log, ()) as proc:
        yield proc


@contextlib.contextmanager
def raw_daemon_args(db: Path, log: Path, args: Sequence[str]) -> Iterator[subprocess.Popen[bytes]]:
    """``raw_daemon`` with extra command-line arguments."""
    with log.open("ab") as err:
        proc = subprocess.Popen(
            daemon_command(db, args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=child_env(),
        )
    _track(proc)
    try:
        yield proc
    except BaseException as exc:
        tail = log_tail(log)
        if tail and not isinstance(exc, KeyboardInterrupt):
            print(f"  daemon log tail ({log}):\n{tail}", file=sys.stderr)
        raise
    finally:
        stop_process(proc)


def frame(request_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    """One request line."""
    obj: dict[str, Any] = {"id": request_id, "method": method}
    if params is not None:
        obj["params"] = params
    return orjson.dumps(obj) + b"\n"


def read_answer(stdout: IO[bytes]) -> dict[str, Any]:
    """Read one response line; fail if the daemon closed its stdout."""
    line = stdout.readline()
    if not line:
        raise RuntimeError("the daemon closed stdout before answering")
    answer: dict[str, Any] = orjson.loads(line)
    return answer


# -- settings and results ---------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """What the command line chose."""

    runs: int
    size: float
    root: Path
    heavy: bool = False  # build the 100k-message variants (only with --only)
    grep_messages: tuple[int, ...] = (10_000,)
    vector_rows: tuple[int, ...] = (100_000, 1_000_000)
    graph_nodes: tuple[int, ...] = (1_000, 5_000)
    peer_nodes: tuple[int, ...] = (1_000, 5_000)
    graph_daemon_nodes: tuple[int, ...] = (1_000, 5_000, 100_000)
    locomo: Path | None = None  # a LoCoMo file for ``replay``
    million_db: str | None = None  # ``million``'s database: built if missing, else reused

    def n(self, base: int, minimum: int = 1) -> int:
        """A workload count scaled by ``--size``."""
        return max(minimum, round(base * self.size))


@dataclass
class Shared:
    """State shared between benchmarks of one invocation (built lazily)."""

    settings: Settings
    dataset_db: Path | None = None
    dataset_messages: int = 0
    dataset_metrics: Metrics = field(default_factory=dict)


@dataclass(frozen=True)
class Bench:
    """One named benchmark: ``run`` returns one run's metrics."""

    name: str
    summary: str
    params: Callable[[Settings], dict[str, Any]]
    run: Callable[[Shared, Path], Metrics]
    deterministic: bool = False
    opt_in: bool = False  # runs only when named in --only
    max_runs: int | None = None  # caps --runs (a bench too long to repeat)


# -- ingest -----------------------------------------------------------------------------


def _ingest_params(s: Settings) -> dict[str, Any]:
    return {
        "messages": s.n(20_000, BATCH_SIZE),
        "batch_size": BATCH_SIZE,
        "sessions": INGEST_SESSIONS,
        "content_chars": "200-800",
    }


def _prepared_batches(s: Settings, seed: int) -> list[tuple[str, list[Message]]]:
    total = _ingest_params(s)["messages"]
    return batches(make_messages(total, INGEST_SESSIONS, seed), BATCH_SIZE)


def bench_ingest_batched(shared: Shared, work: Path) -> Metrics:
    """Batched ingest requests through the daemon, one after another."""
    plan = _prepared_batches(shared.settings, SEED)
    total = sum(len(b) for _, b in plan)
    with client_daemon(work / "bench.db", work / "daemon.log") as client:
        started = time.perf_counter()
        stored = 0
        for session, msgs in plan:
            result = client.call(
                "ingest", {"session": session, "messages": msgs}, timeout=CALL_TIMEOUT_S
            )
            stored += int(result["ingested"])
        took = time.perf_counter() - started
    if stored != total:
        raise RuntimeError(f"stored {stored} of {total} messages")
    return {"msgs_per_s": total / took, "ingest_s": took, "batch_ms": took * 1000 / len(plan)}


def bench_ingest_batched_engine(shared: Shared, work: Path) -> Metrics:
    """The same batches straight into ``brain.Brain.ingest`` (no daemon, no JSON)."""
    plan = [
        (session, [message_in(m) for m in msgs])
        for session, msgs in _prepared_batches(shared.settings, SEED)
    ]
    total = sum(len(b) for _, b in plan)
    brain = Brain(work / "bench.db")
    try:
        started = time.perf_counter()
        stored = 0
        for session, msgs in plan:
            stored += brain.ingest(session, msgs).ingested
        took = time.perf_counter() - started
    finally:
        brain.close()
    if stored != total:
        raise RuntimeError(f"stored {stored} of {total} messages")
    return {"msgs_per_s": total / took, "ingest_s": took, "batch_ms": took * 1000 / len(plan)}


def _single_params(s: Settings) -> dict[str, Any]:
    return {"requests": s.n(2_000, 50), "sessions": PIPELINE_SESSIONS, "durable": True}


def bench_ingest_single(shared: Shared, work: Path) -> Metrics:
    """One message per ingest request, sequential round trips (each commit is durable).

    Each commit waits for an fsync (synchronous=FULL), so the figure follows
    the disk: ``disk_fsync_commits_per_s`` (bare apsw commits, no daemon) and a
    run with synchronous=NORMAL (durable against a killed process, not a
    power cut) are reported beside it to tell disk from daemon.
    """
    count = _single_params(shared.settings)["requests"]
    plan = make_messages(count, PIPELINE_SESSIONS, SEED + 1)

    def run(name: str, args: Sequence[str]) -> tuple[float, list[int]]:
        latencies: list[int] = []
        with client_daemon(work / f"{name}.db", work / "daemon.log", args) as client:
            started = time.perf_counter()
            for session, message in plan:
                t0 = time.perf_counter_ns()
                params = {"session": session, "message": message}
                client.call("ingest", params, timeout=CALL_TIMEOUT_S)
                latencies.append(time.perf_counter_ns() - t0)
            return count / (time.perf_counter() - started), latencies

    full_rate, latencies = run("full", ())
    normal_rate, _ = run("normal", ("--synchronous", "NORMAL"))
    return {
        "reqs_per_s": full_rate,
        **latency_metrics(latencies),
        "reqs_per_s_sync_normal": normal_rate,
        "disk_fsync_commits_per_s": _bare_commit_rate(work / "bare.db", count),
    }


def _bare_commit_rate(path: Path, count: int) -> float:
    """Commits per second of one-row transactions on this disk with synchronous=FULL."""
    conn = apsw.Connection(str(path))
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("CREATE TABLE t (x)")
        started = time.perf_counter()
        for i in range(count):
            with conn:
                conn.execute("INSERT INTO t VALUES (?)", (i,))
        return count / (time.perf_counter() - started)
    finally:
        conn.close()


# -- group commit -------------------------------------------------------------------------


def _group_params(s: Settings) -> dict[str, Any]:
    return {"single": s.n(400, 40), "pipelined": s.n(1_000, 80), "window": 16, "sessions": [1, 8]}


def _windowed(proc: subprocess.Popen[bytes], lines: list[bytes], window: int) -> list[int]:
    """Send ``lines`` keeping ``window`` requests in flight; each one's ns from send to ack.

    Ids are the lines' indexes; answers may come out of order (other lanes).
    """
    assert proc.stdin is not None
    assert proc.stdout is not None
    sent_at: dict[int, int] = {}
    took: list[int] = []
    following = 0
    while len(took) < len(lines):
        while following < len(lines) and following - len(took) < window:
            sent_at[following] = time.perf_counter_ns()
            proc.stdin.write(lines[following])
            following += 1
        proc.stdin.flush()
        answer = read_answer(proc.stdout)
        if "result" not in answer:
            raise RuntimeError(f"ingest failed: {answer}")
        took.append(time.perf_counter_ns() - sent_at[answer["id"]])
    return took


def bench_group_commit(shared: Shared, work: Path) -> Metrics:
    """Durable ingest through the daemon at synchronous=FULL, alone and with group commit.

    ``single``: sequential one-message ingests (one fsync each either way).
    ``pipelined_<S>``: ``window`` requests kept in flight over ``S`` sessions (1: one
    lane, applied in order); latency from each request's send to its answer. With
    ``group_commit`` the commits skip their own fsync and every answer waits for a
    WAL fsync begun after its commit, shared by the writers in flight.
    """
    params = _group_params(shared.settings)
    out: Metrics = {"fsync_p50_ms": _fsync_p50_ms(work / "fsync.bin")}
    for mode, args in (("full", ()), ("group", ("--group-commit", "true"))):
        db = work / f"{mode}.db"
        with raw_daemon_args(db, work / "daemon.log", args) as proc:
            assert proc.stdin is not None
            assert proc.stdout is not None
            proc.stdin.write(frame(0, "ping"))
            proc.stdin.flush()
            read_answer(proc.stdout)
            single = [
                frame(i, "ingest", {"session": "one", "message": m})
                for i, (_s, m) in enumerate(make_messages(params["single"], 1, SEED + 4))
            ]
            out.update(latency_metrics(_windowed(proc, single, 1), f"{mode}_single_"))
            for sessions in params["sessions"]:
                plan = make_messages(params["pipelined"], sessions, SEED + 5 + sessions)
                lines = [
                    frame(i, "ingest", {"session": f"w{sessions}-{s}", "message": m})
                    for i, (s, m) in enumerate(plan)
                ]
                started = time.perf_counter()
                took = _windowed(proc, lines, params["window"])
                rate = len(lines) / (time.perf_counter() - started)
                out.update(latency_metrics(took, f"{mode}_pipelined_{sessions}_"))
                out[f"{mode}_pipelined_{sessions}_reqs_per_s"] = rate
    for key in [k for k in out if k.startswith("full_") and k.endswith(("p50_ms", "reqs_per_s"))]:
        group = out[key.replace("full_", "group_", 1)]
        out[key.replace("full_", "speedup_", 1)] = (
            group / out[key] if key.endswith("reqs_per_s") else out[key] / group
        )
    return out


def _fsync_p50_ms(path: Path, count: int = 200) -> float:
    """p50 of one 4 KiB write + fsync on this disk (what a FULL commit waits for at least)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    samples: list[int] = []
    try:
        for i in range(count):
            os.pwrite(fd, b"x" * 4096, (i % 16) * 4096)
            t0 = time.perf_counter_ns()
            os.fsync(fd)
            samples.append(time.perf_counter_ns() - t0)
    finally:
        os.close(fd)
    return latency_metrics(samples)["p50_ms"]


# -- ping -------------------------------------------------------------------------------


def _ping_params(s: Settings) -> dict[str, Any]:
    return {"pings": s.n(2_000, 100), "warmup": 200}


def bench_ping_roundtrip(shared: Shared, work: Path) -> Metrics:
    """Sequential pings through the subprocess pipes with ``protocol.client.Client``."""
    params = _ping_params(shared.settings)
    latencies: list[int] = []
    with client_daemon(work / "bench.db", work / "daemon.log") as client:
        for _ in range(params["warmup"]):
            client.call("ping")
        for _ in range(params["pings"]):
            t0 = time.perf_counter_ns()
            client.call("ping")
            latencies.append(time.perf_counter_ns() - t0)
    return latency_metrics(latencies)


def _loop_params(s: Settings) -> dict[str, Any]:
    return {"pings": s.n(10_000, 100), "warmup": 500}


def bench_ping_in_loop(shared: Shared, work: Path) -> Metrics:
    """``Dispatcher.prepare`` + ``await Dispatcher.execute`` for a ping, inside anyio.run."""
    import anyio
    import anyio.to_thread

    from daemon.context import Context
    from daemon.dispatch import Answer, Dispatcher

    params = _loop_params(shared.settings)
    total: list[int] = []
    prepare: list[int] = []
    execute: list[int] = []

    async def measure() -> None:
        brain = await anyio.to_thread.run_sync(Brain, work / "bench.db")
        try:
            dispatcher = Dispatcher(Context(brain))
            warmup = params["warmup"]
            for i in range(warmup + params["pings"]):
                line = frame(i, "ping")
                t0 = time.perf_counter_ns()
                call = dispatcher.prepare(line)
                t1 = time.perf_counter_ns()
                if isinstance(call, Answer):
                    raise RuntimeError(f"ping rejected: {call.frame!r}")
                answer = await dispatcher.execute(call)
                t2 = time.perf_counter_ns()
                if answer is None or b'"pong"' not in answer:
                    raise RuntimeError(f"unexpected ping answer: {answer!r}")
                if i >= warmup:
                    total.append(t2 - t0)
                    prepare.append(t1 - t0)
                    execute.append(t2 - t1)
        finally:
            await anyio.to_thread.run_sync(brain.close)

    anyio.run(measure)
    return {
        **latency_metrics(total),
        "prepare_p50_ms": latency_metrics(prepare)["p50_ms"],
        "execute_p50_ms": latency_metrics(execute)["p50_ms"],
    }


# -- pipelined --------------------------------------------------------------------------


def _pipelined_params(s: Settings) -> dict[str, Any]:
    return {
        "ping_requests": s.n(20_000, 100),
        "ingest_requests": s.n(10_000, 50),
        "ingest_sessions": PIPELINE_SESSIONS,
    }


@dataclass
class _Drain:
    """What a reader thread saw while draining ``expected`` answers."""

    expected: int
    answered: int = 0
    errors: int = 0
    first_error: Any = None
    last_answer_at: float = 0.0
    failure: BaseException | None = None


def _drain(stdout: IO[bytes], state: _Drain) -> None:
    try:
        while state.answered < state.expected:
            line = stdout.readline()
            if not line:
                raise RuntimeError(f"stdout closed after {state.answered} answers")
            answer = orjson.loads(line)
            state.answered += 1
            if "error" in answer:
                state.errors += 1
                if state.first_error is None:
                    state.first_error = answer["error"]
        state.last_answer_at = time.perf_counter()
    except BaseException as exc:
        state.failure = exc


def pipeline(proc: subprocess.Popen[bytes], blob: bytes, expected: int) -> float:
    """Write ``blob`` in one go while a thread reads ``expected`` answers; return seconds."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    state = _Drain(expected)
    reader = threading.Thread(target=_drain, args=(proc.stdout, state), daemon=True)
    reader.start()
    started = time.perf_counter()
    proc.stdin.write(blob)
    proc.stdin.flush()
    reader.join(CALL_TIMEOUT_S)
    if reader.is_alive():
        raise TimeoutError(f"only {state.answered} of {expected} answers in {CALL_TIMEOUT_S}s")
    if state.failure is not None:
        raise state.failure
    if state.errors:
        raise RuntimeError(f"{state.errors} error answers, first: {state.first_error}")
    return state.last_answer_at - started


def bench_pipelined(shared: Shared, work: Path) -> Metrics:
    """Write N requests without waiting, then read every answer (pings, then ingests)."""
    params = _pipelined_params(shared.settings)
    pings = params["ping_requests"]
    ingests = params["ingest_requests"]
    ping_blob = b"".join(frame(i, "ping") for i in range(1, pings + 1))
    ingest_blob = b"".join(
        frame(pings + 1 + i, "ingest", {"session": session, "message": message})
        for i, (session, message) in enumerate(
            make_messages(ingests, params["ingest_sessions"], SEED + 2)
        )
    )
    with raw_daemon(work / "bench.db", work / "daemon.log") as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(frame(0, "ping"))
        proc.stdin.flush()
        read_answer(proc.stdout)  # ready
        ping_s = pipeline(proc, ping_blob, pings)
        ingest_s = pipeline(proc, ingest_blob, ingests)
    return {
        "ping_reqs_per_s": pings / ping_s,
        "ingest_reqs_per_s": ingests / ingest_s,
        "ping_took_s": ping_s,
        "ingest_took_s": ingest_s,
    }


# -- cheap requests ---------------------------------------------------------------------


def _requests_params(s: Settings) -> dict[str, Any]:
    return {"calls": s.n(2_000, 100), "warmup": 200, "database": "the shared dataset"}


_SINGLE_THREADED = """
import sqlite3, sys, orjson
db = sqlite3.connect(sys.argv[1])
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    request = orjson.loads(line)
    if request["method"] == "info":
        try:
            counts = dict(db.execute("SELECT name, n FROM counts"))
        except sqlite3.OperationalError:  # a database from before the counters
            counts = {"messages": db.execute("SELECT count(*) FROM messages").fetchone()[0]}
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        result = {"messages": counts["messages"], "pages": pages}
    else:
        result = {"pong": True}
    out.write(orjson.dumps({"id": request["id"], "result": result}) + b"\\n")
    out.flush()
"""
"""The reference: one thread reading lines and answering each in turn (``info`` from
the same database's counters on a plain sqlite3 connection), as a single-threaded
daemon does. Nothing to hop between, so it is the floor a daemon's pipes allow."""


def bench_requests(shared: Shared, work: Path) -> Metrics:
    """``ping`` and ``info`` round trips through the pipes, brain vs a single-threaded loop.

    Sequential calls over raw pipes, alternating between a brain daemon and the
    reference loop call by call, so both see the same load (the machine is shared:
    compare the ratios). The database is the shared dataset.
    """
    params = _requests_params(shared.settings)
    db = dataset(shared)
    reference = subprocess.Popen(
        [sys.executable, "-c", _SINGLE_THREADED, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=child_env(),
    )
    _track(reference)
    samples: dict[str, list[int]] = {}
    try:
        with raw_daemon(db, work / "daemon.log") as proc:
            pair = {"brain": proc, "single": reference}
            for who in pair.values():
                assert who.stdin is not None
                assert who.stdout is not None
            for i in range(params["warmup"] + params["calls"]):
                for method in ("ping", "info"):
                    for name, who in pair.items():
                        assert who.stdin is not None
                        assert who.stdout is not None
                        t0 = time.perf_counter_ns()
                        who.stdin.write(frame(i, method))
                        who.stdin.flush()
                        answer = read_answer(who.stdout)
                        took = time.perf_counter_ns() - t0
                        if "result" not in answer:
                            raise RuntimeError(f"{name} {method}: {answer}")
                        if i >= params["warmup"]:
                            samples.setdefault(f"{method}_{name}", []).append(took)
    finally:
        stop_process(reference)
        _untrack(reference)
    out: Metrics = {}
    for key, ns in samples.items():
        out.update(latency_metrics(ns, f"{key}_"))
    for method in ("ping", "info"):
        for p in ("p50", "p95"):
            mine, floor = out[f"{method}_brain_{p}_ms"], out[f"{method}_single_{p}_ms"]
            out[f"{method}_{p}_vs_single"] = mine / floor
    return out


# -- storage and start-up (on one shared dataset) -----------------------------------------


def _dataset_params(s: Settings) -> dict[str, Any]:
    return {
        "messages": s.n(20_000, BATCH_SIZE),
        "batch_size": BATCH_SIZE,
        "sessions": INGEST_SESSIONS,
        "built_through": "daemon ingest batches, then save",
    }


def dataset(shared: Shared) -> Path:
    """A database with the realistic messages, ingested through a daemon and saved (cached)."""
    if shared.dataset_db is not None:
        return shared.dataset_db
    params = _dataset_params(shared.settings)
    total = params["messages"]
    messages = make_messages(total, INGEST_SESSIONS, SEED + 3)
    content_bytes = sum(len(m["content"].encode()) for _, m in messages)
    request_bytes = sum(len(orjson.dumps(m)) for _, m in messages)
    work = shared.settings.root / "dataset"
    work.mkdir()
    db = work / "dataset.db"
    files = db.with_name(db.name + "-files")
    wal = db.with_name(db.name + "-wal")
    print(f"  building the shared dataset ({total} messages)", file=sys.stderr)
    with client_daemon(db, work / "daemon.log") as client:
        for session, msgs in batches(messages, BATCH_SIZE):
            client.call("ingest", {"session": session, "messages": msgs}, timeout=CALL_TIMEOUT_S)
        client.call("save", timeout=CALL_TIMEOUT_S)
        live_db, live_wal, live_files = file_bytes(db), file_bytes(wal), dir_bytes(files)
    closed_total = file_bytes(db) + file_bytes(wal) + dir_bytes(files)
    live_total = live_db + live_wal + live_files
    shared.dataset_db = db
    shared.dataset_messages = total
    shared.dataset_metrics = {
        "bytes_per_msg": live_total / total,
        "content_bytes_per_msg": content_bytes / total,
        "request_json_bytes_per_msg": request_bytes / total,
        "overhead_ratio": live_total / content_bytes,
        "db_bytes": float(live_db),
        "wal_bytes": float(live_wal),
        "payload_bytes": float(live_files),
        "bytes_per_msg_after_close": closed_total / total,
    }
    return db


def bench_db_bytes(shared: Shared, work: Path) -> Metrics:
    """(db file + WAL + payload files) / messages after a save, vs the content size."""
    dataset(shared)
    return dict(shared.dataset_metrics)


def _startup_params(s: Settings) -> dict[str, Any]:
    return {"db_messages": _dataset_params(s)["messages"]}


def _spawn_ms(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)
    return (time.perf_counter() - started) * 1000


def bench_startup(shared: Shared, work: Path) -> Metrics:
    """Spawn to first ping answer on the existing dataset, plus bare-interpreter baselines."""
    db = dataset(shared)
    started = time.perf_counter()
    with raw_daemon(db, work / "daemon.log") as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(frame(1, "ping"))
        proc.stdin.flush()
        answer = read_answer(proc.stdout)
        startup_ms = (time.perf_counter() - started) * 1000
        if answer.get("result") != {"pong": True}:
            raise RuntimeError(f"unexpected ping answer: {answer}")
        eof_at = time.perf_counter()
        stop_process(proc)
        exit_ms = (time.perf_counter() - eof_at) * 1000
    python_ms = _spawn_ms([sys.executable, "-c", "pass"])
    import_ms = _spawn_ms([sys.executable, "-c", "import daemon.cli, daemon.runner, daemon.stdio"])
    # Medians of several runs: a cold start is noisy on a shared machine.
    bare = statistics.median(_spawn_ms([sys.executable, "-c", "pass"]) for _ in range(STARTUP_RUNS))
    brain_exe = str(Path(sys.executable).parent / "brain")
    call_info = statistics.median(
        _spawn_ms([brain_exe, "call", "info", "--db", str(db)], env=child_env())
        for _ in range(STARTUP_RUNS)
    )
    first_info = statistics.median(
        _first_info_ms(db, work / "daemon.log") for _ in range(STARTUP_RUNS)
    )
    return {
        "startup_ms": startup_ms,
        "exit_ms": exit_ms,
        "python_bare_ms": python_ms,
        "python_import_daemon_ms": import_ms,
        "python_bare_median_ms": bare,
        "call_info_median_ms": call_info,
        "daemon_first_info_median_ms": first_info,
        "call_info_vs_bare": call_info / bare,
        "daemon_first_info_vs_bare": first_info / bare,
    }


STARTUP_RUNS: Final = 5
"""Runs of each start-up measurement; the median is reported."""


def _first_info_ms(db: Path, log: Path) -> float:
    """ms from spawning a daemon to its first ``info`` answer."""
    started = time.perf_counter()
    with raw_daemon(db, log) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(frame(1, "info"))
        proc.stdin.flush()
        answer = read_answer(proc.stdout)
        took = (time.perf_counter() - started) * 1000
        if "result" not in answer:
            raise RuntimeError(f"unexpected info answer: {answer}")
    return took


def _file_check_params(s: Settings) -> dict[str, Any]:
    return {"checks": s.n(200_000, 1_000), "commits": s.n(300, 20)}


def bench_file_check(shared: Shared, work: Path) -> Metrics:
    """The database-file identity check (one ``stat``) every write makes before it commits,
    next to the commit it guards (a one-row transaction, synchronous FULL)."""
    from brain import open_store

    params = _file_check_params(shared.settings)
    store = open_store(work / "bench.db")
    try:
        started = time.perf_counter()
        for _ in range(params["checks"]):
            store.check_file()
        check_s = (time.perf_counter() - started) / params["checks"]
        started = time.perf_counter()
        for i in range(params["commits"]):
            with store.transaction():
                store.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('bench', ?)", (i,))
        commit_s = (time.perf_counter() - started) / params["commits"]
    finally:
        store.close()
    return {"check_us": check_s * 1e6, "commit_us": commit_s * 1e6}


# -- lossless context: assemble and full sweeps -------------------------------------------

CONTEXT_SESSION: Final = "agent"
CONTEXT_BUDGET: Final = 200_000
CONTEXT_SIZES: Final = (1_000, 5_000, 100_000)  # nominal sizes; --size scales the counts
HEAVY_SIZE: Final = 100_000  # only with --only assemble / --only sweep
WARM_CALLS: Final = 200
AFTER_INGEST_CALLS: Final = 50
DAEMON_CALLS: Final = 100
SAMPLE_SECONDS: Final = 5.0  # a latency series stops early after this (at least 20 samples)
_TOOLS: Final = (
    "read_file",
    "grep",
    "run_tests",
    "shell",
    "search_docs",
    "list_dir",
    "edit_file",
    "http_get",
)
_LEVELS: Final = ("DEBUG", "INFO", "INFO", "INFO", "WARN", "ERROR")


def _tool_output(rng: random.Random, low: int, high: int) -> str:
    """What a coding agent's tool returns: source lines, log lines, key = value pairs."""
    target = rng.randint(low, high)
    lines: list[str] = []
    length = 0
    while length < target:
        roll = rng.random()
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 10)))
        if roll < 0.4:
            path = f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py"
            line = f"{path}:{rng.randint(1, 2_000)}: {words}"
        elif roll < 0.7:
            day, hour, minute = rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59)
            stamp = f"2025-01-{day:02d}T{hour:02d}:{minute:02d}"
            line = f"{stamp} {rng.choice(_LEVELS)} {rng.choice(_IDENTS)} {words}"
        else:
            line = f"  {rng.choice(_WORDS)}_{rng.choice(_WORDS)} = {rng.randint(0, 99_999)}"
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)[:high]


def agent_messages(seed: int) -> Iterator[MessageIn]:
    """An endless, deterministic tool-heavy conversation (each message ~50-300 tokens).

    A user turn, one to four rounds of an assistant message (short text, or
    none, plus one to three OpenAI-shape tool calls) each answered by ``tool``
    messages, then an assistant answer.
    """
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    n = 0
    calls = 0

    def stamp() -> str:
        return (start + timedelta(seconds=7 * n)).isoformat().replace("+00:00", "Z")

    while True:
        yield MessageIn("user", make_content(rng, 200, 1_200), f"m{n}", created_at=stamp())
        n += 1
        for _ in range(rng.randint(1, 4)):
            ids: list[str] = []
            tool_calls: list[dict[str, Any]] = []
            for _ in range(rng.randint(1, 3)):
                calls += 1
                ids.append(f"call_{calls:08d}")
                args = {
                    "path": f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py",
                    "query": " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 12))),
                    "limit": rng.randint(10, 500),
                }
                function = {"name": rng.choice(_TOOLS), "arguments": orjson.dumps(args).decode()}
                tool_calls.append({"id": ids[-1], "type": "function", "function": function})
            text = make_content(rng, 80, 500) if rng.random() < 0.6 else ""
            yield MessageIn("assistant", text, f"m{n}", created_at=stamp(), tool_calls=tool_calls)
            n += 1
            for call_id in ids:
                output = _tool_output(rng, 200, 1_200)
                yield MessageIn("tool", output, f"m{n}", created_at=stamp(), tool_call_id=call_id)
                n += 1
        yield MessageIn("assistant", make_content(rng, 200, 1_200), f"m{n}", created_at=stamp())
        n += 1


def _context_sizes(s: Settings) -> list[tuple[str, int]]:
    """(nominal label, scaled message count) of the sizes this run builds."""
    return [(str(b), s.n(b, 20)) for b in CONTEXT_SIZES if s.heavy or b != HEAVY_SIZE]


def _assemble_params(s: Settings) -> dict[str, Any]:
    return {
        "messages": dict(_context_sizes(s)),
        "budget_tokens": CONTEXT_BUDGET,
        "ingest_batch": BATCH_SIZE,
        "warm_calls": WARM_CALLS,
        "after_ingest_calls": AFTER_INGEST_CALLS,
        "daemon_calls": DAEMON_CALLS,
        "sample_limit_s": SAMPLE_SECONDS,
        "content": "tool-heavy agent turns (user, assistant + tool calls, tool results), "
        "~50-300 tokens each",
        "raw": "CompactionConfig(auto=False), nothing compacted",
        "summarized": "the same after a full sweep (Brain.compact), default CompactionConfig",
        "note": "keys name the nominal size; 'messages' in each entry is the scaled count",
    }


def _sample(call: Callable[[], object], count: int) -> list[int]:
    """Nanoseconds of up to ``count`` calls (fewer past SAMPLE_SECONDS, never under 20)."""
    out: list[int] = []
    deadline = time.perf_counter() + SAMPLE_SECONDS
    for i in range(count):
        t0 = time.perf_counter_ns()
        call()
        out.append(time.perf_counter_ns() - t0)
        if i >= 20 and time.perf_counter() > deadline:
            break
    return out


def _build_context_db(
    db: Path, count: int, config: BrainConfig
) -> tuple[Brain, Iterator[MessageIn], float]:
    """A database with ``count`` agent messages in one session, ingested in batches; the
    open engine, the rest of the conversation and the ingest seconds."""
    stream = agent_messages(SEED + 10)
    brain = Brain(db, config)
    try:
        took = 0.0
        left = count
        while left:
            batch = list(itertools.islice(stream, min(BATCH_SIZE, left)))
            started = time.perf_counter()
            brain.ingest(CONTEXT_SESSION, batch)
            took += time.perf_counter() - started
            left -= len(batch)
    except BaseException:
        brain.close()
        raise
    return brain, stream, took


def _python_calls(call: Callable[[], object]) -> float:
    """The Python function calls one ``call()`` makes: a figure the machine's load
    cannot move, so a slide in the code shows even when timings are noise."""
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return float(count)


def _remove_db(db: Path) -> None:
    """Delete a database with its WAL, shm and payload files (frees disk between sizes)."""
    for path in db.parent.glob(db.name + "*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _assemble_phase(
    brain: Brain, stream: Iterator[MessageIn], options: AssembleOptions, prefix: str
) -> Metrics:
    """Cold (first call), warm (unchanged conversation) and after-ingest assemble timings."""
    t0 = time.perf_counter_ns()
    first = brain.assemble(CONTEXT_SESSION, options)
    cold_ns = time.perf_counter_ns() - t0
    warm = _sample(lambda: brain.assemble(CONTEXT_SESSION, options), WARM_CALLS)
    calls = _python_calls(lambda: brain.assemble(CONTEXT_SESSION, options))
    after: list[int] = []
    deadline = time.perf_counter() + SAMPLE_SECONDS
    for i in range(AFTER_INGEST_CALLS):
        brain.ingest(CONTEXT_SESSION, [next(stream)])
        t1 = time.perf_counter_ns()
        last = brain.assemble(CONTEXT_SESSION, options)
        after.append(time.perf_counter_ns() - t1)
        if i >= 20 and time.perf_counter() > deadline:
            break
    for result in (first, last):
        if result.tokens - result.fresh_tail["tokens"] > options.budget:
            raise RuntimeError(f"assemble went over budget: {result.tokens} tokens")
    return {
        **{f"{prefix}{k}": v for k, v in latency_metrics(warm).items()},
        **{f"{prefix}{k}": v for k, v in latency_metrics(after, "after_ingest_").items()},
        f"{prefix}cold_ms": cold_ns / 1e6,
        f"{prefix}warm_calls": float(len(warm)),
        f"{prefix}after_ingest_calls": float(len(after)),
        f"{prefix}python_calls_per_item": calls / max(1, sum(first.included.values())),
        f"{prefix}included_items": float(sum(last.included.values())),
        f"{prefix}dropped_items": float(sum(last.dropped.values())),
        f"{prefix}assembled_tokens": float(last.tokens),
        f"{prefix}context_tokens": float(last.context_tokens),
    }


def _daemon_assemble(db: Path, work: Path, prefix: str) -> Metrics:
    """Round trips of ``assemble`` through a daemon (Client: JSON both ways, pipes)."""
    params = {"session": CONTEXT_SESSION, "budget": CONTEXT_BUDGET}
    with client_daemon(db, work / "daemon.log", ("--auto-compact", "false")) as client:
        client.call("assemble", params, timeout=CALL_TIMEOUT_S)  # the daemon's cold call
        latencies = _sample(
            lambda: client.call("assemble", params, timeout=CALL_TIMEOUT_S), DAEMON_CALLS
        )
        answer = client.request("assemble", params, timeout=CALL_TIMEOUT_S)
    return {
        **{f"{prefix}{k}": v for k, v in latency_metrics(latencies).items()},
        f"{prefix}calls": float(len(latencies)),
        f"{prefix}response_bytes": float(len(orjson.dumps(answer))),
    }


def bench_assemble(shared: Shared, work: Path) -> Metrics:
    """``Brain.assemble`` at each size, raw then summarised, plus raw_5000 via the daemon."""
    options = AssembleOptions(budget=CONTEXT_BUDGET)
    out: Metrics = {}
    for label, count in _context_sizes(shared.settings):
        db = work / f"context-{label}.db"
        raw_config = BrainConfig(compaction=CompactionConfig(auto=False))
        print(f"  assemble: building {count} messages", file=sys.stderr)
        brain, stream, ingest_s = _build_context_db(db, count, raw_config)
        try:
            out[f"raw_{label}.messages"] = float(count)
            out[f"raw_{label}.ingest_s"] = ingest_s
            out.update(_assemble_phase(brain, stream, options, f"raw_{label}."))
        finally:
            brain.close()
        if label == "5000":
            out.update(_daemon_assemble(db, work, f"raw_{label}_daemon."))
            out[f"raw_{label}_daemon.messages"] = float(count)
        brain = Brain(db, raw_config)
        try:
            started = time.perf_counter()
            report = brain.compact(CONTEXT_SESSION)
            sweep_s = time.perf_counter() - started
            out[f"summarized_{label}.messages"] = float(count)
            out[f"summarized_{label}.sweep_s"] = sweep_s
            out[f"summarized_{label}.summaries"] = float(len(report.summaries))
            out.update(_assemble_phase(brain, stream, options, f"summarized_{label}."))
        finally:
            brain.close()
        _remove_db(db)
    return out


def _sweep_params(s: Settings) -> dict[str, Any]:
    config = CompactionConfig()
    return {
        "messages": dict(_context_sizes(s)[1:]),
        "leaf_chunk_tokens": config.leaf_chunk_tokens,
        "leaf_fanout": config.leaf_fanout,
        "condensed_fanout": config.condensed_fanout,
        "fresh_tail_count": config.fresh_tail_count,
        "summarizer": "FactSummarizer, the offline default (its time is excluded from "
        "db_ms_per_message)",
        "ingest": "CompactionConfig(auto=False) while ingesting, then Brain.compact",
        "note": "keys name the nominal size; 'messages' in each entry is the scaled count",
    }


def bench_sweep(shared: Shared, work: Path) -> Metrics:
    """Full-sweep cost per message at 5k (and 100k) messages, summarizer time excluded."""
    out: Metrics = {}
    per_message: dict[str, float] = {}
    for label, count in _context_sizes(shared.settings)[1:]:
        db = work / f"sweep-{label}.db"
        config = BrainConfig(compaction=replace(CompactionConfig(), auto=False))
        print(f"  sweep: building {count} messages", file=sys.stderr)
        brain, _, ingest_s = _build_context_db(db, count, config)
        try:
            report = brain.compact(CONTEXT_SESSION)
        finally:
            brain.close()
        db_ms = report.took_ms - report.summarize_ms
        passes = report.leaf_passes + report.condensed_passes
        per_message[label] = db_ms / count
        key = f"messages_{label}."
        out.update(
            {
                f"{key}messages": float(count),
                f"{key}db_ms_per_message": db_ms / count,
                f"{key}db_s": db_ms / 1000,
                f"{key}summarize_s": report.summarize_ms / 1000,
                f"{key}total_s": report.took_ms / 1000,
                f"{key}leaf_passes": float(report.leaf_passes),
                f"{key}condensed_passes": float(report.condensed_passes),
                f"{key}summaries": float(len(report.summaries)),
                f"{key}db_ms_per_pass": db_ms / max(1, passes),
                f"{key}tokens_before": float(report.tokens_before),
                f"{key}tokens_after": float(report.tokens_after),
                f"{key}ingest_s": ingest_s,
            }
        )
        _remove_db(db)
    if "100000" in per_message and per_message["5000"] > 0:
        out["per_message_ratio_100k_vs_5k"] = per_message["100000"] / per_message["5000"]
    return out


# -- recall: grep per mode, vector top-k ----------------------------------------------

GREP_SESSION_MESSAGES: Final = 1_000  # messages per conversation in the grep database
GREP_INGEST_BATCH: Final = 5_000  # messages per ingest call (one transaction)
GREP_QUERIES: Final = 60  # distinct queries per mode (each timed once, after a warm-up)
VECTOR_QUERIES: Final = 200
_RARE_VOCAB: Final = 40_000  # pseudo-words drawn with a Zipf law beside the common words
_CONTENT_CACHE: dict[tuple[int, int], list[str]] = {}
_VECTOR_CACHE: dict[int, Any] = {}


def _pseudo_word(i: int) -> str:
    """A deterministic pronounceable word for rank ``i`` (the long tail of a vocabulary)."""
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    out = []
    i += 1
    while i:
        i, r = divmod(i, 80)
        out.append(consonants[r % 16] + vowels[r // 16])
    return "".join(out)


def diverse_texts(count: int, seed: int) -> list[str]:
    """``count`` chat turns of 60-300 characters with a Zipf-like vocabulary.

    Common words come from ``_WORDS``; about a third of the words are drawn from a
    40,000-word long tail with a Zipf law, so full-text posting lists range from most
    rows (common words) to a handful (rare ones), as in real chat.
    """
    key = (count, seed)
    if key in _CONTENT_CACHE:
        return _CONTENT_CACHE[key]
    import numpy as np

    rng = np.random.default_rng(seed)
    tail = [_pseudo_word(i) for i in range(_RARE_VOCAB)]
    lengths = rng.integers(8, 45, size=count)
    total = int(lengths.sum())
    common = rng.integers(0, len(_WORDS), size=total)
    rare = (rng.zipf(1.15, size=total) - 1) % _RARE_VOCAB
    use_rare = rng.random(total) < 0.35
    words = [tail[r] if u else _WORDS[c] for c, r, u in zip(common, rare, use_rare, strict=True)]
    out: list[str] = []
    at = 0
    for n in lengths.tolist():
        text = " ".join(words[at : at + n])
        at += n
        out.append(text[0].upper() + text[1:300] + ".")
    _CONTENT_CACHE[key] = out
    return out


def _grep_sizes(s: Settings) -> list[int]:
    return [max(GREP_SESSION_MESSAGES, round(n * s.size)) for n in s.grep_messages]


def _grep_params(s: Settings) -> dict[str, Any]:
    return {
        "messages": _grep_sizes(s),
        "messages_per_session": GREP_SESSION_MESSAGES,
        "content": "60-300 chars, common words plus a 40k-word Zipf long tail",
        "queries_per_mode": GREP_QUERIES,
        "limit": 20,
        "embedder": "StaticEmbedder (shipped), every message embedded before timing",
        "modes": "full_text scoped/unscoped, regex scoped, semantic and hybrid "
        "scoped/unscoped, through Brain.grep",
        "note": "sizes via --grep-messages (default 10000); 1M takes ~6 min per run",
    }


def _grep_queries(seed: int) -> list[str]:
    """Two- to four-word queries drawn like the messages' words."""
    rng = random.Random(seed)
    texts = diverse_texts(GREP_QUERIES, seed)
    return [" ".join(rng.sample(t.rstrip(".").split(), min(3, len(t.split())))) for t in texts]


def _build_grep_db(brain: Brain, count: int) -> tuple[float, float]:
    """Ingest ``count`` messages in large batches and embed them all; seconds of each."""
    texts = diverse_texts(count, SEED + 20)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    t0 = time.perf_counter()
    for first in range(0, count, GREP_INGEST_BATCH):
        chunk = texts[first : first + GREP_INGEST_BATCH]
        for sub in range(0, len(chunk), GREP_SESSION_MESSAGES):
            n0 = first + sub
            batch = [
                MessageIn(
                    "user" if (n0 + i) % 2 == 0 else "assistant",
                    text,
                    f"m{n0 + i}",
                    created_at=(start + timedelta(seconds=n0 + i)).isoformat(),
                )
                for i, text in enumerate(chunk[sub : sub + GREP_SESSION_MESSAGES])
            ]
            session = f"conv-{n0 // GREP_SESSION_MESSAGES}"
            brain.ingest(session, batch)
    ingest_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    while brain.embed_pending(batch=8_192):
        pass
    # As the daemon's background worker would: grep's entity features and second hop
    # read the entity index (its time is not part of either figure).
    embed_s = time.perf_counter() - t1
    brain.index_entities()
    return ingest_s, embed_s


REUSED_ID_MESSAGES: Final = 3_000


def _reused_ids_params(s: Settings) -> dict[str, Any]:
    return {
        "messages": s.n(REUSED_ID_MESSAGES, 30),
        "shape": "user, assistant call, tool result; every call is call_0",
        "fresh_tail_count": CompactionConfig().fresh_tail_count,
        "summarizer": "FactSummarizer, the offline default (its time is excluded from sweep_db_ms)",
    }


def bench_reused_call_ids(shared: Shared, work: Path) -> Metrics:
    """A sweep and the fresh tail of a tool loop whose server numbers every call ``call_0``.

    Pairing a result with the latest call of its id must stay linear when one id
    is everywhere (it once cost a minute of database work at 3,000 messages).
    """
    count = shared.settings.n(REUSED_ID_MESSAGES, 30)
    db = work / "reused-ids.db"
    brain = Brain(db, BrainConfig(compaction=replace(CompactionConfig(), auto=False)))
    try:
        batch: list[MessageIn] = []
        for i in range(count // 3):
            call = {
                "id": "call_0",
                "type": "function",
                "function": {"name": "read", "arguments": f'{{"path": "f{i}"}}'},
            }
            batch += [
                MessageIn("user", f"please read file {i} and say what it holds"),
                MessageIn("assistant", f"reading {i}", tool_calls=[call]),
                MessageIn("tool", f"contents of file {i} " * 5, tool_call_id="call_0"),
            ]
        for k in range(0, len(batch), BATCH_SIZE):
            brain.ingest(CONTEXT_SESSION, batch[k : k + BATCH_SIZE])
        # The fresh tail as an ingest computes it (brain.lcm.context; no other thread runs).
        from brain import fresh_tail_start, session_conversation

        store = brain.store
        started = time.perf_counter()
        for _ in range(50):
            fresh_tail_start(store, session_conversation(store, CONTEXT_SESSION), 8)
        tail_ms = (time.perf_counter() - started) * 1000 / 50
        report = brain.compact(CONTEXT_SESSION)
    finally:
        brain.close()
    _remove_db(db)
    return {
        "messages": float(count),
        "tail_start_ms": tail_ms,
        "sweep_db_ms": report.took_ms - report.summarize_ms,
        "leaf_passes": float(report.leaf_passes),
    }


def bench_grep(shared: Shared, work: Path) -> Metrics:
    """``Brain.grep`` p50/p95 per mode at each size, scoped to one conversation and not."""
    from brain import GrepOptions

    out: Metrics = {}
    queries = _grep_queries(SEED + 21)
    for count in _grep_sizes(shared.settings):
        db = work / f"grep-{count}.db"
        brain = Brain(db, BrainConfig(compaction=CompactionConfig(auto=False)))
        try:
            print(f"  grep: building {count} messages", file=sys.stderr)
            ingest_s, embed_s = _build_grep_db(brain, count)
            key = f"messages_{count}."
            out[f"{key}ingest_s"], out[f"{key}embed_s"] = ingest_s, embed_s
            sessions = count // GREP_SESSION_MESSAGES
            session = f"conv-{sessions // 2}"
            # The first semantic search loads the vectors; above the exact threshold the
            # IVF index then builds on a thread: timed apart, then waited for.
            t0 = time.perf_counter()
            brain.grep(GrepOptions("warm up", mode="semantic"))
            out[f"{key}vectors_load_s"] = time.perf_counter() - t0
            index = brain._index  # private: the bench waits for the background build
            assert index is not None
            t0 = time.perf_counter()
            index.wait_idle()
            out[f"{key}ivf_build_wait_s"] = time.perf_counter() - t0
            # full_text and hybrid go through the learned ranking stage; the
            # ``_norank`` cases time the same queries without it.
            cases: list[tuple[str, str, str | None, bool]] = [
                ("full_text_scoped", "full_text", session, True),
                ("full_text_scoped_norank", "full_text", session, False),
                ("full_text_all", "full_text", None, True),
                ("regex_scoped", "regex", session, True),
                ("semantic_scoped", "semantic", session, True),
                ("semantic_all", "semantic", None, True),
                ("hybrid_scoped", "hybrid", session, True),
                ("hybrid_scoped_norank", "hybrid", session, False),
                ("hybrid_all", "hybrid", None, True),
                ("hybrid_all_norank", "hybrid", None, False),
            ]
            timed: dict[str, list[int]] = {}
            for name, mode, where, rank in cases:
                qs = [_regex_for(q) for q in queries] if mode == "regex" else queries
                brain.grep(GrepOptions(qs[0], mode=mode, rank=rank), session=where)  # type: ignore[arg-type]
                ns: list[int] = []
                for q in qs:
                    options = GrepOptions(q, mode=mode, rank=rank)  # type: ignore[arg-type]
                    t1 = time.perf_counter_ns()
                    brain.grep(options, session=where)
                    ns.append(time.perf_counter_ns() - t1)
                timed[name] = ns
                lat = latency_metrics(ns)
                out[f"{key}{name}_p50_ms"] = lat["p50_ms"]
                out[f"{key}{name}_p95_ms"] = lat["p95_ms"]
            for name in ("full_text_scoped", "hybrid_scoped", "hybrid_all"):
                # What the stage adds to a grep: per query, ranked minus plain.
                added = [a - b for a, b in zip(timed[name], timed[f"{name}_norank"], strict=True)]
                out[f"{key}ranking_added_{name}_p50_ms"] = statistics.median(added) / 1e6
            out[f"{key}peak_rss_mb"] = _peak_rss_mb()
        finally:
            brain.close()
        _remove_db(db)
    return out


def _regex_for(query: str) -> str:
    """A bounded regex from a query: its first word as a prefix, then any next word."""
    return rf"\b{query.split(maxsplit=1)[0][:4]}\w* \w+"


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _vector_sizes(s: Settings) -> list[int]:
    return [max(1_000, round(n * s.size)) for n in s.vector_rows]


def _vectors_params(s: Settings) -> dict[str, Any]:
    from brain import StaticEmbedder

    return {
        "rows": _vector_sizes(s),
        "dim": StaticEmbedder.dim,
        "vectors": "StaticEmbedder over diverse_texts (60-300 chars), queries 3-word texts",
        "k": 10,
        "queries": VECTOR_QUERIES,
        "stored": "int8 rows with a float32 scale each (brain.vectors.quantise), as the index",
        "exact": "int8 rows x float32 query (einsum), then argpartition",
        "ivf": "brain.vectors.ann.IVF over the int8 rows, sqrt(n) lists, default_nprobe",
        "recall": "recall_at_10: IVF over int8 vs exact float32; int8_exact_recall_at_10: "
        "exact int8 vs exact float32",
        "note": "sizes via --vector-rows (default 100000,1000000)",
    }


def _embedded(count: int) -> Any:
    """``count`` StaticEmbedder vectors of generated chat turns (cached per invocation)."""
    if count not in _VECTOR_CACHE:
        from brain import StaticEmbedder

        print(f"  vectors: embedding {count} texts", file=sys.stderr)
        _VECTOR_CACHE[count] = StaticEmbedder(batch_size=8_192).embed(
            diverse_texts(count, SEED + 30)
        )
    return _VECTOR_CACHE[count]


def bench_vectors(shared: Shared, work: Path) -> Metrics:
    """Top-10 latency exact vs IVF at each size over the int8 rows the index stores, IVF
    build time, and recall@10 of int8 exact and int8 IVF against exact float32."""
    import numpy as np

    from brain import IVF, StaticEmbedder, exact_top_k, ivf_default_nprobe
    from brain import quantise_vectors as quantise
    from brain import quantised_scores as scores

    del work
    out: Metrics = {}
    queries = StaticEmbedder().embed(_grep_queries(SEED + 31)[:VECTOR_QUERIES])
    extra = StaticEmbedder().embed(diverse_texts(VECTOR_QUERIES, SEED + 32))
    queries = np.concatenate([queries, extra])[:VECTOR_QUERIES]
    for count in _vector_sizes(shared.settings):
        matrix = _embedded(count)
        codes, scales = quantise(matrix)
        key = f"rows_{count}."

        def vectors(p: Any, codes: Any = codes, scales: Any = scales) -> Any:
            return (codes[p].astype(np.float32) * scales[p, None]).astype(np.float32)

        t0 = time.perf_counter()
        ivf = IVF.build(count, vectors)
        out[f"{key}ivf_build_s"] = time.perf_counter() - t0
        nprobe = ivf_default_nprobe(ivf.lists)
        exact_ns: list[int] = []
        ivf_ns: list[int] = []
        recall: list[float] = []
        recall_int8: list[float] = []
        recall_ivf_f32: list[float] = []
        for q in queries:
            truth = set(exact_top_k(matrix @ q, 10).tolist())  # float32, as before v19
            t1 = time.perf_counter_ns()
            exact = exact_top_k(scores(codes, scales, q), 10)
            exact_ns.append(time.perf_counter_ns() - t1)
            t1 = time.perf_counter_ns()
            found, _ = ivf.search(
                lambda p, q=q, c=codes, s=scales: scores(c[p], s[p], q), q, 10, nprobe
            )
            ivf_ns.append(time.perf_counter_ns() - t1)
            recall.append(len(truth & set(found.tolist())) / len(truth))
            recall_int8.append(len(truth & set(exact.tolist())) / len(truth))
            recall_ivf_f32.append(len(set(exact.tolist()) & set(found.tolist())) / len(truth))
        for name, ns in (("exact", exact_ns), ("ivf", ivf_ns)):
            lat = latency_metrics(ns)
            out[f"{key}{name}_p50_ms"], out[f"{key}{name}_p95_ms"] = lat["p50_ms"], lat["p95_ms"]
        out[f"{key}recall_at_10"] = statistics.fmean(recall)
        out[f"{key}int8_exact_recall_at_10"] = statistics.fmean(recall_int8)
        out[f"{key}ivf_vs_int8_exact_recall_at_10"] = statistics.fmean(recall_ivf_f32)
        out[f"{key}lists"], out[f"{key}nprobe"] = float(ivf.lists), float(nprobe)
        out[f"{key}float32_matrix_mb"] = matrix.nbytes / 2**20
        out[f"{key}matrix_mb"] = (codes.nbytes + scales.nbytes) / 2**20
    return out


BIGVECTORS_MESSAGES: Final = 1_000_000
BIGVECTORS_QUERIES: Final = 30  # timed grep calls per mode and scope


def _bigvectors_params(s: Settings) -> dict[str, Any]:
    return {
        "messages": s.n(BIGVECTORS_MESSAGES, GREP_SESSION_MESSAGES),
        "build": "the grep bench's database (Brain.ingest in batches of 5,000, 1,000 messages "
        "a conversation, StaticEmbedder through Brain.embed_pending), built once into "
        "$BENCH_BIGVECTORS_DB if set (and kept), else into the work directory",
        "through": "the daemon (brain serve), raw pipes",
        "cold": "the matrix file removed first: the first semantic grep reads every vector "
        "from SQLite and writes the file",
        "warm": "restarted with the file in place: the first semantic grep maps it",
        "rss": "VmRSS after the first ping, VmHWM after the first semantic answer "
        "(/proc/PID/status); loading_peak_over_matrix = (VmHWM - VmRSS at ping) / file size",
        "queries": f"{BIGVECTORS_QUERIES} per mode and scope, in the warm start (through "
        "the IVF the cold start built and saved beside the matrix file: it waits for it)",
        "inprocess": "a fresh process loads numpy and the embedder, then grep's index: "
        "VmHWM after minus VmRSS before, over the matrix file's size (cold: file removed)",
    }


def _proc_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def bench_bigvectors(shared: Shared, work: Path) -> Metrics:
    """Start-up, first semantic answer, RSS while loading, matrix bytes and grep p50 at 1M
    messages, through the daemon, with the matrix file absent (cold) and present (warm)."""
    count = shared.settings.n(BIGVECTORS_MESSAGES, GREP_SESSION_MESSAGES)
    kept = os.environ.get("BENCH_BIGVECTORS_DB")
    db = Path(kept) if kept else work / f"bigvectors-{count}.db"
    out: Metrics = {}
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        brain = Brain(db, BrainConfig(compaction=CompactionConfig(auto=False)))
        try:
            print(f"  bigvectors: building {count} messages", file=sys.stderr)
            out["ingest_s"], out["embed_s"] = _build_grep_db(brain, count)
        finally:
            brain.close()
    matrix_file = db.with_name(f"{db.name}-vectors.message-summary")
    queries = _grep_queries(SEED + 41)
    session = f"conv-{count // GREP_SESSION_MESSAGES // 2}"
    for phase in ("cold", "warm"):
        if phase == "cold":
            matrix_file.unlink(missing_ok=True)
            matrix_file.with_name(matrix_file.name + ".ivf").unlink(missing_ok=True)
        key = f"{phase}."
        started = time.perf_counter()
        with raw_daemon(db, work / "bigvectors.log") as proc:
            assert proc.stdin is not None
            assert proc.stdout is not None

            def call(
                method: str,
                params: dict[str, Any] | None = None,
                proc: subprocess.Popen[bytes] = proc,
            ) -> dict[str, Any]:
                assert proc.stdin is not None
                assert proc.stdout is not None
                proc.stdin.write(frame(1, method, params))
                proc.stdin.flush()
                answer = read_answer(proc.stdout)
                if "result" not in answer:
                    raise RuntimeError(f"unexpected {method} answer: {answer}")
                return answer

            call("ping")
            out[f"{key}first_ping_ms"] = (time.perf_counter() - started) * 1000
            rss_ping = _proc_kb(proc.pid, "VmRSS")
            call("grep", {"query": queries[0], "mode": "semantic", "all": True})
            out[f"{key}first_semantic_ms"] = (time.perf_counter() - started) * 1000
            hwm = _proc_kb(proc.pid, "VmHWM")
            matrix_bytes = matrix_file.stat().st_size if matrix_file.exists() else 0
            out[f"{key}rss_at_ping_mb"] = rss_ping / 1024
            out[f"{key}peak_rss_after_load_mb"] = hwm / 1024
            out[f"{key}matrix_file_mb"] = matrix_bytes / 2**20
            if matrix_bytes:
                out[f"{key}loading_peak_over_matrix"] = (hwm - rss_ping) * 1024 / matrix_bytes
            # The IVF builds on a thread after the first search, and is saved beside the
            # matrix file for the next start: the cold start waits for it (at most 300 s),
            # and the warm start searches through it from its first query.
            ivf_file = matrix_file.with_name(matrix_file.name + ".ivf")
            deadline = time.perf_counter() + 300
            while phase == "cold" and time.perf_counter() < deadline:
                if ivf_file.exists() and ivf_file.stat().st_mtime > time.time() - (
                    time.perf_counter() - started
                ):
                    out[f"{key}ivf_saved_s"] = time.perf_counter() - started
                    break
                time.sleep(1)
            if phase == "cold":
                continue
            for mode in ("semantic", "hybrid"):
                for scope, extra in (("all", {"all": True}), ("scoped", {"session": session})):
                    ns: list[int] = []
                    for q in queries[2 : 2 + BIGVECTORS_QUERIES]:
                        t0 = time.perf_counter_ns()
                        call("grep", {"query": q, "mode": mode, **extra})
                        ns.append(time.perf_counter_ns() - t0)
                    lat = latency_metrics(ns)
                    out[f"{key}{mode}_{scope}_p50_ms"] = lat["p50_ms"]
                    out[f"{key}{mode}_{scope}_p95_ms"] = lat["p95_ms"]
            out[f"{key}peak_rss_mb"] = _proc_kb(proc.pid, "VmHWM") / 1024
    for phase in ("cold", "warm"):
        if phase == "cold":
            matrix_file.unlink(missing_ok=True)
        run = subprocess.run(
            [sys.executable, "-c", _LOADING_PROBE, str(db)],
            capture_output=True,
            text=True,
            check=True,
            env=child_env(),
        )
        probe = orjson.loads(run.stdout)
        out[f"{phase}.inprocess_load_s"] = probe["load_s"]
        out[f"{phase}.inprocess_loading_rss_mb"] = probe["grown_kb"] / 1024
        out[f"{phase}.inprocess_loading_over_matrix"] = probe["grown_kb"] * 1024 / probe["file"]
    if not kept:
        _remove_db(db)
    return out


_LOADING_PROBE: Final = """
import sys, time, orjson
from pathlib import Path
from brain import Brain, GrepOptions
def kb(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
brain = Brain(sys.argv[1])
brain.embedder.embed(["the model and numpy loaded before the baseline"])
index = brain._vectors.indexes(brain.embedder)[0]  # private: the probe times the load alone
base = kb("VmRSS")
started = time.perf_counter()
index.search(brain.store, brain.embedder.embed(["budget"])[0], 10)
took = time.perf_counter() - started
grown = kb("VmHWM") - base
path = Path(sys.argv[1] + "-vectors.message-summary")
print(orjson.dumps({"load_s": took, "grown_kb": grown, "file": path.stat().st_size}).decode())
brain.close()
"""
"""Loads grep's vectors in a fresh process after numpy and the embedder: the loading's
own RSS growth (VmHWM after it minus VmRSS before), against the matrix file's size."""


# -- the learned retrieval graph --------------------------------------------------------

GRAPH_TAUGHT_SHARE: Final = 0.1  # of the nodes, taught one by one; the rest are synced chunks
GRAPH_SECTIONS_PER_FILE: Final = 25  # markdown sections (one chunk each) per workspace file
GRAPH_QUERIES: Final = 200  # timed queries per option set, after one cold query
GRAPH_WRITES: Final = 50  # timed teach / learn / correction calls each
GRAPH_WIDE: Final[dict[str, Any]] = {"top_k": 50, "threshold": 0.001, "max_fired": 64}


def _graph_sizes(s: Settings) -> list[int]:
    return [max(200, round(n * s.size)) for n in s.graph_nodes]


def _graph_params(s: Settings) -> dict[str, Any]:
    return {
        "nodes": _graph_sizes(s),
        "build": f"{1 - GRAPH_TAUGHT_SHARE:.0%} chunks from a generated markdown workspace "
        f"({GRAPH_SECTIONS_PER_FILE} sections of 60-1,200 chars per file) through Brain.sync "
        f"(sequence edges, embedded at once), {GRAPH_TAUGHT_SHARE:.0%} taught one by one "
        "(each linked to its nearest nodes)",
        "embedder": "StaticEmbedder (shipped)",
        "queries": f"{GRAPH_QUERIES} per option set (4-10 words of a node's text), "
        "each traced in its own chat",
        "options": {"default": "TraverseOptions()", "wide": GRAPH_WIDE},
        "writes": f"{GRAPH_WRITES} each of teach, learn (after a query in its chat) and "
        "correction (after a query in its chat; the query untimed)",
        "maintain": "all tasks, dry run first, then the full run",
        "save": "Brain.save (WAL checkpoint) after the build and after one more teach",
        "note": "sizes via --graph-nodes (default 1000,5000; e.g. 1000,5000,50000)",
    }


def _write_workspace(root: Path, chunks: int, seed: int) -> None:
    """``chunks`` markdown sections over daily notes of ``GRAPH_SECTIONS_PER_FILE`` sections.

    Only ``memory/*.md`` (and the top-level defaults) are synced without extra
    paths, as in an agent's workspace, so the notes go there, one file a day.
    """
    rng = random.Random(seed)
    texts = diverse_texts(chunks * 4, seed)
    memory = root / "memory"
    memory.mkdir(parents=True)
    day0 = datetime(2024, 1, 1, tzinfo=UTC)
    for first in range(0, chunks, GRAPH_SECTIONS_PER_FILE):
        day = (day0 + timedelta(days=first // GRAPH_SECTIONS_PER_FILE)).date().isoformat()
        parts: list[str] = []  # no title heading: it would be a chunk of its own
        for n in range(first, min(chunks, first + GRAPH_SECTIONS_PER_FILE)):
            title = " ".join(rng.sample(texts[4 * n].rstrip(".").split(), 3))
            # One to four paragraphs: at most ~1,200 chars, under the 1,500-char chunk limit.
            body = "\n\n".join(texts[4 * n : 4 * n + rng.randint(1, 4)])
            parts.append(f"## {title}\n\n{body}\n")
        (memory / f"{day}.md").write_text("\n".join(parts))


def _graph_queries(count: int, seed: int) -> list[str]:
    """Queries of 4-10 words drawn from generated turns, like a question about a note."""
    rng = random.Random(seed)
    out = []
    for text in diverse_texts(count, seed):
        words = text.rstrip(".").split()
        out.append(" ".join(rng.sample(words, min(len(words), rng.randint(4, 10)))))
    return out


def _p50(values: Sequence[float]) -> float:
    return percentile(sorted(values), 50)


def _timed_ms(call: Callable[..., object], *args: Any, **kwargs: Any) -> float:
    t0 = time.perf_counter_ns()
    call(*args, **kwargs)
    return (time.perf_counter_ns() - t0) / 1e6


def bench_graph(shared: Shared, work: Path) -> Metrics:
    """The learned retrieval graph through ``Brain`` at each size: build, query, writes."""
    from brain import NewNode, TraverseOptions

    out: Metrics = {}
    for size in _graph_sizes(shared.settings):
        key = f"nodes_{size}."
        taught = round(size * GRAPH_TAUGHT_SHARE)
        workspace = work / f"workspace-{size}"
        _write_workspace(workspace, size - taught, SEED + 40)
        teachings = diverse_texts(taught + 3 * GRAPH_WRITES + 1, SEED + 41)
        db = work / f"graph-{size}.db"
        brain = Brain(db, BrainConfig(compaction=CompactionConfig(auto=False)))
        try:
            print(f"  graph: building {size} nodes", file=sys.stderr)
            t0 = time.perf_counter()
            report = brain.sync(workspace)
            out[f"{key}sync_s"] = time.perf_counter() - t0
            assert report.pending == 0, report
            t0 = time.perf_counter()
            for text in teachings[:taught]:
                brain.teach(NewNode("teaching", text))
            out[f"{key}teach_all_s"] = time.perf_counter() - t0
            out[f"{key}build_s"] = out[f"{key}sync_s"] + out[f"{key}teach_all_s"]
            info = brain.info()
            out[f"{key}nodes"], out[f"{key}edges"] = float(info.nodes), float(info.edges)
            out[f"{key}db_bytes_after_build"] = float(info.db_bytes)
            saved = brain.save()
            out[f"{key}save_after_build_ms"] = saved.took_ms
            out[f"{key}save_after_build_wal_frames"] = float(saved.wal_frames)

            queries = _graph_queries(2 * GRAPH_QUERIES + 3 * GRAPH_WRITES + 1, SEED + 42)
            # The first query loads the graph mirror and the vectors: timed apart.
            out[f"{key}query_cold_ms"] = _timed_ms(brain.query, queries[-1], chat_id="c")
            sets = (("query", TraverseOptions()), ("query_wide", TraverseOptions(**GRAPH_WIDE)))
            for n, (name, options) in enumerate(sets):
                wall: list[int] = []
                parts: dict[str, list[float]] = {"embed_query_ms": [], "traverse_ms": []}
                fired: list[float] = []
                for i, q in enumerate(queries[n * GRAPH_QUERIES : (n + 1) * GRAPH_QUERIES]):
                    t1 = time.perf_counter_ns()
                    result = brain.query(q, chat_id=f"{name}-{i}", options=options)
                    wall.append(time.perf_counter_ns() - t1)
                    for part, values in parts.items():
                        values.append(result.timings[part])
                    fired.append(len(result.fired))
                lat = latency_metrics(wall)
                out[f"{key}{name}_p50_ms"] = lat["p50_ms"]
                out[f"{key}{name}_p95_ms"] = lat["p95_ms"]
                out[f"{key}{name}_embed_p50_ms"] = _p50(parts["embed_query_ms"])
                out[f"{key}{name}_traverse_p50_ms"] = _p50(parts["traverse_ms"])
                # The rest of a query: fetching the fired nodes, the context, the trace commit.
                rest = [
                    w / 1e6 - e - t
                    for w, e, t in zip(
                        wall, parts["embed_query_ms"], parts["traverse_ms"], strict=True
                    )
                ]
                out[f"{key}{name}_rest_p50_ms"] = _p50(rest)
                out[f"{key}{name}_fired_mean"] = statistics.fmean(fired)

            writes = queries[2 * GRAPH_QUERIES :]
            texts = teachings[taught:]
            teach_ms = [
                _timed_ms(brain.teach, NewNode("teaching", t)) for t in texts[:GRAPH_WRITES]
            ]
            learn_ms: list[float] = []
            correction_ms: list[float] = []
            for i in range(GRAPH_WRITES):
                chat = f"learn-{i}"
                brain.query(writes[i], chat_id=chat)
                outcome = 1.0 if i % 2 == 0 else -1.0
                learn_ms.append(_timed_ms(brain.learn, outcome, chat_id=chat))
                chat = f"correct-{i}"
                brain.query(writes[GRAPH_WRITES + i], chat_id=chat)
                node = NewNode("correction", texts[GRAPH_WRITES + i])
                correction_ms.append(_timed_ms(brain.teach, node, chat_id=chat))
            out[f"{key}teach_p50_ms"] = _p50(teach_ms)
            out[f"{key}learn_p50_ms"] = _p50(learn_ms)
            out[f"{key}correction_p50_ms"] = _p50(correction_ms)

            t0 = time.perf_counter()
            brain.maintain(dry_run=True)
            out[f"{key}maintain_dry_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            done = brain.maintain()
            out[f"{key}maintain_s"] = time.perf_counter() - t0
            for task, task_report in done.tasks.items():
                if "took_ms" in task_report:
                    out[f"{key}maintain_{task}_ms"] = float(task_report["took_ms"])
            # A query right after maintenance reloads the mirror and the vectors.
            out[f"{key}query_after_maintain_ms"] = _timed_ms(
                brain.query, writes[-1], chat_id="after"
            )

            brain.save()
            brain.teach(NewNode("teaching", texts[-1]))
            saved = brain.save()
            out[f"{key}save_after_write_ms"] = saved.took_ms
            info = brain.info()
            out[f"{key}db_bytes"] = float(info.db_bytes)
            out[f"{key}db_bytes_per_node"] = info.db_bytes / max(1, info.nodes)
            out[f"{key}peak_rss_mb"] = _peak_rss_mb()
        finally:
            brain.close()
        _remove_db(db)
        shutil.rmtree(workspace, ignore_errors=True)
    return out


# -- reads during maintain ----------------------------------------------------------------

MAINTAIN_NODES: Final = 100_000
"""Graph size for ``maintain_reads`` when named in ``--only`` (else a tenth of it)."""
MAINTAIN_FANOUT: Final = 10
MAINTAIN_IDLE_SAMPLES: Final = 100


def _maintain_nodes(s: Settings) -> int:
    return s.n(MAINTAIN_NODES if s.heavy else MAINTAIN_NODES // 10, 500)


def _maintain_params(s: Settings) -> dict[str, Any]:
    nodes = _maintain_nodes(s)
    return {
        "nodes": nodes,
        "edges": nodes * MAINTAIN_FANOUT,
        "content": "teaching nodes, 10 edges each, weights 0.05-0.95, last changed 0-60 days "
        "ago (no vectors: merge and connect find nothing); a 200-message session",
        "reads": "info and assemble (budget 4,000) alternating on one client while maintain "
        "(all tasks) runs on another request of the same daemon",
    }


def _build_maintain_graph(db: Path, nodes: int, seed: int) -> None:
    """Nodes and edges written with SQL in a few transactions (fast), plus a session."""
    from brain import NewNode, insert_node, open_store

    rng = random.Random(seed)
    now = time.time()
    store = open_store(db, BrainConfig(synchronous="NORMAL"))
    try:
        with store.transaction():
            rows = [
                insert_node(store, NewNode("teaching", f"fact {i} of the bench"), embed=False)[0]
                for i in range(nodes)
            ]
        edges = (
            (
                rows[i],
                rows[(i + 1 + rng.randrange(nodes - 1)) % nodes],
                round(rng.uniform(0.05, 0.95), 4),
                time.strftime(
                    "%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now - rng.uniform(0, 60) * 86_400)
                ),
            )
            for i in range(nodes)
            for _ in range(MAINTAIN_FANOUT)
        )
        batch: list[tuple[int, int, float, str]] = []
        for edge in edges:
            batch.append(edge)
            if len(batch) == 50_000:
                with store.transaction():
                    store.executemany(
                        "INSERT OR IGNORE INTO edges (source, target, weight, kind, updated_at) "
                        "VALUES (?, ?, ?, 'learned', ?)",
                        batch,
                    )
                batch = []
        with store.transaction():
            store.executemany(
                "INSERT OR IGNORE INTO edges (source, target, weight, kind, updated_at) "
                "VALUES (?, ?, ?, 'learned', ?)",
                batch,
            )
    finally:
        store.close()
    brain = Brain(db, BrainConfig(compaction=CompactionConfig(auto=False)))
    try:
        rng_text = random.Random(seed + 1)
        brain.ingest(
            "s",
            [
                MessageIn("user" if i % 2 else "assistant", make_content(rng_text))
                for i in range(200)
            ],
        )
    finally:
        brain.close()


def bench_maintain_reads(shared: Shared, work: Path) -> Metrics:
    """info and assemble latency through the daemon, idle and while a maintain runs.

    One client, two threads: one sends ``maintain`` (all tasks) and waits; the
    other alternates ``info`` and ``assemble`` until it is answered. With the
    engine lock held for the whole maintain, a read waited for all of it.
    """
    import threading

    nodes = _maintain_nodes(shared.settings)
    db = work / "maintain.db"
    print(f"  maintain_reads: building {nodes} nodes", file=sys.stderr)
    t0 = time.perf_counter()
    _build_maintain_graph(db, nodes, SEED + 60)
    out: Metrics = {"build_s": time.perf_counter() - t0}
    reads: dict[str, tuple[str, dict[str, Any] | None]] = {
        "info": ("info", None),
        "assemble": ("assemble", {"session": "s", "budget": 4_000}),
    }
    # No background compaction: the first assemble at 4,000 would fold the session (it
    # follows the budget) partway through the idle samples.
    args = ["--embedder", "hash", "--auto-compact", "false"]
    with client_daemon(db, work / "daemon.log", args) as client:
        for name, (method, params) in reads.items():
            idle = []
            for _ in range(MAINTAIN_IDLE_SAMPLES):
                t = time.perf_counter_ns()
                client.call(method, params, timeout=CALL_TIMEOUT_S)
                idle.append(time.perf_counter_ns() - t)
            out.update(latency_metrics(idle, f"idle_{name}_"))
        done = threading.Event()
        report: dict[str, Any] = {}

        def run_maintain() -> None:
            try:
                t = time.perf_counter()
                report.update(client.call("maintain", {}, timeout=3_600, progress=True))
                report["wall_s"] = time.perf_counter() - t
            finally:
                done.set()

        worker = threading.Thread(target=run_maintain, daemon=True)
        worker.start()
        samples: dict[str, list[int]] = {name: [] for name in reads}
        phase, worst = "start", (0, "", "")
        while not done.is_set():
            for name, (method, params) in reads.items():
                t = time.perf_counter_ns()
                client.call(method, params, timeout=3_600)
                took = time.perf_counter_ns() - t
                samples[name].append(took)
                while not client.notifications.empty():  # maintain's task changes
                    phase = str(client.notifications.get()["params"]["phase"])
                worst = max(worst, (took, name, phase))
        worker.join()
    print(
        f"  maintain_reads: slowest read {worst[0] / 1e6:.0f} ms ({worst[1]}, "
        f"answered in maintain's {worst[2]} task)",
        file=sys.stderr,
    )
    for name, ns in samples.items():
        out.update(latency_metrics(ns, f"during_{name}_"))
        out[f"during_{name}_max_ms"] = max(ns) / 1e6 if ns else math.nan
        out[f"during_{name}_samples"] = float(len(ns))
    out["maintain_s"] = float(report["wall_s"])
    out["maintain_edges_decayed"] = float(report["tasks"]["decay"]["decayed"])
    out["maintain_edges_pruned"] = float(report["tasks"]["prune"]["edges"])
    _remove_db(db)
    return out


# -- the graph at scale: start-up, teach, maintain ----------------------------------------

SCALE_NODES: Final = 100_000
"""Graph size for ``graph_scale`` when named in ``--only`` (else a tenth of it)."""
SCALE_TEACHES: Final = 50
SCALE_QUERIES: Final = 20
SCALE_SETTLE_S: Final = 5.0
_scale_built: dict[int, Path] = {}  # one build per invocation, copied for each run


def _scale_nodes(s: Settings) -> int:
    return s.n(SCALE_NODES if s.heavy else SCALE_NODES // 10, 500)


def _scale_params(s: Settings) -> dict[str, Any]:
    nodes = _scale_nodes(s)
    return {
        "nodes": nodes,
        "edges": nodes * MAINTAIN_FANOUT,
        "content": "maintain_reads' graph (10 edges a node, random weights and ages) with "
        "generated node texts, every node embedded (hash embedder, dim 256)",
        "daemon": "--embedder hash --auto-compact false",
        "first_answer": "spawn to the first ping's answer",
        "first_query": "a query sent right after that answer (loads the mirror and the vectors)",
        "teach": f"{SCALE_TEACHES} teaches after {SCALE_QUERIES} queries and a "
        f"{SCALE_SETTLE_S:g} s pause (the graph index builds its IVF lists in the background "
        "after its first search, as in a daemon serving for more than a few seconds)",
        "maintain": "every task through the daemon (it runs in a child process)",
        "note": "named in --only: 100k nodes (a ~30 s build, once per invocation)",
    }


def _build_scale_graph(db: Path, nodes: int, seed: int) -> None:
    """``_build_maintain_graph``'s graph with varied node texts, every node embedded."""
    from brain import HashEmbedder, open_store

    _build_maintain_graph(db, nodes, seed)
    texts = diverse_texts(nodes, seed + 1)
    store = open_store(db, BrainConfig(synchronous="NORMAL"))
    try:
        rows = [int(r[0]) for r in store.execute("SELECT id FROM nodes ORDER BY id")]
        with store.transaction():
            store.executemany(
                "UPDATE nodes SET content = ? WHERE id = ?", list(zip(texts, rows, strict=True))
            )
            # Queued as ``insert_node`` queues a node (the build skipped it for speed).
            store.execute(
                "INSERT OR IGNORE INTO embed_queue (kind, row_id) SELECT 'node', id FROM nodes"
            )
    finally:
        store.close()
    brain = Brain(
        db,
        BrainConfig(compaction=CompactionConfig(auto=False)),
        embedder=HashEmbedder(),
        may_switch_embedder=True,
    )
    try:
        brain.embed_nodes(rows, batch=4_096)
        brain.save()
    finally:
        brain.close()


def bench_graph_scale(shared: Shared, work: Path) -> Metrics:
    """A large graph through the daemon: first answer, first query, teach, maintain."""
    nodes = _scale_nodes(shared.settings)
    out: Metrics = {}
    built = _scale_built.get(nodes)
    if built is None or not built.exists():
        built = shared.settings.root / f"graph-scale-{nodes}.db"
        print(f"  graph_scale: building {nodes} nodes", file=sys.stderr)
        t0 = time.perf_counter()
        _build_scale_graph(built, nodes, SEED + 80)
        out["build_s"] = time.perf_counter() - t0
        _scale_built[nodes] = built
    db = work / "scale.db"
    shutil.copyfile(built, db)
    key = f"nodes_{nodes}."
    args = ["--embedder", "hash", "--auto-compact", "false"]
    started = time.perf_counter()
    with client_daemon(db, work / "daemon.log", args) as client:  # answers a ping first
        out[f"{key}first_answer_ms"] = (time.perf_counter() - started) * 1000
        queries = _graph_queries(SCALE_QUERIES + 1, SEED + 81)
        t = time.perf_counter()
        client.call("query", {"query": queries[0]}, timeout=CALL_TIMEOUT_S)
        out[f"{key}first_query_ms"] = (time.perf_counter() - t) * 1000
        out[f"{key}rss_after_first_query_mb"] = _rss_mb(client.proc.pid)
        wall = []
        for q in queries[1:]:
            t1 = time.perf_counter_ns()
            client.call("query", {"query": q}, timeout=CALL_TIMEOUT_S)
            wall.append(time.perf_counter_ns() - t1)
        out.update(latency_metrics(wall, f"{key}query_"))
        time.sleep(SCALE_SETTLE_S)
        texts = diverse_texts(SCALE_TEACHES, SEED + 82)
        taught = []
        for text in texts:
            t1 = time.perf_counter_ns()
            client.call("teach", {"content": text}, timeout=CALL_TIMEOUT_S)
            taught.append(time.perf_counter_ns() - t1)
        out.update(latency_metrics(taught, f"{key}teach_"))
        t = time.perf_counter()
        report = client.call("maintain", {}, timeout=3_600)
        out[f"{key}maintain_s"] = time.perf_counter() - t
        for task, task_report in report["tasks"].items():
            if "took_ms" in task_report:
                out[f"{key}maintain_{task}_ms"] = float(task_report["took_ms"])
        out[f"{key}peak_rss_mb"] = _rss_mb(client.proc.pid)
    _remove_db(db)
    return out


# -- reads beside long writes -------------------------------------------------------------

RUW_NODES: Final = 100_000
"""Graph size for ``read_under_write`` when named in ``--only`` (else a tenth of it)."""
RUW_MESSAGES: Final = 50_000
"""Messages of the session it compacts when named in ``--only`` (else a tenth of it)."""
RUW_IDLE_SAMPLES: Final = 100
RUW_TAUGHT: Final = 20  # nodes taught with vectors, so a query has seeds


def _ruw_sizes(s: Settings) -> tuple[int, int]:
    scale = 1 if s.heavy else 10
    return s.n(RUW_NODES // scale, 500), s.n(RUW_MESSAGES // scale, 500)


def _ruw_params(s: Settings) -> dict[str, Any]:
    nodes, messages = _ruw_sizes(s)
    return {
        "nodes": nodes,
        "edges": nodes * MAINTAIN_FANOUT,
        "compacted_messages": messages,
        "content": "maintain_reads' graph and 200-message session 's', plus a tool-heavy "
        f"agent session of {messages} messages (auto-compaction off) and {RUW_TAUGHT} "
        "taught nodes",
        "reads": "grep (full text, session s), assemble (session s, budget 4,000) and query "
        "(graph, not recorded) in turn on one client, idle, then while maintain (all tasks) "
        "runs, then while a full sweep (compact, extractive) of the agent session runs, "
        "each long write on another request of the same daemon",
        "target": "each read's p99 during a write within 2x of its idle p99",
    }


def _reads_during(
    client: Client, reads: dict[str, tuple[str, dict[str, Any]]], method: str, params: Any
) -> tuple[dict[str, list[int]], float]:
    """Read latencies (ns) sampled in turn until the long ``method`` call is answered."""
    import threading

    done = threading.Event()
    wall: list[float] = []

    def run() -> None:
        try:
            t = time.perf_counter()
            client.call(method, params, timeout=3_600)
            wall.append(time.perf_counter() - t)
        finally:
            done.set()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    samples: dict[str, list[int]] = {name: [] for name in reads}
    while not done.is_set():
        for name, (read, read_params) in reads.items():
            t = time.perf_counter_ns()
            client.call(read, read_params, timeout=3_600)
            samples[name].append(time.perf_counter_ns() - t)
    worker.join()
    if not wall:
        raise RuntimeError(f"{method} failed during read_under_write")
    return samples, wall[0]


def bench_read_under_write(shared: Shared, work: Path) -> Metrics:
    """grep, assemble and query p99 through the daemon: idle, during maintain, during a sweep.

    The writes run on the same daemon as the reads (another request), as a host
    sees them. Reads that took the engine lock waited for every chunk the write
    held it for; reads on read connections wait for none.
    """
    nodes, messages = _ruw_sizes(shared.settings)
    db = work / "read-under-write.db"
    print(f"  read_under_write: building {nodes} nodes, {messages} messages", file=sys.stderr)
    t0 = time.perf_counter()
    _build_maintain_graph(db, nodes, SEED + 70)
    config = BrainConfig(compaction=CompactionConfig(auto=False), synchronous="NORMAL")
    brain = Brain(db, config)
    try:
        stream = agent_messages(SEED + 71)
        left = messages
        while left:
            batch = list(itertools.islice(stream, min(BATCH_SIZE * 10, left)))
            brain.ingest(CONTEXT_SESSION, batch)
            left -= len(batch)
    finally:
        brain.close()
    out: Metrics = {"build_s": time.perf_counter() - t0}
    reads: dict[str, tuple[str, dict[str, Any]]] = {
        "grep": ("grep", {"query": "fact bench", "mode": "full_text", "session": "s"}),
        "assemble": ("assemble", {"session": "s", "budget": 4_000}),
        "query": ("query", {"query": "which rule applies to the deploy", "record": False}),
    }
    args = ["--embedder", "hash", "--auto-compact", "false"]
    with client_daemon(db, work / "daemon.log", args) as client:
        for n in range(RUW_TAUGHT):
            client.call("teach", {"content": f"deploy rule {n}: {_WORDS[n]} before release"})
        for method, params in reads.values():
            client.call(method, params, timeout=CALL_TIMEOUT_S)  # cold: caches, mirror
        idle: dict[str, list[int]] = {name: [] for name in reads}
        for _ in range(RUW_IDLE_SAMPLES):
            for name, (method, params) in reads.items():
                t = time.perf_counter_ns()
                client.call(method, params, timeout=CALL_TIMEOUT_S)
                idle[name].append(time.perf_counter_ns() - t)
        phases = {"idle": idle}
        phases["maintain"], out["maintain_s"] = _reads_during(client, reads, "maintain", {})
        phases["compact"], out["compact_s"] = _reads_during(
            client, reads, "compact", {"session": CONTEXT_SESSION}
        )
    for phase, samples in phases.items():
        for name, ns in samples.items():
            out.update(latency_metrics(ns, f"{phase}_{name}_"))
            out[f"{phase}_{name}_max_ms"] = max(ns) / 1e6 if ns else math.nan
            out[f"{phase}_{name}_samples"] = float(len(ns))
            if phase != "idle":
                idle_p99 = out[f"idle_{name}_p99_ms"]
                out[f"{phase}_{name}_p99_vs_idle"] = out[f"{phase}_{name}_p99_ms"] / idle_p99
    _remove_db(db)
    return out


# -- lifecycle: bounded shutdown, bounded memory -----------------------------------------

STOP_TIMEOUT_S: Final = 2.0
UNREAD_REQUESTS: Final = (3_000, 30_000)


def _stop_params(s: Settings) -> dict[str, Any]:
    return {"shutdown_timeout_s": STOP_TIMEOUT_S, "stuck_writes": 1, "busy_timeout_ms": 600_000}


@contextlib.contextmanager
def _lock_held(db: Path) -> Iterator[None]:
    """This process holds the write lock on ``db``: a daemon's write waits inside the engine."""
    conn = apsw.Connection(str(db))
    conn.set_busy_timeout(30_000)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def _stuck_daemon(db: Path, log: Path) -> subprocess.Popen[bytes]:
    """A daemon whose next write will wait ten minutes for a lock; one write committed first."""
    args = ["--busy-timeout-ms", "600000", "--shutdown-timeout-s", str(STOP_TIMEOUT_S)]
    with log.open("ab") as err:
        proc = subprocess.Popen(
            daemon_command(db, args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=child_env(),
            bufsize=0,
        )
    _track(proc)
    assert proc.stdin is not None
    assert proc.stdout is not None
    message = {"role": "user", "content": "committed before the stop"}
    proc.stdin.write(frame(1, "ingest", {"session": "s", "message": message}))
    read_answer(proc.stdout)
    return proc


def bench_stop(shared: Shared, work: Path) -> Metrics:
    """SIGTERM and ``shutdown`` with a write stuck on another process's lock: ms to exit."""
    out: Metrics = {}
    for way in ("sigterm", "shutdown"):
        db = work / f"{way}.db"
        proc = _stuck_daemon(db, work / f"{way}.log")
        assert proc.stdin is not None
        assert proc.stdout is not None
        try:
            with _lock_held(db):
                stuck = {"session": "s", "message": {"role": "user", "content": "stuck"}}
                proc.stdin.write(frame(2, "ingest", stuck) + frame(3, "ping"))
                while read_answer(proc.stdout).get("id") != 3:
                    pass
                started = time.perf_counter()
                if way == "sigterm":
                    proc.send_signal(signal.SIGTERM)
                else:
                    proc.stdin.write(frame(4, "shutdown"))
                    while read_answer(proc.stdout).get("id") != 4:
                        pass
                    out["shutdown_answer_ms"] = (time.perf_counter() - started) * 1000
                proc.wait(120)
                out[f"{way}_exit_ms"] = (time.perf_counter() - started) * 1000
        finally:
            stop_process(proc)
            _untrack(proc)
    return out


def _unread_params(s: Settings) -> dict[str, Any]:
    return {
        "requests": [max(100, int(n * s.size)) for n in UNREAD_REQUESTS],
        "method": "assemble of 30 messages of ~3 kB (~90 kB an answer)",
    }


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def bench_unread(shared: Shared, work: Path) -> Metrics:
    """Peak RSS of a daemon whose client writes N assemble requests and reads nothing."""
    out: Metrics = {}
    words = "word " * 600
    history = [{"id": f"h{i}", "role": "user", "content": f"{i} {words}"} for i in range(30)]
    for n in _unread_params(shared.settings)["requests"]:
        db = work / f"unread-{n}.db"
        with raw_daemon(db, work / "unread.log") as proc:
            assert proc.stdin is not None
            assert proc.stdout is not None
            proc.stdin.write(frame(0, "ingest", {"session": "s", "messages": history}))
            proc.stdin.flush()
            read_answer(proc.stdout)
            idle = _rss_mb(proc.pid)
            params = {"session": "s", "budget": 100_000}
            data = b"".join(frame(i + 1, "assemble", params) for i in range(n))

            def write(data: bytes = data, stdin: IO[bytes] = proc.stdin) -> None:
                with contextlib.suppress(BrokenPipeError):
                    stdin.write(data)
                    stdin.flush()

            writer = threading.Thread(target=write, daemon=True)
            writer.start()
            # Unread until the daemon's memory stops growing (2 s flat) or a minute passes.
            peak, flat_since, give_up = idle, time.monotonic(), time.monotonic() + 60
            while time.monotonic() - flat_since < 2.0 and time.monotonic() < give_up:
                time.sleep(0.1)
                rss = _rss_mb(proc.pid)
                if rss > peak + 1:
                    flat_since = time.monotonic()
                peak = max(peak, rss)
            for _ in range(n):
                read_answer(proc.stdout)
            writer.join(60)
        out[f"idle_rss_mb_{n}"] = idle
        out[f"peak_rss_mb_{n}"] = peak
        _remove_db(db)
    return out


# -- provider stall ---------------------------------------------------------------------


def _provider_stall_params(s: Settings) -> dict[str, Any]:
    return {"ingests": s.n(300, 20), "hanging": 8, "warmup": 20}


class _BlockingProvider:
    """An OpenAI-shaped endpoint on loopback that answers nothing until released.

    Every POST (chat completions, embeddings) waits; ``release`` answers the held
    ones and any later one with 503, so the daemon's waits end as a failure.
    """

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.released = threading.Event()
        self._lock = threading.Lock()
        self.held = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with provider._lock:
                    provider.held += 1
                provider.released.wait()
                body = b'{"error": {"message": "released"}}'
                with contextlib.suppress(OSError):
                    self.send_response(503)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.released.set()
        self._httpd.shutdown()
        self._httpd.server_close()


def bench_provider_stall(shared: Shared, work: Path) -> Metrics:
    """Ingest latency through the daemon, idle and while 8 provider calls hang.

    The daemon's LLM and embeddings endpoint is a loopback server that holds every
    request. Four ``expand_query`` (waiting on the LLM) and four semantic ``grep``
    (waiting on the embedder) are sent from threads and left hanging; then
    one-message ingests into another session are timed one after another.
    """
    params = _provider_stall_params(shared.settings)
    provider = _BlockingProvider()
    args = [
        "--llm-base-url", provider.base_url,
        "--llm-model", "stalled",
        "--embedder", "openai",
        "--embed-base-url", provider.base_url,
        "--embed-model", "stalled",
        "--embed-dim", "32",
        "--provider-deadline-s", "600",
        "--auto-compact", "false",
    ]  # fmt: skip
    history = [
        {"id": f"h{i}", "role": "user", "content": f"the deploy of service {i} failed"}
        for i in range(20)
    ]
    hanging: list[threading.Thread] = []
    try:
        with client_daemon(work / "stall.db", work / "daemon.log", args) as client:
            client.call("ingest", {"session": "s", "messages": history})

            def timed_ingests(prefix: str, count: int) -> list[int]:
                out = []
                for i in range(params["warmup"] + count):
                    message = {"id": f"{prefix}{i}", "role": "user", "content": f"turn {i}"}
                    t0 = time.perf_counter_ns()
                    client.call("ingest", {"session": "other", "message": message})
                    if i >= params["warmup"]:
                        out.append(time.perf_counter_ns() - t0)
                return out

            idle = timed_ingests("idle", params["ingests"])
            held_before = provider.held  # the background embedder's own call
            calls: list[tuple[str, dict[str, Any]]] = []
            for _ in range(params["hanging"] // 2):
                calls.append(("expand_query", {"prompt": "why?", "query": "deploy", "all": True}))
                calls.append(("grep", {"query": "deploy", "mode": "semantic", "all": True}))
            for method, call_params in calls:

                def hang(method: str = method, call_params: dict[str, Any] = call_params) -> None:
                    with contextlib.suppress(Exception):
                        client.call(method, call_params, timeout=CALL_TIMEOUT_S)

                thread = threading.Thread(target=hang, daemon=True)
                thread.start()
                hanging.append(thread)
            give_up = time.monotonic() + CALL_TIMEOUT_S
            reached = held_before + len(calls)
            while provider.held < reached and time.monotonic() < give_up:
                time.sleep(0.01)
            stalled = timed_ingests("stall", params["ingests"])
            hanging_during = provider.held - held_before  # none answered: not released yet
            provider.released.set()
            for thread in hanging:
                thread.join(CALL_TIMEOUT_S)
    finally:
        provider.close()
    return {
        **latency_metrics(idle, "idle_"),
        **latency_metrics(stalled, "stalled_"),
        "provider_calls_hanging": float(hanging_during),
    }


# -- registry, targets, report ----------------------------------------------------------


# -- replay: compaction following the host's budget ------------------------------------------

REPLAY_TURNS: Final = 681
REPLAY_BUDGET: Final = 4_000
REPLAY_EVERY: Final = 20  # assemble every this many turns
REPLAY_FROM: Final = 100  # coverage counted from this turn on
REPLAY_POLL_S: Final = 0.005
LOCOMO_DEFAULT: Final = Path("shared") / "data" / "locomo" / "locomo_dev.json"
_REPLAY_SUMMARY = re.compile(r'<summary id="(sum_[0-9a-f]{16})"')
_REPLAY_TEXT: Final = (
    "I really love how the kids reacted when we went camping by the lake last weekend and "
    "my friend from the support group said painting helps her relax after a long day at work "
    "we talked about adoption agencies counseling school the new job the beach sunsets pottery "
    "class guitar lessons running a charity race volunteering at the shelter my grandmother's "
    "recipes the concert downtown road trip to the mountains reading that novel again our dog "
    "learning to swim a surprise party for my sister planning the garden this spring"
)
_REPLAY_WORDS: Final = _REPLAY_TEXT.split()


def locomo_path(given: str | None) -> Path | None:
    """``--locomo``, else ``../shared/data/locomo/locomo_dev.json`` beside the checkout or the
    working directory, when it exists."""
    if given:
        return Path(given)
    for base in (Path(__file__).resolve().parents[1].parent, Path.cwd().parent):
        if (base / LOCOMO_DEFAULT).is_file():
            return base / LOCOMO_DEFAULT
    return None


def synthetic_locomo(turns: int, seed: int) -> list[Message]:
    """A LoCoMo-like conversation: two named speakers in dated sessions of 12-40 turns,
    15-60 words a turn (the same shape ``tests/e2e/test_compaction_follows.py`` replays)."""
    rng = random.Random(seed)
    speakers = (("user", "Caroline"), ("assistant", "Melanie"))
    day = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    moment = day
    left = 0
    out: list[Message] = []
    for n in range(turns):
        if left == 0:
            day += timedelta(days=rng.randint(3, 20))
            moment, left = day, rng.randint(12, 40)
        left -= 1
        moment += timedelta(seconds=rng.randint(20, 90))
        role, name = speakers[n % 2]
        words = [rng.choice(_REPLAY_WORDS) for _ in range(rng.randint(15, 60))]
        out.append(
            {
                "id": f"D{n + 1}",
                "role": role,
                "name": name,
                "content": " ".join(words).capitalize() + rng.choice(".!?"),
                "created_at": moment.isoformat().replace("+00:00", "Z"),
            }
        )
    return out


def real_locomo(path: Path) -> list[Message]:
    """The first conversation of a LoCoMo file, mapped as ``scripts/eval_locomo.py`` does."""
    spec = importlib.util.spec_from_file_location(
        "eval_locomo", Path(__file__).with_name("eval_locomo.py")
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("eval_locomo", module)
    spec.loader.exec_module(module)
    samples = orjson.loads(path.read_bytes())
    messages: list[Message] = module.messages_of(samples[0])[0]
    return messages


SUMMARIZE_CHUNKS: Final = ((2_000, 500), (20_000, 1_200))  # (leaf chunk, leaf target) tokens
SUMMARIZE_REPEATS: Final = 3


def _summarizers_params(s: Settings) -> dict[str, Any]:
    return {
        "conversation": str(s.locomo) if s.locomo else "synthetic LoCoMo-like, 600 turns",
        "chunks": [{"leaf_chunk_tokens": c, "target_tokens": t} for c, t in SUMMARIZE_CHUNKS],
        "summarizers": "brain.lcm.offline: default (FactSummarizer), extractive_v1",
        "repeats": SUMMARIZE_REPEATS,
        "note": "in-process, one thread; messages/s is the median over repeats",
    }


def bench_summarizers(shared: Shared, work: Path) -> Metrics:
    """Messages summarised per second by each offline summarizer, leaf chunks as compaction
    makes them (at a budget-following 2k chunk and at the default 20k chunk)."""
    from brain import SourceItem, SummaryRequest, estimate_tokens, offline_summarizer

    locomo = shared.settings.locomo
    messages = real_locomo(locomo) if locomo else synthetic_locomo(600, SEED + 40)
    items = [
        SourceItem(str(m["id"]), m["role"], m["content"], m["created_at"], name=m.get("name"))
        for m in messages
    ]
    out: Metrics = {"messages": float(len(items))}
    for chunk_tokens, target in SUMMARIZE_CHUNKS:
        chunks: list[list[SourceItem]] = [[]]
        size = 0
        for item in items:
            cost = estimate_tokens(item.text)
            if chunks[-1] and size + cost > chunk_tokens:
                chunks.append([])
                size = 0
            chunks[-1].append(item)
            size += cost
        requests = [SummaryRequest("leaf", 0, tuple(c), target) for c in chunks]
        for name in ("default", "extractive_v1"):
            summarizer = offline_summarizer(name)
            times = []
            for _ in range(SUMMARIZE_REPEATS):
                started = time.perf_counter()
                for request in requests:
                    summarizer.summarize(request)
                times.append(time.perf_counter() - started)
            out[f"chunk_{chunk_tokens}.{name}_messages_per_s"] = len(items) / statistics.median(
                times
            )
    return out


def _replay_settle(client: Client) -> tuple[float, int]:
    """Wait until no background compaction is running or waiting: (seconds, completed)."""
    started = time.perf_counter()
    while True:
        state = client.call("info", timeout=CALL_TIMEOUT_S)["compaction"]
        if not state["active"]:
            return time.perf_counter() - started, int(state["completed"])
        time.sleep(REPLAY_POLL_S)


def _replay_missing(client: Client, out: dict[str, Any], texts: list[str]) -> int:
    """Messages of ``texts`` (all ingested so far) that the context neither shows raw nor
    covers with a summary it shows (each summary's span as ``describe`` reports it).
    Raw messages are matched by text as a multiset (real turns repeat, "Thanks!")."""
    spans: set[int] = set()
    shown: collections.Counter[str] = collections.Counter()
    for message in out["messages"]:
        content = message["content"]
        found = _REPLAY_SUMMARY.match(content) if isinstance(content, str) else None
        if found is None:
            shown[str(content)] += 1
            continue
        sources = client.call("describe", {"session": "s", "id": found.group(1)})["sources"]
        spans.update(range(sources["first_seq"], sources["last_seq"] + 1))
    need = collections.Counter(t for seq, t in enumerate(texts, start=1) if seq not in spans)
    return sum((need - shown).values())


def _replay_one(messages: list[Message], db: Path, log: Path, prefix: str) -> Metrics:
    """Replay turn by turn at human pace (each turn waits for the background work it
    started), assembling every ``REPLAY_EVERY`` turns at ``REPLAY_BUDGET``."""
    settles: list[int] = []  # ns, turns after which a compaction completed
    covered = checked = over = 0
    tokens: list[float] = []
    started = time.perf_counter()
    with client_daemon(db, log) as client:
        completed = 0
        texts: list[str] = []
        for turn, message in enumerate(messages, start=1):
            client.call("ingest", {"session": "s", "message": message}, timeout=CALL_TIMEOUT_S)
            texts.append(str(message["content"]))
            took, done = _replay_settle(client)
            if done > completed:
                settles.append(int(took * 1e9))
            completed = done
            if turn % REPLAY_EVERY:
                continue
            params = {"session": "s", "budget": REPLAY_BUDGET}
            out = client.call("assemble", params, timeout=CALL_TIMEOUT_S)
            over += out["tokens"] > REPLAY_BUDGET or bool(out["over_budget"])
            if turn >= REPLAY_FROM:
                checked += 1
                covered += _replay_missing(client, out, texts) == 0
                tokens.append(float(out["tokens"]))
            # The assemble may start work too (a new budget): let it settle like a turn.
            took, done = _replay_settle(client)
            if done > completed:
                settles.append(int(took * 1e9))
            completed = done
        summaries = client.call("info", timeout=CALL_TIMEOUT_S)["summaries"]
    ms = sorted(v / 1e6 for v in settles)
    return {
        f"{prefix}turns": float(len(messages)),
        f"{prefix}compacting_turns": float(len(settles)),
        f"{prefix}settle_p50_ms": percentile(ms, 50),
        f"{prefix}settle_p95_ms": percentile(ms, 95),
        f"{prefix}settle_max_ms": max(ms, default=math.nan),
        f"{prefix}covered_assembles": float(covered),
        f"{prefix}checked_assembles": float(checked),
        f"{prefix}over_budget_assembles": float(over),
        f"{prefix}tokens_p50": percentile(sorted(tokens), 50),
        f"{prefix}tokens_max": max(tokens, default=math.nan),
        f"{prefix}summaries": float(summaries),
        f"{prefix}replay_s": time.perf_counter() - started,
    }


def _replay_params(s: Settings) -> dict[str, Any]:
    return {
        "synthetic_turns": s.n(REPLAY_TURNS, REPLAY_FROM + REPLAY_EVERY),
        "locomo": str(s.locomo) if s.locomo else None,
        "budget": REPLAY_BUDGET,
        "assemble_every": REPLAY_EVERY,
        "coverage_from_turn": REPLAY_FROM,
        "pace": "each turn waits until info's compaction.active is 0 (a human-paced host)",
        "settle": "ms from a turn's (or assemble's) answer until the background work it "
        "started is done, over those that completed a compaction",
    }


def bench_replay(shared: Shared, work: Path) -> Metrics:
    """A LoCoMo-like replay through the daemon at budget 4,000: settle times, coverage."""
    settings = shared.settings
    turns = _replay_params(settings)["synthetic_turns"]
    out = _replay_one(
        synthetic_locomo(turns, SEED), work / "synthetic.db", work / "daemon.log", "synthetic."
    )
    if settings.locomo is not None:
        out.update(
            _replay_one(
                real_locomo(settings.locomo), work / "locomo.db", work / "daemon.log", "locomo."
            )
        )
    return out


# -- rollups: a new leaf's refresh against the history's length ---------------------------

ROLLUP_DAYS: Final = (30, 300)  # days of history, one session key
ROLLUP_MESSAGES_PER_DAY: Final = 12


def _rollups_params(s: Settings) -> dict[str, Any]:
    return {
        "days": [s.n(d, 3) for d in ROLLUP_DAYS],
        "messages_per_day": ROLLUP_MESSAGES_PER_DAY,
        "leaf_chunk_tokens": 1_000,
        "summarizer": "the offline default (brain.lcm.rollups.build.rollup_summarizer)",
    }


def _rollup_day(rng: random.Random, day: datetime, n: int) -> list[MessageIn]:
    return [
        MessageIn(
            "user" if i % 2 == 0 else "assistant",
            make_content(rng, 150, 500),
            client_id=f"{day:%Y%m%d}-{i}",
            created_at=(day + timedelta(minutes=7 * i)).isoformat(),
        )
        for i in range(n)
    ]


def bench_rollups(shared: Shared, work: Path) -> Metrics:
    """Refreshing the rollups after one new day of leaves, at 30 and 300 days of history
    (the refresh rebuilds only the new leaves' periods), and ``recent`` for a week."""
    out: Metrics = {}
    per_day = ROLLUP_MESSAGES_PER_DAY
    config = BrainConfig(
        compaction=replace(CompactionConfig(), auto=False, leaf_chunk_tokens=1_000)
    )
    for days in (shared.settings.n(d, 3) for d in ROLLUP_DAYS):
        db = work / f"rollups-{days}.db"
        rng = random.Random(days)
        start = datetime(2026, 1, 5, 9, tzinfo=UTC)
        brain = Brain(db, config)
        try:
            print(f"  rollups: building {days} days", file=sys.stderr)
            for d in range(days):
                brain.ingest(
                    "s", _rollup_day(rng, start + timedelta(days=d), per_day), session_key="k"
                )
            brain.compact("s")
            t0 = time.perf_counter()
            full = brain.refresh_rollups()
            full_s = time.perf_counter() - t0
            last = start + timedelta(days=days)
            brain.ingest("s", _rollup_day(rng, last, per_day), session_key="k")
            brain.compact("s")
            t0 = time.perf_counter()
            new = brain.refresh_rollups()
            new_ms = (time.perf_counter() - t0) * 1000
            recent_ms = []
            items = 0
            for _ in range(20):
                t0 = time.perf_counter()
                week = brain.recent(session_key="k", period="week", before=last.isoformat())
                recent_ms.append((time.perf_counter() - t0) * 1000)
                items = len(week["items"])
            rollups = brain.store.scalar("SELECT count(*) FROM rollups")
        finally:
            brain.close()
        key = f"days_{days}."
        out.update(
            {
                f"{key}rollups": float(rollups or 0),
                f"{key}full_refresh_s": full_s,
                f"{key}full_refresh_leaves": float(full.leaves),
                f"{key}new_day_refresh_ms": new_ms,
                f"{key}new_day_leaves": float(new.leaves),
                f"{key}new_day_rebuilt": float(len(new.rebuilt)),
                f"{key}recent_week_p50_ms": statistics.median(recent_ms),
                f"{key}recent_week_items": float(items),
            }
        )
        _remove_db(db)
    return out


# -- retention: a pass through the daemon, the file before and after -----------------------

RETENTION_MESSAGES: Final = 20_000  # half of them 90 days old, in 4 sessions
RETENTION_BATCH: Final = 500


def _retention_params(s: Settings) -> dict[str, Any]:
    return {
        "messages": s.n(RETENTION_MESSAGES, 2 * RETENTION_BATCH),
        "old_share": 0.5,
        "sessions": 4,
        "embedder": "hash (256 dims)",
        "limits": "retention_max_age_days 30, retention_max_bytes 60% of the used bytes",
        "reads": "full_text grep and one-message ingest, back to back, during and after the pass",
    }


def _retention_messages(tag: str, n: int, days_ago: float) -> list[dict[str, Any]]:
    at = (datetime.now(UTC) - timedelta(days=days_ago)).isoformat(timespec="milliseconds")
    return [
        {
            "id": f"{tag}-{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"{tag} note {i} " + " ".join(f"w{(i * 7 + k) % 5000}" for k in range(40)),
            "created_at": at.replace("+00:00", "Z"),
        }
        for i in range(n)
    ]


def bench_retention(shared: Shared, work: Path) -> Metrics:
    """A retention pass through the daemon: bytes before and after, the pass's time, and
    request latency while the background worker runs it (against the same requests after),
    plus the one VACUUM that switches a pre-v19 database to incremental vacuum."""
    params = _retention_params(shared.settings)
    total = params["messages"]
    db = work / "retention.db"
    log = work / "retention.log"
    hashed = ["--embedder", "hash"]
    with client_daemon(db, log, hashed) as client:
        for b in range(total // RETENTION_BATCH):
            old = b < total // RETENTION_BATCH // 2
            client.call(
                "ingest",
                {
                    "session": f"s{b % 4}",
                    "messages": _retention_messages(f"b{b}", RETENTION_BATCH, 90 if old else 0),
                },
                timeout=CALL_TIMEOUT_S,
            )
        deadline = time.monotonic() + 1800
        while client.call("info")["embeddings"]["pending"]:
            if time.monotonic() > deadline:
                raise RuntimeError("retention bench: embedding never finished")
            time.sleep(0.2)
        used_before = int(client.call("info")["db_bytes"])
        client.call("save")
    file_before = db.stat().st_size
    # The pre-v19 switch: a copy made without a page map, then doctor's VACUUM.
    old_db = work / "retention-old.db"
    shutil.copy(db, old_db)
    conn = apsw.Connection(str(old_db))
    conn.execute("PRAGMA auto_vacuum = NONE")
    conn.execute("VACUUM")
    conn.close()
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "brain"), "doctor", "--db", str(old_db), "--repair"],
        capture_output=True,
        env=child_env(),
        check=False,
    )
    switch_s = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"retention bench: doctor --repair failed: {done.stdout!r}")
    _remove_db(old_db)

    limit = int(used_before * 0.6)
    args = [*hashed, "--retention-max-age-days", "30", "--retention-max-bytes", str(limit)]
    samples: list[tuple[float, str, float]] = []  # (sent at, method, ms)
    stop = threading.Event()
    with client_daemon(db, log, args) as client:

        def load() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                for method, call_params in (
                    ("grep", {"query": f"w{n % 5000}", "session": "s1", "limit": 10}),
                    (
                        "ingest",
                        {"session": "live", "message": _retention_messages(f"l{n}", 1, 0)[0]},
                    ),
                ):
                    sent = time.time()
                    t = time.perf_counter()
                    client.call(method, call_params, timeout=CALL_TIMEOUT_S)
                    samples.append((sent, method, (time.perf_counter() - t) * 1000))

        reader = threading.Thread(target=load)
        reader.start()
        try:
            deadline = time.monotonic() + 1800
            while True:
                info = client.call("info")
                if info["retention"]["passes"] >= 1:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("retention bench: no pass ran")
                time.sleep(0.05)
            ended = time.time()
            started = datetime.fromisoformat(
                info["retention"]["last_pass_at"].replace("Z", "+00:00")
            ).timestamp()
            time.sleep(max(3.0, ended - started))  # the same requests after the pass
        finally:
            stop.set()
            reader.join()
        client.call("save")
        info = client.call("info")
    file_after = db.stat().st_size
    out: Metrics = {
        "messages": float(total),
        "file_bytes_before": float(file_before),
        "file_bytes_after": float(file_after),
        "used_bytes_before": float(used_before),
        "max_bytes": float(limit),
        "vectors_dropped": float(info["retention"]["vectors_dropped"]),
        "bytes_reclaimed": float(info["retention"]["bytes_reclaimed"]),
        "messages_after": float(info["messages"]),
        "pass_s": ended - started,
        "vacuum_switch_s": switch_s,
    }
    for method in ("grep", "ingest"):
        during = [ms for at, m, ms in samples if m == method and started <= at <= ended]
        after = [ms for at, m, ms in samples if m == method and at > ended]
        for label, values in (("during", during), ("after", after)):
            if values:
                ordered = sorted(values)
                out[f"{method}_{label}_p50_ms"] = statistics.median(ordered)
                out[f"{method}_{label}_p95_ms"] = ordered[
                    min(len(ordered) - 1, int(len(ordered) * 0.95))
                ]
                out[f"{method}_{label}_max_ms"] = ordered[-1]
                out[f"{method}_{label}_n"] = float(len(ordered))
    _remove_db(db)
    return out


# -- peers: openclawbrain side by side, through both daemons -----------------------------

PEER_PACKAGE: Final = "openclawbrain"
PEER_VERSION: Final = "12.2.6"
PEER_QUERIES: Final = 20  # timed queries per size, each answered by both daemons
PEER_WRITES: Final = 8  # timed teach/inject and learn requests per size
PEER_WORDS: Final = (60, 80)  # words per node (~70)
PEER_TASKS: Final = ("health", "decay", "merge", "prune")  # maintain tasks both implement
# Edge tiers (share of edges, weight range): the graph a learning memory grows into.
PEER_TIERS: Final = (
    ("strong", 0.25, 0.6, 0.95),
    ("medium", 0.35, 0.2, 0.5),
    ("weak", 0.3, 0.02, 0.15),
    ("negative", 0.1, -0.8, -0.3),
)


class BenchSkipped(Exception):
    """A benchmark that cannot run here (its message says why); reported, not an error."""


@dataclass(frozen=True)
class PeerGraph:
    """One synthetic graph both systems load: node texts and weighted edges by index."""

    texts: list[str]
    edges: list[tuple[int, int, float, str]]  # (source, target, weight, tier)
    queries: list[str]


def peer_graph(nodes: int, queries: int, seed: int) -> PeerGraph:
    """``nodes`` texts of ~70 words, ~2.2 out-edges each over the four tiers, and queries.

    Each node gets 2 edges, and a fifth of them a third, to distinct random targets.
    A query is 4-8 words of a random node's text, as a question about a note.
    """
    rng = random.Random(seed)
    tail = [_pseudo_word(i) for i in range(5_000)]
    texts: list[str] = []
    for _ in range(nodes):
        words = [
            rng.choice(tail) if rng.random() < 0.3 else rng.choice(_WORDS)
            for _ in range(rng.randint(*PEER_WORDS))
        ]
        text = " ".join(words)
        texts.append(text[0].upper() + text[1:] + ".")
    cumulative = list(itertools.accumulate(share for _, share, _, _ in PEER_TIERS))
    edges: list[tuple[int, int, float, str]] = []
    for source in range(nodes):
        degree = 3 if rng.random() < 0.2 else 2
        targets: list[int] = []  # distinct, drawn one by one: O(degree), not O(nodes)
        while nodes > 3 and len(targets) < degree:
            target = rng.randrange(nodes)
            if target != source and target not in targets:
                targets.append(target)
        for target in targets:
            tier = PEER_TIERS[min(len(PEER_TIERS) - 1, bisect_left(cumulative, rng.random()))]
            edges.append((source, target, round(rng.uniform(tier[2], tier[3]), 4), tier[0]))
    asked: list[str] = []
    for _ in range(queries):
        words = texts[rng.randrange(nodes)].rstrip(".").split()
        asked.append(" ".join(rng.sample(words, rng.randint(4, 8))).lower())
    return PeerGraph(texts, edges, asked)


def peer_figure(ours: float, peer: float) -> dict[str, float]:
    """One side-by-side figure: ``speedup`` is peer / ours (above 1: brain is faster)."""
    return {"ours": ours, "peer": peer, "speedup": peer / ours if ours > 0 else math.nan}


def peer_cache_dir() -> Path:
    """Where the peer's virtualenv is kept between runs (``BRAIN_BENCH_CACHE`` overrides)."""
    base = os.environ.get("BRAIN_BENCH_CACHE") or Path.home() / ".cache" / "brain-bench"
    return Path(base) / f"{PEER_PACKAGE}-{PEER_VERSION}"


def peer_python(cache: Path) -> Path:
    """The peer's interpreter, installing ``openclawbrain==12.2.6`` from PyPI on first use.

    Raises ``BenchSkipped`` with pip's last words when it cannot be installed (no
    network, no index, no ``venv`` module): the comparison is skipped, not failed.
    """
    python = cache / "bin" / "python"
    check = [
        str(python),
        "-c",
        f"import importlib.metadata as m, {PEER_PACKAGE}.daemon; "
        f"print(m.version({PEER_PACKAGE!r}))",
    ]
    if python.exists():
        done = subprocess.run(check, check=False, capture_output=True, text=True, timeout=120)
        if done.returncode == 0 and done.stdout.strip() == PEER_VERSION:
            return python
    print(f"  peers: installing {PEER_PACKAGE}=={PEER_VERSION} into {cache}", file=sys.stderr)
    shutil.rmtree(cache, ignore_errors=True)
    steps = (
        [sys.executable, "-m", "venv", str(cache)],
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            f"{PEER_PACKAGE}=={PEER_VERSION}",
        ],
        check,
    )
    for step in steps:
        try:
            done = subprocess.run(step, check=False, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BenchSkipped(
                f"{PEER_PACKAGE}=={PEER_VERSION} could not be installed: {exc}"
            ) from exc
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise BenchSkipped(
                f"{PEER_PACKAGE}=={PEER_VERSION} could not be installed "
                f"({' '.join(step[:3])} exited {done.returncode}): {' | '.join(why)}"
            )
    return python


# Run by the peer's interpreter: its own hash embedder (1024 dims) and its own store,
# so the state file is exactly what openclawbrain writes.
_PEER_BUILD: Final = """
import json, sys
from openclawbrain.graph import Edge, Graph, Node
from openclawbrain.hasher import HashEmbedder
from openclawbrain.index import VectorIndex
from openclawbrain.store import save_state
spec = json.load(open(sys.argv[1]))
graph, index, embed = Graph(), VectorIndex(), HashEmbedder().embed
for i, text in enumerate(spec["texts"]):
    graph.add_node(Node(id=f"n{i}", content=text))
    index.upsert(f"n{i}", embed(text))
for s, t, w, tier in spec["edges"]:
    graph.add_edge(Edge(source=f"n{s}", target=f"n{t}", weight=w, metadata={"tier": tier}))
save_state(graph=graph, index=index, path=sys.argv[2])
"""


def _build_peer_state(python: Path, graph: PeerGraph, state: Path) -> None:
    spec = state.parent / "graph.json"
    spec.write_bytes(orjson.dumps({"texts": graph.texts, "edges": graph.edges}))
    subprocess.run(
        [str(python), "-c", _PEER_BUILD, str(spec), str(state)],
        check=True,
        env=_peer_env(),
        timeout=3_600,
    )


def _build_ours(db: Path, graph: PeerGraph) -> None:
    """The same nodes and edges in a brain database, every node embedded (hash, 256)."""
    from brain import HashEmbedder, NewNode, insert_node

    brain = Brain(db, BrainConfig(compaction=CompactionConfig(auto=False)), embedder=HashEmbedder())
    try:
        store = brain.store
        with store.transaction():
            rows = [insert_node(store, NewNode("teaching", t))[0] for t in graph.texts]
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            store.executemany(
                "INSERT INTO edges (source, target, weight, kind, updated_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (rows[s], rows[t], w, "inhibits" if w < 0 else "learned", stamp)
                    for s, t, w, _ in graph.edges
                ],
            )
        while brain.embed_pending(batch=4_096):
            pass
        brain.save()
    finally:
        brain.close()


def _peer_env() -> dict[str, str]:
    # Without OPENAI_API_KEY the peer embeds with its hash embedder, as brain with ``hash``.
    env = child_env()
    env.pop("OPENAI_API_KEY", None)
    return env


class StdioDaemon:
    """A newline-delimited JSON daemon on pipes, driven one request at a time."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str], cwd: Path) -> None:
        self.started = time.perf_counter()
        with log.open("ab") as err:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                cwd=cwd,
                bufsize=0,
            )
        _track(self.proc)
        self.log = log
        self._buffer = b""
        self._next = 0

    def call(self, method: str, params: dict[str, Any] | None = None) -> tuple[float, Any]:
        """(round trip ms, result) of one request; RuntimeError on an error answer."""
        import select

        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self._next += 1
        line = orjson.dumps({"id": self._next, "method": method, "params": params or {}}) + b"\n"
        t0 = time.perf_counter_ns()
        self.proc.stdin.write(line)
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], CALL_TIMEOUT_S)
            chunk = os.read(fd, 1 << 20) if ready else b""
            if not chunk:
                raise RuntimeError(f"{method}: no answer; log tail:\n{log_tail(self.log)}")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\n")
        ms = (time.perf_counter_ns() - t0) / 1e6
        answer = orjson.loads(raw)
        if answer.get("error") is not None:
            raise RuntimeError(f"{method}: {answer['error']}")
        return ms, answer.get("result")

    def rss_mb(self) -> tuple[float, float]:
        """(current, peak) resident memory in MB."""
        fields = dict(
            line.split(":", 1)
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines()
        )
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024

    def close(self) -> None:
        stop_process(self.proc)
        _untrack(self.proc)


def _peer_sizes(s: Settings) -> list[int]:
    return [max(50, round(n * s.size)) for n in s.peer_nodes]


def _peers_params(s: Settings) -> dict[str, Any]:
    return {
        "peer": f"{PEER_PACKAGE}=={PEER_VERSION} (PyPI), `python -m openclawbrain.daemon "
        "--state state.json` in a virtualenv under ~/.cache/brain-bench (BRAIN_BENCH_CACHE)",
        "ours": "python -m daemon --db DB --embedder hash",
        "nodes": _peer_sizes(s),
        "graph": f"{PEER_WORDS[0]}-{PEER_WORDS[1]} words per node, 2.2 out-edges per node: "
        + ", ".join(f"{share:.0%} {name} ({lo:g}..{hi:g})" for name, share, lo, hi in PEER_TIERS),
        "embeddings": "each system's hash embedder (brain: 256 dims, openclawbrain: 1024 dims)",
        "order": "interleaved: each request goes to brain, then the same to openclawbrain",
        "query": f"{PEER_QUERIES} queries of 4-8 words of a node, each with a chat_id "
        "(both record what fired), default options",
        "writes": f"{PEER_WRITES} teach (ours) / inject TEACHING (peer), {PEER_WRITES} learn "
        "(after an untimed query: ours by chat_id, peer with its fired_nodes), outcome +-1",
        "save": "save after one more teach/inject",
        "maintain": f"tasks {', '.join(PEER_TASKS)} (the peer's default set) after the save",
        "startup": "spawn to the first info answer",
        "rss": "VmHWM (peak resident) of each daemon at the end",
        "speedup": "peer / ours (above 1: brain is faster)",
        "note": "one run (--runs ignored); sizes via --peer-nodes (default 1000,5000)",
    }


def _peer_round(size: int, python: Path, work: Path) -> Metrics:
    """Both daemons on the same graph of ``size`` nodes, every request interleaved."""
    graph = peer_graph(size, PEER_QUERIES + PEER_WRITES + 1, SEED + 70 + size)
    teach = [t.lower() for t in peer_graph(PEER_WRITES + 1, 0, SEED + 71).texts]
    here = work / f"nodes-{size}"
    (here / "ours").mkdir(parents=True)
    (here / "peer").mkdir(parents=True)
    db, state = here / "ours" / "graph.db", here / "peer" / "state.json"
    print(f"  peers: building {size} nodes for both", file=sys.stderr)
    _build_ours(db, graph)
    _build_peer_state(python, graph, state)

    key = f"{PEER_PACKAGE}.nodes_{size}."
    out: Metrics = {}
    figures: dict[str, tuple[list[float], list[float]]] = {}

    def record(name: str, ours: float, peer: float) -> None:
        pair = figures.setdefault(name, ([], []))
        pair[0].append(ours)
        pair[1].append(peer)

    ours = StdioDaemon(
        daemon_command(db, ["--embedder", "hash"]), here / "ours.log", child_env(), here / "ours"
    )
    peer: StdioDaemon | None = None
    try:
        _, ours_info = ours.call("info")
        ours_start = (time.perf_counter() - ours.started) * 1e3
        peer = StdioDaemon(
            [str(python), "-m", f"{PEER_PACKAGE}.daemon", "--state", str(state)],
            here / "peer.log",
            _peer_env(),
            here / "peer",
        )
        _, peer_info = peer.call("info")
        # What each side loaded, and fired below: a check that both answer the same graph.
        for side, info in (("ours", ours_info), ("peer", peer_info)):
            out[f"{key}loaded.nodes_{side}"] = float(info["nodes"])
            out[f"{key}loaded.edges_{side}"] = float(info["edges"])
        record("startup_ms", ours_start, (time.perf_counter() - peer.started) * 1e3)

        def both(
            ours_req: tuple[str, dict[str, Any]],
            peer_req: tuple[str, dict[str, Any]],
            name: str | None,
        ) -> tuple[Any, Any]:
            assert peer is not None
            a_ms, a = ours.call(*ours_req)
            b_ms, b = peer.call(*peer_req)
            if name:
                record(name, a_ms, b_ms)
            return a, b

        q = graph.queries
        first = ("query", {"query": q[-1], "chat_id": "cold"})
        both(first, first, "query_first_ms")
        fired: tuple[list[int], list[int]] = ([], [])
        for i, text in enumerate(q[:PEER_QUERIES]):
            req = ("query", {"query": text, "chat_id": f"q{i}"})
            a, b = both(req, req, "query")
            fired[0].append(len(a["fired_nodes"]))
            fired[1].append(len(b["fired_nodes"]))
        out[f"{key}loaded.fired_mean_ours"] = statistics.fmean(fired[0])
        out[f"{key}loaded.fired_mean_peer"] = statistics.fmean(fired[1])
        for i in range(PEER_WRITES):
            both(
                ("teach", {"content": teach[i]}),
                ("inject", {"id": f"t{i}", "content": teach[i], "type": "TEACHING"}),
                "teach",
            )
        for i in range(PEER_WRITES):
            req = ("query", {"query": q[PEER_QUERIES + i], "chat_id": f"l{i}"})
            _, traced = both(req, req, None)
            outcome = 1.0 if i % 2 == 0 else -1.0
            both(
                ("learn", {"outcome": outcome, "chat_id": f"l{i}"}),
                ("learn", {"fired_nodes": traced["fired_nodes"], "outcome": outcome}),
                "learn",
            )
        both(
            ("teach", {"content": teach[-1]}),
            ("inject", {"id": "t-last", "content": teach[-1], "type": "TEACHING"}),
            None,
        )
        both(("save", {}), ("save", {}), "save_ms")
        tasks = {"tasks": list(PEER_TASKS)}
        both(("maintain", tasks), ("maintain", tasks), "maintain_ms")
        both(("info", {}), ("info", {}), "info_ms")
        record("rss_peak_mb", ours.rss_mb()[1], peer.rss_mb()[1])
    finally:
        ours.close()
        if peer is not None:
            peer.close()
    for name, (a, b) in figures.items():
        if name in ("query", "teach", "learn"):
            for pct in (50, 95):
                ours_v, peer_v = percentile(sorted(a), pct), percentile(sorted(b), pct)
                for part, v in peer_figure(ours_v, peer_v).items():
                    out[f"{key}{name}_p{pct}_ms.{part}"] = v
        else:
            for part, v in peer_figure(a[0], b[0]).items():
                out[f"{key}{name}.{part}"] = v
    shutil.rmtree(here, ignore_errors=True)
    return out


def bench_peers(shared: Shared, work: Path) -> Metrics:
    """brain and openclawbrain side by side through their stdio daemons, at each size."""
    python = peer_python(peer_cache_dir())
    out: Metrics = {}
    for size in _peer_sizes(shared.settings):
        out.update(_peer_round(size, python, work))
    return out


# -- graph_daemon: graph query round trips through our daemon alone ----------------------

GRAPH_DAEMON_QUERIES: Final = 40  # distinct queries, each asked once per round
GRAPH_DAEMON_ROUNDS: Final = 3  # rounds of them (new chat ids each round)
GRAPH_DAEMON_WRITES: Final = 20  # timed learn (by chat id) and teach requests


def _graph_daemon_sizes(s: Settings) -> list[int]:
    return [max(50, round(n * s.size)) for n in s.graph_daemon_nodes]


def _graph_daemon_params(s: Settings) -> dict[str, Any]:
    return {
        "ours": "python -m daemon --db DB --embedder hash (one BLAS thread: daemon.blas)",
        "nodes": _graph_daemon_sizes(s),
        "graph": "the peers benchmark's graph (peer_graph): ~70 words per node, 2.2 out-edges",
        "query": f"{GRAPH_DAEMON_ROUNDS} rounds of {GRAPH_DAEMON_QUERIES} queries of 4-8 words "
        "of a node, each with a chat_id (its trace recorded), default options, after one "
        "untimed first query (query_first_ms)",
        "writes": f"{GRAPH_DAEMON_WRITES} learn by chat_id (outcome +-1, durable) and "
        f"{GRAPH_DAEMON_WRITES} teach",
        "traverse_p50_ms": "the daemon's own traverse_ms (seeds + traversal), for the split",
        "note": "one run (--runs ignored); sizes via --graph-daemon-nodes; only with --only",
    }


def bench_graph_daemon(shared: Shared, work: Path) -> Metrics:
    """Graph query, learn and teach round trips through one daemon at each size."""
    out: Metrics = {}
    for size in _graph_daemon_sizes(shared.settings):
        graph = peer_graph(size, GRAPH_DAEMON_QUERIES + 1, SEED + 70 + size)
        teach = [t.lower() for t in peer_graph(GRAPH_DAEMON_WRITES, 0, SEED + 72).texts]
        here = work / f"nodes-{size}"
        here.mkdir()
        db = here / "graph.db"
        print(f"  graph_daemon: building {size} nodes", file=sys.stderr)
        _build_ours(db, graph)
        daemon = StdioDaemon(
            daemon_command(db, ["--embedder", "hash"]), here / "daemon.log", child_env(), here
        )
        key = f"nodes_{size}."
        try:
            daemon.call("info")
            out[f"{key}startup_ms"] = (time.perf_counter() - daemon.started) * 1e3
            first, _ = daemon.call("query", {"query": graph.queries[-1], "chat_id": "first"})
            out[f"{key}query_first_ms"] = first
            rounds: list[float] = []
            traverse: list[float] = []
            for r in range(GRAPH_DAEMON_ROUNDS):
                for i, text in enumerate(graph.queries[:GRAPH_DAEMON_QUERIES]):
                    ms, answer = daemon.call("query", {"query": text, "chat_id": f"r{r}q{i}"})
                    rounds.append(ms)
                    traverse.append(float(answer["traverse_ms"]))
            learn = [
                daemon.call("learn", {"outcome": 1.0 if i % 2 else -1.0, "chat_id": f"r0q{i}"})[0]
                for i in range(GRAPH_DAEMON_WRITES)
            ]
            taught = [daemon.call("teach", {"content": text})[0] for text in teach]
            out[f"{key}rss_peak_mb"] = daemon.rss_mb()[1]
        finally:
            daemon.close()
        rounds.sort()
        p50, p95 = percentile(rounds, 50), percentile(rounds, 95)
        out[f"{key}query_p50_ms"] = p50
        out[f"{key}query_p95_ms"] = p95
        out[f"{key}query_p95_over_p50"] = p95 / p50 if p50 > 0 else math.nan
        out[f"{key}traverse_p50_ms"] = statistics.median(traverse)
        out[f"{key}learn_p50_ms"] = statistics.median(learn)
        out[f"{key}teach_p50_ms"] = statistics.median(taught)
        shutil.rmtree(here, ignore_errors=True)
    return out


# -- a million messages through the daemon ---------------------------------------------

MILLION_MESSAGES: Final = 1_000_000
MILLION_CONVERSATIONS: Final = 2_000
MILLION_BIG: Final = 4  # conversations of MILLION_BIG_MESSAGES, the rest share what is left
MILLION_BIG_MESSAGES: Final = 50_000
MILLION_BATCH: Final = 500
MILLION_QUERIES: Final = 30  # timed requests per figure, after one warm-up
MILLION_POLL_BATCHES: Final = 20  # an ``info`` (embedding progress) every this many batches
MILLION_DRAIN_TIMEOUT_S: Final = 3_600.0


def _million_sizes(s: Settings) -> tuple[int, int, int]:
    """(messages, conversations, messages of each of the four big conversations)."""
    return (
        s.n(MILLION_MESSAGES, 10_000),
        s.n(MILLION_CONVERSATIONS, 20),
        s.n(MILLION_BIG_MESSAGES, 1_000),
    )


def _million_params(s: Settings) -> dict[str, Any]:
    total, convs, big = _million_sizes(s)
    return {
        "messages": total,
        "conversations": convs,
        "big_conversations": f"{MILLION_BIG} of {big} messages (big-0 .. big-3)",
        "batch": MILLION_BATCH,
        "interleaving": "ingest batches of the big conversations spread evenly between the "
        "other conversations' batches, so their message ids interleave over the whole range",
        "content": "20-100 words (~400 chars), common words plus a 40k-word Zipf long tail",
        "daemon": "default settings: StaticEmbedder, background embedding, auto-compaction",
        "queries": MILLION_QUERIES,
        "db": s.million_db or "a temporary file (--million-db PATH builds once and reuses)",
        "note": "one run; only with --only; --size 0.1 is 100k messages (big sessions of 5k)",
    }


def _million_plan(total: int, convs: int, big: int) -> list[tuple[str, int]]:
    """The ingest batches as (session, message count), big sessions' batches interleaved."""
    big_batches = [
        (f"big-{b}", min(MILLION_BATCH, big - at))
        for at in range(0, big, MILLION_BATCH)
        for b in range(MILLION_BIG)
    ]
    small_convs = convs - MILLION_BIG
    rest = total - MILLION_BIG * big
    small: list[tuple[str, int]] = []
    for c in range(small_convs):
        count = rest // small_convs + (1 if c < rest % small_convs else 0)
        small += [
            (f"conv-{c}", min(MILLION_BATCH, count - at)) for at in range(0, count, MILLION_BATCH)
        ]
    # Merge the two lists evenly: the big sessions' batches land all along the id range.
    plan: list[tuple[str, int]] = []
    ratio = len(small) / max(1, len(big_batches))
    taken = 0
    for i, item in enumerate(big_batches):
        upto = round((i + 1) * ratio)
        plan += small[taken:upto]
        taken = upto
        plan.append(item)
    plan += small[taken:]
    return plan


class _TextStream:
    """``diverse_texts``-like chat turns of 20-100 words, generated batch by batch."""

    def __init__(self, seed: int) -> None:
        import numpy as np

        self._rng = np.random.default_rng(seed)
        self._tail = [_pseudo_word(i) for i in range(_RARE_VOCAB)]

    def take(self, count: int) -> list[str]:
        rng = self._rng
        lengths = rng.integers(20, 100, size=count)
        total = int(lengths.sum())
        common = rng.integers(0, len(_WORDS), size=total).tolist()
        rare = ((rng.zipf(1.15, size=total) - 1) % _RARE_VOCAB).tolist()
        use_rare = (rng.random(total) < 0.35).tolist()
        words = [
            self._tail[r] if u else _WORDS[c]
            for c, r, u in zip(common, rare, use_rare, strict=True)
        ]
        out: list[str] = []
        at = 0
        for n in lengths.tolist():
            text = " ".join(words[at : at + n])
            at += n
            out.append(text[0].upper() + text[1:] + ".")
        return out


def _embedding_state(client: Client) -> tuple[int, int]:
    """(vectors stored, rows waiting to be embedded) as ``info`` reports them."""
    info = client.call("info", timeout=CALL_TIMEOUT_S)
    return int(info["embeddings"]["stored"]), int(info["embeddings"]["pending"])


def _build_million(db: Path, log: Path, sizes: tuple[int, int, int]) -> Metrics:
    """Ingest the plan through a daemon and wait for the background embedder to finish."""
    total, convs, big = sizes
    plan = _million_plan(total, convs, big)
    texts = _TextStream(SEED + 90)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    seqs: dict[str, int] = collections.Counter()
    out: Metrics = {}
    with client_daemon(db, log) as client:
        pid = client.proc.pid
        t0 = time.perf_counter()
        n = 0
        for b, (session, count) in enumerate(plan):
            messages = []
            for text in texts.take(count):
                turn = seqs[session]
                seqs[session] += 1
                messages.append(
                    {
                        "role": "user" if turn % 2 == 0 else "assistant",
                        "content": text,
                        "id": f"{session}-m{turn}",
                        "created_at": (start + timedelta(seconds=n))
                        .isoformat()
                        .replace("+00:00", "Z"),
                    }
                )
                n += 1
            client.call(
                "ingest", {"session": session, "messages": messages}, timeout=CALL_TIMEOUT_S
            )
            if b % MILLION_POLL_BATCHES == MILLION_POLL_BATCHES - 1:
                stored, pending = _embedding_state(client)
                print(
                    f"  million: {n} ingested in {time.perf_counter() - t0:.0f} s, "
                    f"{stored} embedded, {pending} pending",
                    file=sys.stderr,
                )
        ingest_s = time.perf_counter() - t0
        stored_at_end, _ = _embedding_state(client)
        t1 = time.perf_counter()
        stored, pending = stored_at_end, 1
        while pending:
            if time.perf_counter() - t1 > MILLION_DRAIN_TIMEOUT_S:
                raise RuntimeError(f"embedding did not finish: {pending} pending")
            time.sleep(0.5)
            stored, pending = _embedding_state(client)
        drain_s = time.perf_counter() - t1
        out["build_rss_mb"] = _rss_mb(pid)
    out.update(
        {
            "ingest_msgs_per_s": total / ingest_s,
            "ingest_s": ingest_s,
            "embedded_during_ingest": float(stored_at_end),
            "embed_vectors_per_s_during_ingest": stored_at_end / ingest_s,
            "embed_lag_after_ingest_s": drain_s,
            "embed_vectors_per_s_after_ingest": (stored - stored_at_end) / drain_s
            if drain_s > 0
            else math.nan,
            "embed_vectors_per_s_overall": stored / (ingest_s + drain_s),
            "embedded_share_at_ingest_end": stored_at_end / max(1, stored),
            "vectors": float(stored),
        }
    )
    return out


def _timed_calls(client: Client, method: str, params: list[dict[str, Any]]) -> list[int]:
    """Nanoseconds of each call after one untimed warm-up with the first params."""
    client.call(method, params[0], timeout=CALL_TIMEOUT_S)
    ns: list[int] = []
    for p in params:
        t = time.perf_counter_ns()
        client.call(method, p, timeout=CALL_TIMEOUT_S)
        ns.append(time.perf_counter_ns() - t)
    return ns


def _million_reads(db: Path, log: Path) -> Metrics:
    """Start-up, grep per mode, expand_query, assemble and info on a built database."""
    out: Metrics = {}
    queries = _grep_queries(SEED + 91)[:MILLION_QUERIES]
    t0 = time.perf_counter()
    with client_daemon(db, log) as client:
        out["startup_first_ping_ms"] = (time.perf_counter() - t0) * 1000
        t = time.perf_counter()
        client.call("grep", {"query": "warm", "mode": "semantic", "all": True}, timeout=600)
        out["first_semantic_grep_ms"] = (time.perf_counter() - t) * 1000
        out["rss_after_vectors_load_mb"] = _rss_mb(client.proc.pid)
        scopes: dict[str, dict[str, Any]] = {"scoped": {"session": "big-0"}, "all": {"all": True}}
        for mode in ("full_text", "semantic", "hybrid", "regex"):
            for scope, where in scopes.items():
                if mode == "regex" and scope == "all":
                    continue  # a regex scan of every message is not an interactive read
                qs = [_regex_for(q) for q in queries] if mode == "regex" else queries
                ns = _timed_calls(client, "grep", [{"query": q, "mode": mode, **where} for q in qs])
                lat = latency_metrics(ns)
                out[f"grep_{mode}_{scope}_p50_ms"] = lat["p50_ms"]
                out[f"grep_{mode}_{scope}_p95_ms"] = lat["p95_ms"]
        for scope, where in scopes.items():
            ns = _timed_calls(
                client,
                "expand_query",
                [{"prompt": f"what was said about {q}?", "query": q, **where} for q in queries],
            )
            lat = latency_metrics(ns)
            out[f"expand_query_{scope}_p50_ms"] = lat["p50_ms"]
            out[f"expand_query_{scope}_p95_ms"] = lat["p95_ms"]
        for name, session in (("big", "big-0"), ("small", "conv-7")):
            ns = _timed_calls(
                client, "assemble", [{"session": session, "budget": 8_000}] * MILLION_QUERIES
            )
            lat = latency_metrics(ns)
            out[f"assemble_{name}_p50_ms"] = lat["p50_ms"]
            out[f"assemble_{name}_p95_ms"] = lat["p95_ms"]
        lat = latency_metrics(_timed_calls(client, "info", [{}] * MILLION_QUERIES))
        out["info_p50_ms"], out["info_p95_ms"] = lat["p50_ms"], lat["p95_ms"]
        out["rss_mb"] = _rss_mb(client.proc.pid)
        messages = int(client.call("info", timeout=CALL_TIMEOUT_S)["messages"])
    on_disk = file_bytes(db) + file_bytes(Path(f"{db}-wal"))
    out["db_bytes_per_message"] = on_disk / max(1, messages)
    return out


def bench_million(shared: Shared, work: Path) -> Metrics:
    """Build (or reuse) the million-message database through the daemon and time the reads."""
    s = shared.settings
    sizes = _million_sizes(s)
    db = Path(s.million_db) if s.million_db else work / "million.db"
    out: Metrics = {}
    if not db.exists():
        print(f"  million: building {sizes[0]} messages into {db}", file=sys.stderr)
        out.update(_build_million(db, work / "daemon.log", sizes))
    else:
        print(f"  million: reusing {db}", file=sys.stderr)
    out.update(_million_reads(db, work / "daemon.log"))
    return out


BENCHES: Final[tuple[Bench, ...]] = (
    Bench(
        "ingest_batched",
        "messages/s, batched ingest requests through the daemon subprocess",
        _ingest_params,
        bench_ingest_batched,
    ),
    Bench(
        "ingest_batched_engine",
        "messages/s, the same batches through brain.Brain.ingest in-process",
        _ingest_params,
        bench_ingest_batched_engine,
    ),
    Bench(
        "ingest_single",
        "requests/s, one-message durable ingest requests, sequential round trips",
        _single_params,
        bench_ingest_single,
    ),
    Bench(
        "ping_roundtrip",
        "ping round-trip latency through the subprocess pipes (protocol.client.Client)",
        _ping_params,
        bench_ping_roundtrip,
    ),
    Bench(
        "ping_in_loop",
        "ping latency of Dispatcher.prepare + execute inside the event loop (no pipes)",
        _loop_params,
        bench_ping_in_loop,
    ),
    Bench(
        "pipelined",
        "requests/s with all requests written at once, answers read by a thread",
        _pipelined_params,
        bench_pipelined,
    ),
    Bench(
        "db_bytes_per_message",
        "on-disk bytes per message after ingest + save (db + WAL + payload files)",
        _dataset_params,
        bench_db_bytes,
        deterministic=True,
    ),
    Bench(
        "group_commit",
        "durable ingest p50/p95 through the daemon at synchronous=FULL vs group commit: "
        "sequential, and 16 in flight over 1 and 8 sessions; fsync p50 of the disk",
        _group_params,
        bench_group_commit,
    ),
    Bench(
        "requests",
        "ping and info p50/p95 through the pipes, brain vs a single-threaded reference loop "
        "on the same database (ratios: the machine is shared)",
        _requests_params,
        bench_requests,
    ),
    Bench(
        "startup",
        "ms from spawn to the first ping answer on an existing database",
        _startup_params,
        bench_startup,
    ),
    Bench(
        "file_check",
        "us per database-file identity check (before every commit) vs a one-row commit",
        _file_check_params,
        bench_file_check,
    ),
    Bench(
        "assemble",
        "Brain.assemble latency (200k budget), raw and after a full sweep, 1k/5k(/100k) messages",
        _assemble_params,
        bench_assemble,
    ),
    Bench(
        "sweep",
        "full-sweep (Brain.compact) database ms per message at 5k(/100k) messages",
        _sweep_params,
        bench_sweep,
    ),
    Bench(
        "reused_call_ids",
        "fresh tail ms and full-sweep database ms of a 3k-message tool loop whose calls "
        "are all call_0",
        _reused_ids_params,
        bench_reused_call_ids,
    ),
    Bench(
        "grep",
        "Brain.grep p50/p95 per mode (full_text, regex, semantic, hybrid) at 10k(/100k/1M)",
        _grep_params,
        bench_grep,
    ),
    Bench(
        "vectors",
        "top-10 over StaticEmbedder vectors: exact vs IVF latency, build, recall@10",
        _vectors_params,
        bench_vectors,
    ),
    Bench(
        "bigvectors",
        "1M messages through the daemon: first ping, first semantic grep, RSS while loading "
        "the vectors (matrix file absent, then present), matrix bytes, semantic/hybrid p50",
        _bigvectors_params,
        bench_bigvectors,
    ),
    Bench(
        "graph",
        "learned retrieval graph through Brain at 1k/5k(/50k) nodes: build, query p50/p95 "
        "(embed vs traverse), teach/learn/correction, maintain, save",
        _graph_params,
        bench_graph,
    ),
    Bench(
        "graph_daemon",
        "graph query round trip p50/p95 through our daemon at 1k/5k/100k nodes (the peers "
        "graph, brain alone), with learn and teach; only with --only",
        _graph_daemon_params,
        bench_graph_daemon,
        opt_in=True,
        max_runs=1,
    ),
    Bench(
        "maintain_reads",
        "info/assemble p50/p95/max through the daemon while maintain runs on a 10k "
        "(named in --only: 100k) node graph, and idle",
        _maintain_params,
        bench_maintain_reads,
    ),
    Bench(
        "graph_scale",
        "a 10k (named in --only: 100k) node graph through the daemon: first answer, first "
        "query, query and teach p50/p95, maintain",
        _scale_params,
        bench_graph_scale,
    ),
    Bench(
        "read_under_write",
        "grep/assemble/query p99 through the daemon, idle and while maintain runs on a 10k "
        "(named in --only: 100k) node graph and while a 5k (50k) message session is swept",
        _ruw_params,
        bench_read_under_write,
    ),
    Bench(
        "provider_stall",
        "ingest p50/p95 through the daemon, idle and while 8 provider calls hang "
        "(4 expand_query on the LLM, 4 semantic grep on the embedder)",
        _provider_stall_params,
        bench_provider_stall,
    ),
    Bench(
        "stop",
        "ms from SIGTERM / shutdown to exit with a write stuck on another process's lock "
        f"(shutdown_timeout_s {STOP_TIMEOUT_S:g}); only with --only",
        _stop_params,
        bench_stop,
        opt_in=True,
    ),
    Bench(
        "unread",
        "peak RSS of a daemon whose client sends 3k/30k assemble requests and reads nothing; "
        "only with --only",
        _unread_params,
        bench_unread,
        opt_in=True,
    ),
    Bench(
        "rollups",
        "ms to refresh the rollups after one new day at 30 and 300 days of history, full "
        "refresh s, recent(week) p50; only with --only",
        _rollups_params,
        bench_rollups,
        opt_in=True,
    ),
    Bench(
        "retention",
        "a retention pass through the daemon (age 30 days, max bytes 60% of the file): file "
        "bytes before/after, the pass's s, grep and ingest p50/p95 during it and after, and "
        "the VACUUM that switches a pre-v19 file; only with --only",
        _retention_params,
        bench_retention,
        opt_in=True,
    ),
    Bench(
        "summarizers",
        "messages/s summarised by the offline summarizers (fact default, extractive_v1), "
        "leaf chunks of 2k and 20k tokens of a LoCoMo conversation, in-process",
        _summarizers_params,
        bench_summarizers,
    ),
    Bench(
        "peers",
        f"brain and {PEER_PACKAGE} {PEER_VERSION} side by side through their stdio daemons on "
        "the same graph (query p50/p95, teach, learn, save, startup, maintain, RSS; speedup = "
        "peer / ours); installs the peer in a cached virtualenv; only with --only",
        _peers_params,
        bench_peers,
        opt_in=True,
        max_runs=1,
    ),
    Bench(
        "million",
        "a million messages through the daemon (2,000 conversations, four of 50k interleaved): "
        "ingest msg/s, embedding vectors/s during and after ingest, grep p50/p95 per mode "
        "scoped to a 50k session and unscoped, expand_query, assemble, info, start-up; "
        "only with --only",
        _million_params,
        bench_million,
        opt_in=True,
        max_runs=1,
    ),
    Bench(
        "replay",
        "a 681-turn LoCoMo-like replay (and the first real LoCoMo conversation, if found) "
        "through the daemon at budget 4,000: settle ms after compacting turns, assembles "
        "covering all history from turn 100, tokens",
        _replay_params,
        bench_replay,
    ),
)
BENCH_BY_NAME: Final = {b.name: b for b in BENCHES}


@dataclass(frozen=True)
class Target:
    """A figure the project aims for."""

    bench: str
    metric: str  # dotted for a nested figure: "raw_5000.p50_ms"
    op: str  # ">=" or "<="
    value: float
    note: str = ""

    @property
    def name(self) -> str:
        """Its key in the report: the bench and the figure (two targets on one group of
        figures must not share a key, or the report shows only the last)."""
        return f"{self.bench}.{self.metric}"


_MILLION_NOTE: Final = "through the daemon at 1M messages (--only million), issue 17"
TARGETS: Final[tuple[Target, ...]] = (
    Target("ingest_batched", "msgs_per_s", ">=", 20_000),
    Target("ingest_single", "reqs_per_s", ">=", 2_000),
    Target("ping_in_loop", "p50_ms", "<=", 0.1),
    Target("grep", "messages_100000.full_text_scoped_p50_ms", "<=", 5),
    Target("grep", "messages_100000.ranking_added_hybrid_scoped_p50_ms", "<=", 5),
    Target("grep", "messages_100000.ranking_added_hybrid_all_p50_ms", "<=", 5),
    Target(
        "vectors",
        "rows_1000000.ivf_p50_ms",
        "<=",
        20,
        "with recall_at_10 >= 0.95; exact top-k at 1M x 256 is memory-bound (~25 ms), "
        "vec0 brute force ~80 ms",
    ),
    Target("vectors", "rows_100000.int8_exact_recall_at_10", ">=", 0.95),
    Target("bigvectors", "warm.first_ping_ms", "<=", 500, "issue 17: first answer <= 0.5 s"),
    Target("bigvectors", "warm.first_semantic_ms", "<=", 1000, "issue 17: at 1M messages"),
    Target(
        "bigvectors",
        "cold.inprocess_loading_over_matrix",
        "<=",
        1.2,
        "issue 17: peak RSS while loading <= 1.2x the final matrix (was 3.4-3.6 GB at 1M)",
    ),
    Target(
        "assemble",
        "raw_5000.p50_ms",
        "<=",
        10,
        "lossless-claw: 1,080 ms at 5,000 items, 250 ms at 1,000 (same machine)",
    ),
    Target(
        "assemble",
        "raw_5000.python_calls_per_item",
        "<=",
        12,
        "Python calls per item of one warm assemble, which load cannot move: 11.4 after "
        "fe71461; the pairing rule (9c53942) and the assemble package (a163b0d) had "
        "slid it ~40% (26,783 -> 37,756 calls at 1,000 raw messages) unseen by timings",
    ),
    Target(
        "graph",
        "nodes_5000.query_p50_ms",
        "<=",
        5,
        "openclawbrain 12.2.6 (same machine): 689 ms at 5,000 nodes, 209 ms at 1,000",
    ),
    Target("graph", "nodes_50000.query_p50_ms", "<=", 20, "with --graph-nodes ...,50000"),
    Target("graph_daemon", "nodes_1000.query_p50_ms", "<=", 2, "through the daemon"),
    Target("graph_daemon", "nodes_5000.query_p50_ms", "<=", 2, "through the daemon"),
    Target("graph_daemon", "nodes_100000.query_p50_ms", "<=", 10, "through the daemon"),
    Target("graph_daemon", "nodes_1000.query_p95_over_p50", "<=", 3),
    Target("graph_daemon", "nodes_5000.query_p95_over_p50", "<=", 3),
    Target("graph_daemon", "nodes_100000.query_p95_over_p50", "<=", 3),
    Target(
        "peers",
        "openclawbrain.nodes_5000.learn_p50_ms.speedup",
        ">=",
        1,
        "ours durable (an fsync of the WAL, ~0.7 ms on the test disk), the peer's in memory",
    ),
    Target("graph_scale", "nodes_100000.teach_p50_ms", "<=", 5, "named in --only"),
    Target("graph_scale", "nodes_100000.maintain_s", "<=", 10, "named in --only"),
    Target("graph_scale", "nodes_100000.first_answer_ms", "<=", 500, "named in --only"),
    Target("graph_scale", "nodes_100000.first_query_ms", "<=", 1_000, "named in --only"),
    Target(
        "peers",
        "openclawbrain.nodes_5000.query_p50_ms.speedup",
        ">=",
        100,
        "openclawbrain's query round trip p50 over brain's, both through their daemons",
    ),
    Target(
        "million",
        "embed_lag_after_ingest_s",
        "<=",
        60,
        "embedding keeps pace with ingest: vectors trail the last message by under a minute",
    ),
    Target("million", "grep_full_text_scoped_p50_ms", "<=", 20, _MILLION_NOTE),
    Target("million", "grep_hybrid_scoped_p50_ms", "<=", 20, _MILLION_NOTE),
    Target("million", "grep_full_text_all_p50_ms", "<=", 50, _MILLION_NOTE),
    Target("million", "grep_hybrid_all_p50_ms", "<=", 50, _MILLION_NOTE),
    Target("million", "expand_query_scoped_p50_ms", "<=", 50, _MILLION_NOTE),
    Target(
        "sweep",
        "per_message_ratio_100k_vs_5k",
        "<=",
        1.5,
        "linear ~1.0; lossless-claw is quadratic (9.4 s of database work for 52 leaf passes)",
    ),
)


def run_bench(bench: Bench, shared: Shared) -> dict[str, Any]:
    """Run one benchmark ``--runs`` times (once if deterministic) and summarise."""
    settings = shared.settings
    runs = 1 if bench.deterministic else min(settings.runs, bench.max_runs or settings.runs)
    entry: dict[str, Any] = {"summary": bench.summary, "params": bench.params(settings)}
    values: dict[str, list[float]] = {}
    started = time.perf_counter()
    try:
        for i in range(runs):
            work = settings.root / f"{bench.name}-{i}"
            work.mkdir()
            try:
                metrics = bench.run(shared, work)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            for key, value in metrics.items():
                values.setdefault(key, []).append(float(value))
            print(f"  {bench.name} run {i + 1}/{runs}: {_brief(metrics)}", file=sys.stderr)
    except BenchSkipped as exc:
        entry["skipped"] = str(exc)
        print(f"  {bench.name} skipped: {exc}", file=sys.stderr)
    except Exception as exc:
        entry["error"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc(file=sys.stderr)
    entry["n_runs"] = len(next(iter(values.values()), []))
    if bench.deterministic:
        entry["params"]["note"] = "deterministic: measured once"
    runs_entry: dict[str, Any] = {}
    for key, vals in values.items():
        _put(entry, key, _round(statistics.median(vals)))
        _put(runs_entry, key, [_round(v) for v in vals])
    entry["runs"] = runs_entry
    entry["wall_s"] = _round(time.perf_counter() - started)
    return entry


def _put(tree: dict[str, Any], key: str, value: Any) -> None:
    """Store ``value`` under a dotted key as nested objects ("a.b" -> tree["a"]["b"])."""
    *groups, last = key.split(".")
    for group in groups:
        tree = tree.setdefault(group, {})
    tree[last] = value


def _lookup(tree: dict[str, Any], key: str) -> Any:
    """The value under a dotted key, or None."""
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _round(value: float) -> float:
    if math.isnan(value) or value == 0:
        return value
    digits = max(0, 4 - math.floor(math.log10(abs(value))))
    return round(value, digits)


def _brief(metrics: Metrics) -> str:
    if any("." in k for k in metrics):  # nested figures: the headline of each group
        heads = ("p50_ms", "after_ingest_p50_ms", "db_ms_per_message", "query_p50_ms.speedup")
        shown = [(k, v) for k, v in metrics.items() if "." not in k or k.endswith(heads)]
    else:
        shown = list(metrics.items())[:4]
    return ", ".join(f"{k}={_round(v):g}" for k, v in shown)


def targets_report(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each target with the measured median and whether it is met (None when not run)."""
    out: dict[str, Any] = {}
    for t in TARGETS:
        actual = _lookup(results.get(t.bench, {}), t.metric)
        met = None
        if isinstance(actual, float | int):
            met = actual >= t.value if t.op == ">=" else actual <= t.value
        out[t.name] = {
            "metric": t.metric,
            "target": f"{t.op} {t.value:g}",
            "value": actual,
            "met": met,
        }
        if t.note:
            out[t.name]["note"] = t.note
    return out


def machine_info() -> dict[str, Any]:
    """Where the figures were measured."""
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "brain": __version__,
    }


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested figures as one level of dotted keys ({"a": {"b": 1}} -> {"a.b": 1})."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def render_table(results: dict[str, dict[str, Any]], targets: dict[str, Any]) -> str:
    """A human-readable summary of the medians."""
    buf = io.StringIO()
    width = max((len(n) for n in results), default=10)
    buf.write(f"{'benchmark':<{width}}  median figures\n")
    for name, entry in results.items():
        if "error" in entry:
            buf.write(f"{name:<{width}}  ERROR {entry['error']}\n")
            continue
        if "skipped" in entry:
            buf.write(f"{name:<{width}}  SKIPPED {entry['skipped']}\n")
            continue
        flat = {k: entry[k] for k in entry["runs"] if not isinstance(entry[k], dict)}
        figures = ", ".join(f"{k}={v:g}" for k, v in flat.items())
        buf.write(f"{name:<{width}}  {figures}\n")
        for group in entry["runs"]:
            if isinstance(entry[group], dict):
                sub = ", ".join(f"{k}={v:g}" for k, v in _flatten(entry[group]).items())
                buf.write(f"{'':<{width}}  {group}: {sub}\n")
    buf.write("\ntargets\n")
    for name, t in targets.items():
        verdict = {True: "MET", False: "MISSED", None: "not run"}[t["met"]]
        value = "-" if t["value"] is None else f"{t['value']:g}"
        buf.write(f"  {name}: {t['metric']} {t['target']}: {value}  [{verdict}]\n")
    return buf.getvalue()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object to stdout")
    parser.add_argument(
        "--only",
        help=f"comma-separated benchmarks to run: {', '.join(BENCH_BY_NAME)}; "
        "assemble and sweep add their 100,000-message variants only when named here "
        "(about 1 min and 0.5 min per run at --size 1)",
    )
    parser.add_argument("--runs", type=int, default=5, help="runs per benchmark (median)")
    parser.add_argument(
        "--size", type=float, default=1.0, help="workload scale factor (0.1 = quick smoke run)"
    )
    parser.add_argument("--tmp-dir", help="where temporary databases go (default: system temp)")
    parser.add_argument(
        "--locomo",
        help="a LoCoMo JSON file whose first conversation replay also replays "
        "(default: ../shared/data/locomo/locomo_dev.json when it exists)",
    )
    parser.add_argument(
        "--grep-messages",
        default="10000",
        help="comma-separated database sizes for grep (e.g. 10000,100000,1000000)",
    )
    parser.add_argument(
        "--vector-rows",
        default="100000,1000000",
        help="comma-separated vector counts for the vectors benchmark",
    )
    parser.add_argument(
        "--graph-nodes",
        default="1000,5000",
        help="comma-separated graph sizes in nodes for the graph benchmark (e.g. 1000,5000,50000)",
    )
    parser.add_argument(
        "--peer-nodes",
        default="1000,5000",
        help="comma-separated graph sizes in nodes for the peers benchmark (e.g. 1000 for a "
        "quick run; 5000 takes several minutes, almost all of it the peer's)",
    )
    parser.add_argument(
        "--graph-daemon-nodes",
        default="1000,5000,100000",
        help="comma-separated graph sizes in nodes for the graph_daemon benchmark (only with "
        "--only; building 100,000 nodes takes about 2 minutes)",
    )
    parser.add_argument(
        "--million-db",
        help="the million benchmark's database: built there if missing (and kept), reused "
        "(reads only) if it exists",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if not args.size > 0:
        parser.error("--size must be positive")
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in BENCH_BY_NAME]
        if unknown or not names:
            parser.error(f"unknown benchmark(s) {unknown}; choose from {', '.join(BENCH_BY_NAME)}")
        args.only = names
    return args


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected benchmarks and report."""
    args = parse_args(argv)
    selected = (
        [BENCH_BY_NAME[n] for n in args.only] if args.only else [b for b in BENCHES if not b.opt_in]
    )
    signal.signal(signal.SIGTERM, _terminate)
    started = time.perf_counter()
    began = datetime.now(UTC).isoformat(timespec="seconds")
    results: dict[str, dict[str, Any]] = {}
    root = Path(tempfile.mkdtemp(prefix="brain-bench-", dir=args.tmp_dir))
    try:
        sizes = {
            "grep_messages": tuple(int(n) for n in args.grep_messages.split(",")),
            "vector_rows": tuple(int(n) for n in args.vector_rows.split(",")),
            "graph_nodes": tuple(int(n) for n in args.graph_nodes.split(",")),
            "peer_nodes": tuple(int(n) for n in args.peer_nodes.split(",")),
            "graph_daemon_nodes": tuple(int(n) for n in args.graph_daemon_nodes.split(",")),
        }
        shared = Shared(
            Settings(
                args.runs,
                args.size,
                root,
                heavy=bool(args.only),
                locomo=locomo_path(args.locomo),
                million_db=args.million_db,
                **sizes,
            )
        )
        for bench in selected:
            print(f"{bench.name}: {bench.summary}", file=sys.stderr)
            results[bench.name] = run_bench(bench, shared)
    finally:
        reap_children()
        shutil.rmtree(root, ignore_errors=True)
    targets = targets_report(results)
    for t in TARGETS:
        if t.bench in results:
            results[t.bench].setdefault("targets", {})[t.name] = targets[t.name]
    report: dict[str, Any] = {
        **results,
        "targets": targets,
        "machine": machine_info(),
        "meta": {
            "started_at": began,
            "took_s": _round(time.perf_counter() - started),
            "runs": args.runs,
            "size": args.size,
            "only": args.only,
            "tmp_dir": args.tmp_dir or tempfile.gettempdir(),
            "daemon": "python -m daemon --db DB, default settings (BRAIN_* variables removed)",
        },
    }
    table = render_table(results, targets)
    if args.json:
        print(table, file=sys.stderr)
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(table)
    return 1 if any("error" in e for e in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
