"""openclawbrain side by side: the same generated graph through both stdio daemons."""

from __future__ import annotations

import itertools
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from bisect import bisect_left
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import orjson

from benches.core import CALL_TIMEOUT_S, SEED, BenchSkipped, Metrics, Settings, Shared
from benches.corpus import WORDS, pseudo_word
from benches.procs import child_env, log_tail, stop_process, track, untrack
from benches.stats import percentile
from brain import Brain, BrainConfig, CompactionConfig
from protocol.client import daemon_command

# -- peers: openclawbrain side by side, through both daemons -----------------------------

PEER_PACKAGE: Final = "openclawbrain"
PEER_VERSION: Final = "12.2.6"
PEER_QUERIES: Final = 20  # timed queries per size, each answered by both daemons
PEER_WRITES: Final = 8  # timed teach/inject and learn requests per size
PEER_INFOS: Final = 21  # timed info requests per size (info_ms is their median)
PEER_WORDS: Final = (60, 80)  # words per node (~70)
PEER_TASKS: Final = ("health", "decay", "merge", "prune")  # maintain tasks both implement
# Edge tiers (share of edges, weight range): the graph a learning memory grows into.
PEER_TIERS: Final = (
    ("strong", 0.25, 0.6, 0.95),
    ("medium", 0.35, 0.2, 0.5),
    ("weak", 0.3, 0.02, 0.15),
    ("negative", 0.1, -0.8, -0.3),
)


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
    tail = [pseudo_word(i) for i in range(5_000)]
    texts: list[str] = []
    for _ in range(nodes):
        words = [
            rng.choice(tail) if rng.random() < 0.3 else rng.choice(WORDS)
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


def build_ours(db: Path, graph: PeerGraph) -> None:
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
        track(self.proc)
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
        untrack(self.proc)


def _peer_sizes(s: Settings) -> list[int]:
    return [max(50, round(n * s.size)) for n in s.peer_nodes]


def peers_params(s: Settings) -> dict[str, Any]:
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
        "info": f"info_ms: median of {PEER_INFOS} interleaved info requests after the maintain; "
        "info_first_ms: the first of them (it reads what the maintain wrote)",
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
    build_ours(db, graph)
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
        # One sample was noise (its first read after the maintain's writes re-reads the
        # pages they changed): the first is kept apart, and info_ms is the median.
        for i in range(PEER_INFOS):
            both(("info", {}), ("info", {}), "info_first_ms" if i == 0 else "info")
        record("rss_peak_mb", ours.rss_mb()[1], peer.rss_mb()[1])
    finally:
        ours.close()
        if peer is not None:
            peer.close()
    for name, (a, b) in figures.items():
        if name == "info":
            for part, v in peer_figure(statistics.median(a), statistics.median(b)).items():
                out[f"{key}info_ms.{part}"] = v
        elif name in ("query", "teach", "learn"):
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
