"""Recall through ``Brain.grep`` per mode and scope, and ingest with reused tool-call ids."""

from __future__ import annotations

import random
import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from benches.assemble import CONTEXT_SESSION
from benches.core import BATCH_SIZE, SEED, Metrics, Settings, Shared
from benches.corpus import diverse_texts
from benches.stats import latency_metrics, peak_rss_mb, remove_db
from brain import Brain, BrainConfig, CompactionConfig, MessageIn

# -- recall: grep per mode, vector top-k ----------------------------------------------

GREP_SESSION_MESSAGES: Final = 1_000  # messages per conversation in the grep database
GREP_INGEST_BATCH: Final = 5_000  # messages per ingest call (one transaction)
GREP_QUERIES: Final = 60  # distinct queries per mode (each timed once, after a warm-up)
VECTOR_QUERIES: Final = 200


def _grep_sizes(s: Settings) -> list[int]:
    return [max(GREP_SESSION_MESSAGES, round(n * s.size)) for n in s.grep_messages]


def grep_params(s: Settings) -> dict[str, Any]:
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


def grep_queries(seed: int) -> list[str]:
    """Two- to four-word queries drawn like the messages' words."""
    rng = random.Random(seed)
    texts = diverse_texts(GREP_QUERIES, seed)
    return [" ".join(rng.sample(t.rstrip(".").split(), min(3, len(t.split())))) for t in texts]


def build_grep_db(brain: Brain, count: int) -> tuple[float, float]:
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


def reused_ids_params(s: Settings) -> dict[str, Any]:
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
    remove_db(db)
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
    queries = grep_queries(SEED + 21)
    for count in _grep_sizes(shared.settings):
        db = work / f"grep-{count}.db"
        brain = Brain(db, BrainConfig(compaction=CompactionConfig(auto=False)))
        try:
            print(f"  grep: building {count} messages", file=sys.stderr)
            ingest_s, embed_s = build_grep_db(brain, count)
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
                qs = [regex_for(q) for q in queries] if mode == "regex" else queries
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
            out[f"{key}peak_rss_mb"] = peak_rss_mb()
        finally:
            brain.close()
        remove_db(db)
    return out


def regex_for(query: str) -> str:
    """A bounded regex from a query: its first word as a prefix, then any next word."""
    return rf"\b{query.split(maxsplit=1)[0][:4]}\w* \w+"
