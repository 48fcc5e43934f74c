"""Vector top-k: exact against IVF at 100k and 1M rows, and a million embedded messages through
the daemon (``bigvectors``)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

import orjson

from benches.core import SEED, Metrics, Settings, Shared
from benches.corpus import diverse_texts
from benches.grep import GREP_SESSION_MESSAGES, VECTOR_QUERIES, build_grep_db, grep_queries
from benches.procs import child_env, frame, raw_daemon, read_answer
from benches.stats import latency_metrics, remove_db
from brain import Brain, BrainConfig, CompactionConfig

_VECTOR_CACHE: dict[int, Any] = {}


def _vector_sizes(s: Settings) -> list[int]:
    return [max(1_000, round(n * s.size)) for n in s.vector_rows]


def vectors_params(s: Settings) -> dict[str, Any]:
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
    from brain.vectors.quantise import scores_runs

    del work
    out: Metrics = {}
    queries = StaticEmbedder().embed(grep_queries(SEED + 31)[:VECTOR_QUERIES])
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
        # The matrix file stores an IVF's rows in list order (brain.vectors.matrix.listed):
        # a probe scores each list in place instead of gathering its rows.
        lcodes, lscales = codes[ivf.order], scales[ivf.order]
        listed = ivf.in_list_order()
        exact_ns: list[int] = []
        ivf_ns: list[int] = []
        listed_ns: list[int] = []
        ivf_cpu_ns: list[int] = []
        listed_cpu_ns: list[int] = []
        same_as_gathered: list[float] = []
        recall: list[float] = []
        recall_int8: list[float] = []
        recall_ivf_f32: list[float] = []
        for q in queries:
            truth = set(exact_top_k(matrix @ q, 10).tolist())  # float32, as before v19
            t1 = time.perf_counter_ns()
            exact = exact_top_k(scores(codes, scales, q), 10)
            exact_ns.append(time.perf_counter_ns() - t1)
            t1, c1 = time.perf_counter_ns(), time.process_time_ns()
            found, _ = ivf.search(
                lambda p, q=q, c=codes, s=scales: scores(c[p], s[p], q), q, 10, nprobe
            )
            ivf_ns.append(time.perf_counter_ns() - t1)
            ivf_cpu_ns.append(time.process_time_ns() - c1)
            t1, c1 = time.perf_counter_ns(), time.process_time_ns()
            at, _ = listed.search(
                lambda p, q=q, c=lcodes, s=lscales: scores(c[p], s[p], q),
                q,
                10,
                nprobe,
                lambda a, b, q=q, c=lcodes, s=lscales: scores_runs(c, s, a, b, q),
            )
            listed_ns.append(time.perf_counter_ns() - t1)
            listed_cpu_ns.append(time.process_time_ns() - c1)
            same_as_gathered.append(len(set(ivf.order[at].tolist()) & set(found.tolist())) / 10)
            recall.append(len(truth & set(found.tolist())) / len(truth))
            recall_int8.append(len(truth & set(exact.tolist())) / len(truth))
            recall_ivf_f32.append(len(set(exact.tolist()) & set(found.tolist())) / len(truth))
        for name, ns in (("exact", exact_ns), ("ivf", ivf_ns), ("ivf_listed", listed_ns)):
            lat = latency_metrics(ns)
            out[f"{key}{name}_p50_ms"], out[f"{key}{name}_p95_ms"] = lat["p50_ms"], lat["p95_ms"]
        out[f"{key}ivf_cpu_p50_ms"] = latency_metrics(ivf_cpu_ns)["p50_ms"]
        out[f"{key}ivf_listed_cpu_p50_ms"] = latency_metrics(listed_cpu_ns)["p50_ms"]
        out[f"{key}ivf_listed_same_top10_as_gathered"] = statistics.fmean(same_as_gathered)
        out[f"{key}recall_at_10"] = statistics.fmean(recall)
        out[f"{key}int8_exact_recall_at_10"] = statistics.fmean(recall_int8)
        out[f"{key}ivf_vs_int8_exact_recall_at_10"] = statistics.fmean(recall_ivf_f32)
        out[f"{key}lists"], out[f"{key}nprobe"] = float(ivf.lists), float(nprobe)
        out[f"{key}float32_matrix_mb"] = matrix.nbytes / 2**20
        out[f"{key}matrix_mb"] = (codes.nbytes + scales.nbytes) / 2**20
    return out


BIGVECTORS_MESSAGES: Final = 1_000_000
BIGVECTORS_QUERIES: Final = 30  # timed grep calls per mode and scope


def bigvectors_params(s: Settings) -> dict[str, Any]:
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
            out["ingest_s"], out["embed_s"] = build_grep_db(brain, count)
        finally:
            brain.close()
    matrix_file = db.with_name(f"{db.name}-vectors.message-summary")
    queries = grep_queries(SEED + 41)
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
        remove_db(db)
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
