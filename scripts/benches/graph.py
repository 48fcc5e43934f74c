"""The learned retrieval graph through ``Brain``: build, query, teach, learn, corrections,
maintain, save."""

from __future__ import annotations

import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from benches.core import SEED, Metrics, Settings, Shared
from benches.corpus import diverse_texts
from benches.stats import latency_metrics, peak_rss_mb, percentile, remove_db
from brain import Brain, BrainConfig, CompactionConfig

# -- the learned retrieval graph --------------------------------------------------------

GRAPH_TAUGHT_SHARE: Final = 0.1  # of the nodes, taught one by one; the rest are synced chunks
GRAPH_SECTIONS_PER_FILE: Final = 25  # markdown sections (one chunk each) per workspace file
GRAPH_QUERIES: Final = 200  # timed queries per option set, after one cold query
GRAPH_WRITES: Final = 50  # timed teach / learn / correction calls each
GRAPH_WIDE: Final[dict[str, Any]] = {"top_k": 50, "threshold": 0.001, "max_fired": 64}


def _graph_sizes(s: Settings) -> list[int]:
    return [max(200, round(n * s.size)) for n in s.graph_nodes]


def graph_params(s: Settings) -> dict[str, Any]:
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


def graph_queries(count: int, seed: int) -> list[str]:
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

            queries = graph_queries(2 * GRAPH_QUERIES + 3 * GRAPH_WRITES + 1, SEED + 42)
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
            out[f"{key}peak_rss_mb"] = peak_rss_mb()
        finally:
            brain.close()
        remove_db(db)
        shutil.rmtree(workspace, ignore_errors=True)
    return out
