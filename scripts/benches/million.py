"""A million messages through the daemon: build (or reuse) the database, then time the reads."""

from __future__ import annotations

import collections
import math
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from benches.core import CALL_TIMEOUT_S, SEED, Metrics, Settings, Shared
from benches.corpus import RARE_VOCAB, WORDS, pseudo_word
from benches.grep import grep_queries, regex_for
from benches.procs import client_daemon
from benches.stats import file_bytes, latency_metrics, process_rss_mb
from protocol.client import Client
from protocol.errors import InvalidParams

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


def million_params(s: Settings) -> dict[str, Any]:
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
        self._tail = [pseudo_word(i) for i in range(RARE_VOCAB)]

    def take(self, count: int) -> list[str]:
        rng = self._rng
        lengths = rng.integers(20, 100, size=count)
        total = int(lengths.sum())
        common = rng.integers(0, len(WORDS), size=total).tolist()
        rare = ((rng.zipf(1.15, size=total) - 1) % RARE_VOCAB).tolist()
        use_rare = (rng.random(total) < 0.35).tolist()
        words = [
            self._tail[r] if u else WORDS[c] for c, r, u in zip(common, rare, use_rare, strict=True)
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
        out["build_rss_mb"] = process_rss_mb(pid)
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


def _timed_calls(
    client: Client, method: str, params: list[dict[str, Any]], refused: list[str] | None = None
) -> list[int]:
    """Nanoseconds of each call after one untimed warm-up with the first params.

    With ``refused``, a call answered with an invalid-params error (a regex over its
    1 s budget) is timed like the others and its message kept there, instead of
    ending the bench (one slow pattern on a loaded machine lost every later figure).
    """
    ns: list[int] = []
    for i, p in enumerate([params[0], *params]):
        t = time.perf_counter_ns()
        try:
            client.call(method, p, timeout=CALL_TIMEOUT_S)
        except InvalidParams as exc:
            if refused is None:
                raise
            if i:
                refused.append(str(exc))
        if i:
            ns.append(time.perf_counter_ns() - t)
    return ns


def _million_reads(db: Path, log: Path) -> Metrics:
    """Start-up, grep per mode, expand_query, assemble and info on a built database."""
    out: Metrics = {}
    queries = grep_queries(SEED + 91)[:MILLION_QUERIES]
    t0 = time.perf_counter()
    with client_daemon(db, log) as client:
        out["startup_first_ping_ms"] = (time.perf_counter() - t0) * 1000
        t = time.perf_counter()
        client.call("grep", {"query": "warm", "mode": "semantic", "all": True}, timeout=600)
        out["first_semantic_grep_ms"] = (time.perf_counter() - t) * 1000
        out["rss_after_vectors_load_mb"] = process_rss_mb(client.proc.pid)
        scopes: dict[str, dict[str, Any]] = {"scoped": {"session": "big-0"}, "all": {"all": True}}
        for mode in ("full_text", "semantic", "hybrid", "regex"):
            for scope, where in scopes.items():
                if mode == "regex" and scope == "all":
                    continue  # a regex scan of every message is not an interactive read
                qs = [regex_for(q) for q in queries] if mode == "regex" else queries
                refused: list[str] = []
                ns = _timed_calls(
                    client,
                    "grep",
                    [{"query": q, "mode": mode, **where} for q in qs],
                    refused if mode == "regex" else None,
                )
                if mode == "regex":
                    out[f"grep_regex_{scope}_over_budget"] = float(len(refused))
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
        out["rss_mb"] = process_rss_mb(client.proc.pid)
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
