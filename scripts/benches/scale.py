"""One and three million messages through the daemon: the figures a 10M extrapolation needs.

Each size is its own database, ``scale-<N>.db`` in ``$BENCH_SCALE_DIR`` (kept, and reused
when present: building 3M takes the better part of an hour on 2 shared cores) or else
in the work directory (removed after). The same shape at every size: four sessions of
50,000 messages whose ingest batches are spread evenly over the whole id range (so a
scoped search cannot lean on a narrow rowid span), and conversations of 1,000 messages
for the rest. Built in process (``Brain.ingest``, then every vector embedded with the
shipped StaticEmbedder, then the entity index), since the daemon path's ingest rate is
``million``'s figure, not this one's.

Then, through the daemon (``--auto-compact false``, so a run leaves the database as it
found it): a cold start (matrix file and IVF removed) and a warm one, first ping and
first semantic answer, RSS while loading and after, and in the warm start grep in every
mode scoped to a 1,000-message conversation, to a 50k interleaved session and
unscoped, ``expand_query``, ``assemble`` (small and 50k session) and ``info``, with the
bytes on disk per message split by what holds them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from benches.core import CALL_TIMEOUT_S, SEED, Metrics, Settings, Shared
from benches.grep import grep_queries, regex_for
from benches.million import MILLION_BIG, _million_plan, _TextStream
from benches.procs import child_env, close_client, log_tail, track
from benches.stats import file_bytes, latency_metrics, remove_db
from brain import Brain, BrainConfig, CompactionConfig, MessageIn
from protocol.client import Client
from protocol.errors import NotFound

SCALE_MESSAGES: Final = (1_000_000, 3_000_000)
SCALE_BIG_MESSAGES: Final = 50_000  # each of the MILLION_BIG interleaved sessions
SCALE_CONVERSATION: Final = 1_000  # messages of every other conversation
SCALE_QUERIES: Final = 30  # timed requests per figure, after one warm-up
SCALE_IVF_WAIT_S: Final = 900.0
SCALE_SESSIONS: Final[dict[str, dict[str, Any]]] = {
    "small": {"session": "conv-7"},
    "big": {"session": "big-0"},
    "all": {"all": True},
}
SCALE_DAEMON_ARGS: Final = ("--auto-compact", "false")
_NO_SESSION: Final = "scale-bench-no-such-session"


def _scale_sizes(s: Settings) -> list[int]:
    given = os.environ.get("BENCH_SCALE_MESSAGES")
    sizes = [int(x) for x in given.split(",")] if given else list(SCALE_MESSAGES)
    return [s.n(n, MILLION_BIG * SCALE_BIG_MESSAGES + SCALE_CONVERSATION * 10) for n in sizes]


def messages_scale_params(s: Settings) -> dict[str, Any]:
    """What ``scale`` measures, for the report."""
    return {
        "messages": _scale_sizes(s),
        "shape": f"{MILLION_BIG} sessions of {SCALE_BIG_MESSAGES} messages interleaved over "
        f"the whole id range (big-0 ..), the rest conversations of {SCALE_CONVERSATION}",
        "content": "20-100 words (~400 chars), common words plus a 40k-word Zipf long tail",
        "build": "in process: Brain.ingest in 500-message batches, StaticEmbedder over every "
        "message (Brain.embed_pending), then the entity index",
        "db": os.environ.get("BENCH_SCALE_DIR", "")
        or "the work directory ($BENCH_SCALE_DIR keeps scale-<N>.db and reuses it)",
        "through": "the daemon (brain serve --auto-compact false), protocol.client.Client",
        "cold": "matrix file and IVF removed: the first semantic grep reads every vector "
        "from SQLite and writes the file; then waits for the IVF to be saved",
        "warm": "restarted with the file and IVF in place",
        "rss": "VmRSS at the first ping and before the load (after a semantic grep of a "
        "session that does not exist: the embedder's model and grep's code loaded, no row), "
        "VmHWM after the first semantic answer and at the end; loading_peak_over_matrix "
        "counts from the ping, loading_peak_over_matrix_net from before the load",
        "queries": f"{SCALE_QUERIES} per figure after one warm-up (grep_queries(SEED + 91))",
        "scopes": "small = conv-7 (1,000 messages), big = big-0 (50k interleaved), all",
        "disk": "dbstat page bytes per message by table (indexes with their table): "
        "messages (messages, parts, context items), fts, vectors, entities, other; "
        "plus the matrix file and its IVF",
        "env": "BENCH_SCALE_MESSAGES=1000000,3000000 (default) BENCH_SCALE_DIR=DIR",
    }


def build_scale_db(db: Path, total: int) -> Metrics:
    """Ingest ``total`` messages in the scale shape, embed them all, index the entities."""
    convs = MILLION_BIG + (total - MILLION_BIG * SCALE_BIG_MESSAGES) // SCALE_CONVERSATION
    plan = _million_plan(total, convs, SCALE_BIG_MESSAGES)
    texts = _TextStream(SEED + 90)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    turns: dict[str, int] = {}
    brain = Brain(db, BrainConfig(compaction=CompactionConfig(auto=False)))
    try:
        t0 = time.perf_counter()
        n = 0
        for b, (session, count) in enumerate(plan):
            batch = []
            for text in texts.take(count):
                turn = turns.get(session, 0)
                turns[session] = turn + 1
                role = "user" if turn % 2 == 0 else "assistant"
                at = (start + timedelta(seconds=n)).isoformat()
                batch.append(MessageIn(role, text, f"{session}-m{turn}", created_at=at))
                n += 1
            brain.ingest(session, batch)
            if b % 400 == 0:
                print(f"  scale: {n} of {total} ingested", file=sys.stderr)
        ingest_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        while brain.embed_pending(batch=8_192):
            pass
        embed_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        brain.index_entities()
        entities_s = time.perf_counter() - t2
    finally:
        brain.close()
    return {"build.ingest_s": ingest_s, "build.embed_s": embed_s, "build.entities_s": entities_s}


def _kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def disk_split(db: Path, messages: int) -> Metrics:
    """Bytes per message of each part of the file (dbstat pages by table), and of the
    matrix file and IVF beside it."""
    import apsw

    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_schema"))
        pages = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
    finally:
        conn.close()
    parts = dict.fromkeys(("messages", "fts", "vectors", "entities", "other"), 0)
    for name, size in pages:
        table = str(owner.get(name, name))
        if table.startswith(("messages_fts", "messages_cjk")):
            part = "fts"
        elif table in ("messages", "message_parts", "context_items"):
            part = "messages"
        elif table == "vectors":
            part = "vectors"
        elif table.startswith(("entit",)):
            part = "entities"
        else:
            part = "other"
        parts[part] += int(size)
    matrix = db.with_name(f"{db.name}-vectors.message-summary")
    ivf = matrix.with_name(matrix.name + ".ivf")
    out: Metrics = {f"disk.{k}_bytes_per_message": v / messages for k, v in parts.items()}
    out["disk.matrix_file_bytes_per_message"] = file_bytes(matrix) / messages
    out["disk.ivf_file_bytes_per_message"] = file_bytes(ivf) / messages
    out["disk.db_file_bytes_per_message"] = (file_bytes(db) + file_bytes(Path(f"{db}-wal"))) / (
        messages
    )
    out["disk.total_gb"] = (
        file_bytes(db) + file_bytes(Path(f"{db}-wal")) + file_bytes(matrix) + file_bytes(ivf)
    ) / 1e9
    return out


def _spawn(db: Path, log: Path) -> Client:
    with log.open("ab") as err:
        client = Client.spawn(db, args=SCALE_DAEMON_ARGS, stderr=err, env=child_env())
    track(client.proc)
    return client


def _timed(client: Client, method: str, params: list[dict[str, Any]], prefix: str) -> Metrics:
    """p50/p95/max of one call per params, after an untimed warm-up with the first."""
    client.call(method, params[0], timeout=CALL_TIMEOUT_S)
    ns: list[int] = []
    for p in params:
        t = time.perf_counter_ns()
        client.call(method, p, timeout=CALL_TIMEOUT_S)
        ns.append(time.perf_counter_ns() - t)
    lat = latency_metrics(ns)
    return {
        f"{prefix}_p50_ms": lat["p50_ms"],
        f"{prefix}_p95_ms": lat["p95_ms"],
        f"{prefix}_max_ms": max(ns) / 1e6,
    }


def _start(db: Path, log: Path, key: str, query: str) -> tuple[Client, Metrics]:
    """Spawn, first ping, first unscoped semantic answer, RSS at each."""
    out: Metrics = {}
    started = time.perf_counter()
    client = _spawn(db, log)
    client.call("ping", timeout=CALL_TIMEOUT_S)
    out[f"{key}.first_ping_ms"] = (time.perf_counter() - started) * 1000
    rss_ping = _kb(client.proc.pid, "VmRSS")
    # A semantic grep of a session that does not exist embeds the query (the embedder's
    # model and grep's code come in) and answers NotFound before the index loads a row:
    # the RSS the load starts from.
    with contextlib.suppress(NotFound):
        client.call(
            "grep",
            {"query": query, "mode": "semantic", "session": _NO_SESSION},
            timeout=CALL_TIMEOUT_S,
        )
    rss_before_load = _kb(client.proc.pid, "VmRSS")
    client.call("grep", {"query": query, "mode": "semantic", "all": True}, timeout=900)
    out[f"{key}.first_semantic_ms"] = (time.perf_counter() - started) * 1000
    hwm = _kb(client.proc.pid, "VmHWM")
    out[f"{key}.rss_at_ping_mb"] = rss_ping / 1024
    out[f"{key}.peak_rss_after_load_mb"] = hwm / 1024
    out[f"{key}.rss_after_load_mb"] = _kb(client.proc.pid, "VmRSS") / 1024
    matrix = db.with_name(f"{db.name}-vectors.message-summary")
    out[f"{key}.rss_before_load_mb"] = rss_before_load / 1024
    if file_bytes(matrix):
        out[f"{key}.loading_peak_over_matrix"] = (hwm - rss_ping) * 1024 / file_bytes(matrix)
        # The same peak over the RSS once the model is in: what loading the rows costs.
        out[f"{key}.loading_peak_over_matrix_net"] = (
            (hwm - rss_before_load) * 1024 / file_bytes(matrix)
        )
    return client, out


def scale_reads(db: Path, log: Path) -> Metrics:
    """Cold and warm starts, then every read figure, on a built database."""
    out: Metrics = {}
    queries = grep_queries(SEED + 91)[:SCALE_QUERIES]
    matrix = db.with_name(f"{db.name}-vectors.message-summary")
    ivf = matrix.with_name(matrix.name + ".ivf")
    matrix.unlink(missing_ok=True)
    ivf.unlink(missing_ok=True)
    t0 = time.perf_counter()
    client, figures = _start(db, log, "cold", queries[0])
    out.update(figures)
    try:
        # The IVF builds on a thread after the first search and is saved beside the
        # matrix file for the next start: wait for it, so the warm start maps both.
        while not ivf.exists() and time.perf_counter() - t0 < SCALE_IVF_WAIT_S:
            time.sleep(1)
        out["cold.ivf_saved_s"] = time.perf_counter() - t0
        time.sleep(2)  # the IVF file is written then renamed; let the writer finish
    finally:
        close_client(client, 120)
    client, figures = _start(db, log, "warm", queries[1])
    out.update(figures)
    try:
        for mode in ("full_text", "semantic", "hybrid", "regex"):
            qs = [regex_for(q) for q in queries] if mode == "regex" else queries
            for scope, where in SCALE_SESSIONS.items():
                params = [{"query": q, "mode": mode, **where} for q in qs]
                out.update(_timed(client, "grep", params, f"grep_{mode}_{scope}"))
        for scope, where in SCALE_SESSIONS.items():
            params = [{"prompt": f"what was said about {q}?", "query": q, **where} for q in queries]
            out.update(_timed(client, "expand_query", params, f"expand_query_{scope}"))
        for scope in ("small", "big"):
            params = [{**SCALE_SESSIONS[scope], "budget": 8_000}] * SCALE_QUERIES
            out.update(_timed(client, "assemble", params, f"assemble_{scope}"))
        out.update(_timed(client, "info", [{}] * SCALE_QUERIES, "info"))
        out["warm.peak_rss_mb"] = _kb(client.proc.pid, "VmHWM") / 1024
        out["warm.rss_end_mb"] = _kb(client.proc.pid, "VmRSS") / 1024
        messages = int(client.call("info", timeout=CALL_TIMEOUT_S)["messages"])
    except BaseException:
        tail = log_tail(log)
        if tail:
            print(f"  daemon log tail ({log}):\n{tail}", file=sys.stderr)
        raise
    finally:
        close_client(client, 120)
    out["messages"] = float(messages)
    out.update(disk_split(db, messages))
    return out


def bench_scale(shared: Shared, work: Path) -> Metrics:
    """Build (or reuse) each size's database, then time starts and reads through the daemon."""
    kept = os.environ.get("BENCH_SCALE_DIR")
    root = Path(kept) if kept else work
    out: Metrics = {}
    for total in _scale_sizes(shared.settings):
        db = root / f"scale-{total}.db"
        key = f"messages_{total}."
        if not db.exists():
            root.mkdir(parents=True, exist_ok=True)
            print(f"  scale: building {total} messages into {db}", file=sys.stderr)
            out.update({key + k: v for k, v in build_scale_db(db, total).items()})
        else:
            print(f"  scale: reusing {db}", file=sys.stderr)
        out.update({key + k: v for k, v in scale_reads(db, work / "scale.log").items()})
        if not kept:
            remove_db(db)  # with its matrix file and IVF (same name prefix)
    return out
