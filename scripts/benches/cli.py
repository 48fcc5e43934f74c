"""The command line: run the selected benchmarks, summarise the runs, print the report."""

from __future__ import annotations

import argparse
import io
import math
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, Final

import apsw
import orjson

from benches.core import Bench, BenchSkipped, Metrics, Settings, Shared
from benches.procs import reap_children
from benches.registry import BENCH_BY_NAME, BENCHES
from benches.summaries import locomo_path
from benches.targets import TARGETS, targets_report
from brain import __version__

# The first paragraph of scripts/bench.py's docstring, as --help has always shown it.
DESCRIPTION: Final = "Throughput and latency benchmarks of the brain engine and daemon (DESIGN §7)."


def run_bench(bench: Bench, shared: Shared) -> dict[str, Any]:
    """Run one benchmark ``--runs`` times (once if deterministic) and summarise."""
    settings = shared.settings
    runs = 1 if bench.deterministic else min(settings.runs, bench.max_runs or settings.runs)
    entry: dict[str, Any] = {"summary": bench.summary, "params": bench.params(settings)}
    values: dict[str, list[float]] = {}
    started = time.perf_counter()
    try:
        for i in range(runs):
            work = settings.root / f"{bench.name}-{i}"
            work.mkdir()
            try:
                metrics = bench.run(shared, work)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            for key, value in metrics.items():
                values.setdefault(key, []).append(float(value))
            print(f"  {bench.name} run {i + 1}/{runs}: {_brief(metrics)}", file=sys.stderr)
    except BenchSkipped as exc:
        entry["skipped"] = str(exc)
        print(f"  {bench.name} skipped: {exc}", file=sys.stderr)
    except Exception as exc:
        entry["error"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc(file=sys.stderr)
    entry["n_runs"] = len(next(iter(values.values()), []))
    if bench.deterministic:
        entry["params"]["note"] = "deterministic: measured once"
    runs_entry: dict[str, Any] = {}
    for key, vals in values.items():
        _put(entry, key, _round(statistics.median(vals)))
        _put(runs_entry, key, [_round(v) for v in vals])
    entry["runs"] = runs_entry
    entry["wall_s"] = _round(time.perf_counter() - started)
    return entry


def _put(tree: dict[str, Any], key: str, value: Any) -> None:
    """Store ``value`` under a dotted key as nested objects ("a.b" -> tree["a"]["b"])."""
    *groups, last = key.split(".")
    for group in groups:
        tree = tree.setdefault(group, {})
    tree[last] = value


def _round(value: float) -> float:
    if math.isnan(value) or value == 0:
        return value
    digits = max(0, 4 - math.floor(math.log10(abs(value))))
    return round(value, digits)


def _brief(metrics: Metrics) -> str:
    if any("." in k for k in metrics):  # nested figures: the headline of each group
        heads = ("p50_ms", "after_ingest_p50_ms", "db_ms_per_message", "query_p50_ms.speedup")
        shown = [(k, v) for k, v in metrics.items() if "." not in k or k.endswith(heads)]
    else:
        shown = list(metrics.items())[:4]
    return ", ".join(f"{k}={_round(v):g}" for k, v in shown)


def machine_info() -> dict[str, Any]:
    """Where the figures were measured."""
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "brain": __version__,
    }


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested figures as one level of dotted keys ({"a": {"b": 1}} -> {"a.b": 1})."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def render_table(results: dict[str, dict[str, Any]], targets: dict[str, Any]) -> str:
    """A human-readable summary of the medians."""
    buf = io.StringIO()
    width = max((len(n) for n in results), default=10)
    buf.write(f"{'benchmark':<{width}}  median figures\n")
    for name, entry in results.items():
        if "error" in entry:
            buf.write(f"{name:<{width}}  ERROR {entry['error']}\n")
            continue
        if "skipped" in entry:
            buf.write(f"{name:<{width}}  SKIPPED {entry['skipped']}\n")
            continue
        flat = {k: entry[k] for k in entry["runs"] if not isinstance(entry[k], dict)}
        figures = ", ".join(f"{k}={v:g}" for k, v in flat.items())
        buf.write(f"{name:<{width}}  {figures}\n")
        for group in entry["runs"]:
            if isinstance(entry[group], dict):
                sub = ", ".join(f"{k}={v:g}" for k, v in _flatten(entry[group]).items())
                buf.write(f"{'':<{width}}  {group}: {sub}\n")
    buf.write("\ntargets\n")
    for name, t in targets.items():
        verdict = {True: "MET", False: "MISSED", None: "not run"}[t["met"]]
        value = "-" if t["value"] is None else f"{t['value']:g}"
        buf.write(f"  {name}: {t['metric']} {t['target']}: {value}  [{verdict}]\n")
    return buf.getvalue()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--json", action="store_true", help="print one JSON object to stdout")
    parser.add_argument(
        "--only",
        help=f"comma-separated benchmarks to run: {', '.join(BENCH_BY_NAME)}; "
        "assemble and sweep add their 100,000-message variants only when named here "
        "(about 1 min and 0.5 min per run at --size 1)",
    )
    parser.add_argument("--runs", type=int, default=5, help="runs per benchmark (median)")
    parser.add_argument(
        "--size", type=float, default=1.0, help="workload scale factor (0.1 = quick smoke run)"
    )
    parser.add_argument("--tmp-dir", help="where temporary databases go (default: system temp)")
    parser.add_argument(
        "--locomo",
        help="a LoCoMo JSON file whose first conversation replay also replays, and that host "
        "replays (default: shared/data/locomo/locomo_dev.json in a folder above the checkout, "
        "or beside the working directory, when it exists)",
    )
    parser.add_argument(
        "--grep-messages",
        default="10000",
        help="comma-separated database sizes for grep (e.g. 10000,100000,1000000)",
    )
    parser.add_argument(
        "--vector-rows",
        default="100000,1000000",
        help="comma-separated vector counts for the vectors benchmark",
    )
    parser.add_argument(
        "--graph-nodes",
        default="1000,5000",
        help="comma-separated graph sizes in nodes for the graph benchmark (e.g. 1000,5000,50000)",
    )
    parser.add_argument(
        "--peer-nodes",
        default="1000,5000",
        help="comma-separated graph sizes in nodes for the peers benchmark (e.g. 1000 for a "
        "quick run; 5000 takes several minutes, almost all of it the peer's)",
    )
    parser.add_argument(
        "--graph-daemon-nodes",
        default="1000,5000,100000",
        help="comma-separated graph sizes in nodes for the graph_daemon benchmark (only with "
        "--only; building 100,000 nodes takes about 2 minutes)",
    )
    parser.add_argument(
        "--million-db",
        help="the million benchmark's database: built there if missing (and kept), reused "
        "(reads only) if it exists",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if not args.size > 0:
        parser.error("--size must be positive")
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in BENCH_BY_NAME]
        if unknown or not names:
            parser.error(f"unknown benchmark(s) {unknown}; choose from {', '.join(BENCH_BY_NAME)}")
        args.only = names
    return args


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected benchmarks and report."""
    args = parse_args(argv)
    selected = (
        [BENCH_BY_NAME[n] for n in args.only] if args.only else [b for b in BENCHES if not b.opt_in]
    )
    signal.signal(signal.SIGTERM, _terminate)
    started = time.perf_counter()
    began = datetime.now(UTC).isoformat(timespec="seconds")
    results: dict[str, dict[str, Any]] = {}
    root = Path(tempfile.mkdtemp(prefix="brain-bench-", dir=args.tmp_dir))
    try:
        sizes = {
            "grep_messages": tuple(int(n) for n in args.grep_messages.split(",")),
            "vector_rows": tuple(int(n) for n in args.vector_rows.split(",")),
            "graph_nodes": tuple(int(n) for n in args.graph_nodes.split(",")),
            "peer_nodes": tuple(int(n) for n in args.peer_nodes.split(",")),
            "graph_daemon_nodes": tuple(int(n) for n in args.graph_daemon_nodes.split(",")),
        }
        shared = Shared(
            Settings(
                args.runs,
                args.size,
                root,
                heavy=bool(args.only),
                locomo=locomo_path(args.locomo),
                million_db=args.million_db,
                **sizes,
            )
        )
        for bench in selected:
            print(f"{bench.name}: {bench.summary}", file=sys.stderr)
            results[bench.name] = run_bench(bench, shared)
    finally:
        reap_children()
        shutil.rmtree(root, ignore_errors=True)
    targets = targets_report(results)
    for t in TARGETS:
        if t.bench in results:
            results[t.bench].setdefault("targets", {})[t.name] = targets[t.name]
    report: dict[str, Any] = {
        **results,
        "targets": targets,
        "machine": machine_info(),
        "meta": {
            "started_at": began,
            "took_s": _round(time.perf_counter() - started),
            "runs": args.runs,
            "size": args.size,
            "only": args.only,
            "tmp_dir": args.tmp_dir or tempfile.gettempdir(),
            "daemon": "python -m daemon --db DB, default settings (BRAIN_* variables removed)",
        },
    }
    table = render_table(results, targets)
    if args.json:
        print(table, file=sys.stderr)
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(table)
    return 1 if any("error" in e for e in results.values()) else 0
