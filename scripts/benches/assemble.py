"""The lossless context layer: ``assemble`` and full sweeps over generated agent conversations."""

from __future__ import annotations

import itertools
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any, Final

import orjson

from benches.core import BATCH_SIZE, CALL_TIMEOUT_S, SEED, Metrics, Settings, Shared
from benches.corpus import IDENTS, WORDS, make_content
from benches.procs import client_daemon
from benches.stats import latency_metrics, remove_db
from brain import AssembleOptions, Brain, BrainConfig, CompactionConfig, MessageIn

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
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 10)))
        if roll < 0.4:
            path = f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py"
            line = f"{path}:{rng.randint(1, 2_000)}: {words}"
        elif roll < 0.7:
            day, hour, minute = rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59)
            stamp = f"2025-01-{day:02d}T{hour:02d}:{minute:02d}"
            line = f"{stamp} {rng.choice(_LEVELS)} {rng.choice(IDENTS)} {words}"
        else:
            line = f"  {rng.choice(WORDS)}_{rng.choice(WORDS)} = {rng.randint(0, 99_999)}"
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
                    "path": f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py",
                    "query": " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12))),
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


def assemble_params(s: Settings) -> dict[str, Any]:
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
        remove_db(db)
    return out


def sweep_params(s: Settings) -> dict[str, Any]:
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
        remove_db(db)
    if "100000" in per_message and per_message["5000"] > 0:
        out["per_message_ratio_100k_vs_5k"] = per_message["100000"] / per_message["5000"]
    return out
