"""Graph query round trips through our daemon alone, on the peers benchmark's graph."""

from __future__ import annotations

import math
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Final

from benches.core import SEED, Metrics, Settings, Shared
from benches.peers import StdioDaemon, build_ours, peer_graph
from benches.procs import child_env
from benches.stats import percentile
from protocol.client import daemon_command

# -- graph_daemon: graph query round trips through our daemon alone ----------------------

GRAPH_DAEMON_QUERIES: Final = 40  # distinct queries, each asked once per round
GRAPH_DAEMON_ROUNDS: Final = 3  # rounds of them (new chat ids each round)
GRAPH_DAEMON_WRITES: Final = 20  # timed learn (by chat id) and teach requests


def _graph_daemon_sizes(s: Settings) -> list[int]:
    return [max(50, round(n * s.size)) for n in s.graph_daemon_nodes]


def graph_daemon_params(s: Settings) -> dict[str, Any]:
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
        build_ours(db, graph)
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
