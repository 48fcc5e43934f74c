"""Summaries: compaction replaying a host's budget, summarizer chunk sizes, day rollups against
history length."""

from __future__ import annotations

import collections
import importlib.util
import math
import random
import re
import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import orjson

from benches.core import CALL_TIMEOUT_S, SEED, Message, Metrics, Settings, Shared
from benches.corpus import make_content
from benches.procs import client_daemon
from benches.stats import percentile, remove_db
from brain import Brain, BrainConfig, CompactionConfig, MessageIn
from protocol.client import Client

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
    """``--locomo``, else ``shared/data/locomo/locomo_dev.json`` in a folder above the
    checkout (a worktree's too) or beside the working directory, when it exists."""
    if given:
        return Path(given)
    for base in (*Path(__file__).resolve().parents[2].parents, Path.cwd().parent):
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


def eval_locomo_module() -> ModuleType:
    """``scripts/eval_locomo.py`` as a module (how LoCoMo turns become messages)."""
    if "eval_locomo" in sys.modules:
        return sys.modules["eval_locomo"]
    spec = importlib.util.spec_from_file_location(
        "eval_locomo", Path(__file__).resolve().parents[1] / "eval_locomo.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["eval_locomo"] = module
    spec.loader.exec_module(module)
    return module


def real_locomo(path: Path) -> list[Message]:
    """The first conversation of a LoCoMo file, mapped as ``scripts/eval_locomo.py`` does."""
    samples = orjson.loads(path.read_bytes())
    messages: list[Message] = eval_locomo_module().messages_of(samples[0])[0]
    return messages


SUMMARIZE_CHUNKS: Final = ((2_000, 500), (20_000, 1_200))  # (leaf chunk, leaf target) tokens
SUMMARIZE_REPEATS: Final = 3


def summarizers_params(s: Settings) -> dict[str, Any]:
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


def replay_params(s: Settings) -> dict[str, Any]:
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
    turns = replay_params(settings)["synthetic_turns"]
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


def rollups_params(s: Settings) -> dict[str, Any]:
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
        remove_db(db)
    return out
