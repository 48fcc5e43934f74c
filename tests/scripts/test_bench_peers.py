"""scripts/bench.py --only peers: the shared graph, the figures' shape, the skip when the
peer cannot be installed, and one small real run against openclawbrain's daemon."""

from __future__ import annotations

import collections
import io
import json
import os
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from tests.scripts import bench_module, load_script

bench = load_script("bench")
peers = bench_module("peers")
core = bench_module("core")

FIGURES = (
    "startup_ms",
    "query_first_ms",
    "query_p50_ms",
    "query_p95_ms",
    "teach_p50_ms",
    "teach_p95_ms",
    "learn_p50_ms",
    "learn_p95_ms",
    "save_ms",
    "maintain_ms",
    "info_ms",
    "rss_peak_mb",
)


def _run_main(argv: list[str]) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = bench.main(argv)
    report: dict[str, Any] = json.loads(out.getvalue())
    return code, report


def test_the_shared_graph_has_nodes_of_about_seventy_words_and_2_2_edges_each() -> None:
    graph = peers.peer_graph(1_000, 30, seed=7)

    assert len(graph.texts) == 1_000
    words = [len(t.split()) for t in graph.texts]
    assert min(words) >= 60
    assert max(words) <= 80
    assert 68 <= sum(words) / len(words) <= 72
    assert 2.1 <= len(graph.edges) / 1_000 <= 2.3
    assert len({(s, t) for s, t, _, _ in graph.edges}) == len(graph.edges)
    assert all(s != t for s, t, _, _ in graph.edges)
    assert len(graph.queries) == 30
    assert all(4 <= len(q.split()) <= 8 for q in graph.queries)


def test_the_shared_graph_holds_every_weight_tier_in_its_range() -> None:
    graph = peers.peer_graph(1_000, 0, seed=7)
    ranges = {name: (lo, hi) for name, _, lo, hi in peers.PEER_TIERS}

    tiers = collections.Counter(tier for _, _, _, tier in graph.edges)

    assert set(tiers) == {"strong", "medium", "weak", "negative"}
    for _, _, weight, tier in graph.edges:
        lo, hi = ranges[tier]
        assert lo <= weight <= hi
    assert 0.05 < tiers["negative"] / len(graph.edges) < 0.15


def test_the_shared_graph_is_the_same_for_the_same_seed() -> None:
    assert peers.peer_graph(300, 5, seed=3) == peers.peer_graph(300, 5, seed=3)
    assert peers.peer_graph(300, 5, seed=3) != peers.peer_graph(300, 5, seed=4)


def test_a_figure_reports_ours_peer_and_the_peers_time_over_ours() -> None:
    assert peers.peer_figure(2.0, 500.0) == {"ours": 2.0, "peer": 500.0, "speedup": 250.0}


def test_a_peer_that_cannot_be_installed_skips_the_bench_with_the_reason_in_the_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No index and an empty wheel directory: pip cannot find the package.
    empty = tmp_path / "wheels"
    empty.mkdir()
    monkeypatch.setenv("BRAIN_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))

    code, report = _run_main(["--json", "--only", "peers", "--peer-nodes", "50"])

    assert code == 0
    assert "error" not in report["peers"]
    assert "openclawbrain==12.2.6 could not be installed" in report["peers"]["skipped"]
    assert "openclawbrain" not in report["peers"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_both_daemons_answer_the_same_small_graph_and_every_figure_is_side_by_side() -> None:
    """Needs openclawbrain 12.2.6 from PyPI (installed once into ~/.cache/brain-bench).

    Outside CI a machine that cannot install it skips with pip's reason; in CI
    (``CI`` set), which reaches PyPI, that is a failure, never a silent skip.
    """
    try:
        peers.peer_python(peers.peer_cache_dir())
    except core.BenchSkipped as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must be able to install the peer: {exc}")
        pytest.skip(f"needs openclawbrain from PyPI: {exc}")

    code, report = _run_main(["--json", "--only", "peers", "--peer-nodes", "50"])

    assert code == 0, report["peers"]
    sized = report["peers"]["openclawbrain"]["nodes_50"]
    for name in FIGURES:
        figure = sized[name]
        assert set(figure) == {"ours", "peer", "speedup"}, name
        assert figure["ours"] > 0, name
        assert figure["peer"] > 0, name
        assert figure["speedup"] == pytest.approx(figure["peer"] / figure["ours"], rel=1e-3)
    loaded = sized["loaded"]
    assert loaded["nodes_ours"] == loaded["nodes_peer"] == 50
    assert loaded["edges_ours"] == loaded["edges_peer"]
    assert loaded["fired_mean_ours"] > 0
    assert loaded["fired_mean_peer"] > 0
