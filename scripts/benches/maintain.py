"""The graph at 100k nodes through one daemon: reads while ``maintain`` runs, start-up and
teach at scale, reads beside long writes."""

from __future__ import annotations

import itertools
import math
import random
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Final

from benches.assemble import CONTEXT_SESSION, agent_messages
from benches.core import BATCH_SIZE, CALL_TIMEOUT_S, SEED, Metrics, Settings, Shared
from benches.corpus import WORDS, diverse_texts, make_content
from benches.graph import graph_queries
from benches.procs import client_daemon
from benches.stats import latency_metrics, process_rss_mb, remove_db
from brain import Brain, BrainConfig, CompactionConfig, MessageIn
from protocol.client import Client

# -- reads during maintain ----------------------------------------------------------------

MAINTAIN_NODES: Final = 100_000
"""Graph size for ``maintain_reads`` when named in ``--only`` (else a tenth of it)."""
MAINTAIN_FANOUT: Final = 10
MAINTAIN_IDLE_SAMPLES: Final = 100


def _maintain_nodes(s: Settings) -> int:
    return s.n(MAINTAIN_NODES if s.heavy else MAINTAIN_NODES // 10, 500)


def maintain_params(s: Settings) -> dict[str, Any]:
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
    remove_db(db)
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


def scale_params(s: Settings) -> dict[str, Any]:
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
        queries = graph_queries(SCALE_QUERIES + 1, SEED + 81)
        t = time.perf_counter()
        client.call("query", {"query": queries[0]}, timeout=CALL_TIMEOUT_S)
        out[f"{key}first_query_ms"] = (time.perf_counter() - t) * 1000
        out[f"{key}rss_after_first_query_mb"] = process_rss_mb(client.proc.pid)
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
        out[f"{key}peak_rss_mb"] = process_rss_mb(client.proc.pid)
    remove_db(db)
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


def ruw_params(s: Settings) -> dict[str, Any]:
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
            client.call("teach", {"content": f"deploy rule {n}: {WORDS[n]} before release"})
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
    remove_db(db)
    return out
