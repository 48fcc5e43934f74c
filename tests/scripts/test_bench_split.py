"""scripts/bench.py as the entry point of scripts/benches/: it runs as a script from the
repo root, every target names a registered benchmark, and a real run reports the key each
target of a cheap benchmark names."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from typing import Any

from tests import ROOT
from tests.scripts import bench_module, load_script

bench = load_script("bench")
registry = bench_module("registry")
targets = bench_module("targets")

# Benchmarks that take seconds at --size 0.01, and have targets.
CHEAP = ("ingest_batched", "ingest_single", "ping_in_loop")


def test_bench_py_runs_as_a_script_from_the_repo_root_and_lists_every_benchmark() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "scripts/bench.py", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    listed = " ".join(done.stdout.split())
    for b in registry.BENCHES:
        assert b.name in listed


def test_every_benchmark_has_one_name_and_every_target_names_a_registered_one() -> None:
    names = [b.name for b in registry.BENCHES]

    assert len(names) == len(set(names))
    assert set(registry.BENCH_BY_NAME) == set(names)
    assert {t.bench for t in targets.TARGETS} <= set(names)
    assert len({t.name for t in targets.TARGETS}) == len(targets.TARGETS)
    assert all(t.op in (">=", "<=") for t in targets.TARGETS)


def test_a_run_of_the_cheap_benchmarks_reports_the_key_each_of_their_targets_names() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        code = bench.main(["--json", "--only", ",".join(CHEAP), "--runs", "1", "--size", "0.01"])
    report: dict[str, Any] = json.loads(out.getvalue())

    assert code == 0, {name: report[name].get("error") for name in CHEAP}
    checked = [t for t in targets.TARGETS if t.bench in CHEAP]
    assert {t.bench for t in checked} == set(CHEAP)
    for t in checked:
        entry = report["targets"][t.name]
        assert isinstance(entry["value"], float | int), t.name
        assert entry["met"] in (True, False), t.name
        assert report[t.bench]["targets"][t.name] == entry
